"""Lesson 04 (layernorm): its five exercises, each declared once.

Beside the declarations: ``cases.py`` (typed cases and each exercise's cases),
``inputs.py`` (rows of each kind, float64 references), ``buffers.py`` (device buffers
with poison and never-written markers), ``runs.py`` (the launches), ``checks.py``
(tolerances and the comparison), ``diagnoses.py`` (the mistake behind a wrong result),
``variance.py`` (exercise 1, on the CPU), ``profiles.py`` (the launches the metric rules
measure), and ``variants/`` (other submissions of each exercise: slow, correct, buggy;
see :mod:`grader.exercises.corpus`).
"""

from __future__ import annotations

from grader.exercise import Exercise
from grader.exercises.layernorm.buffers import never_written, unwritten
from grader.exercises.layernorm.cases import (
    UNROLL,
    NormCase,
    VarianceCase,
    block_cases,
    dispatch_cases,
    exact_size,
    variance_cases,
    warp_cases,
)
from grader.exercises.layernorm.checks import expect_layer_norm, verify_dispatch, verify_kernel
from grader.exercises.layernorm.inputs import (
    make_layer_norm,
    make_rows,
    make_variance,
    reference_dispatch,
    reference_layer_norm,
    reference_variance,
)
from grader.exercises.layernorm.profiles import (
    DISPATCH_SHAPE,
    profile_block,
    profile_dispatch,
    profile_warp,
)
from grader.exercises.layernorm.runs import run_block, run_dispatch, run_warp
from grader.exercises.layernorm.variance import run_variance, verify_variance
from grader.metric_rules import MetricRule

__all__ = ["EXERCISES", "LESSON", "UNROLL", "NormCase", "VarianceCase", "expect_layer_norm",
           "make_rows", "never_written", "reference_layer_norm", "unwritten"]

LESSON = "04_layernorm"

# Metric rules (GPU only): compared with the reference solution profiled in the same run.
TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22"
DURATION = "gpu__time_duration.sum"
GLOBAL_LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
LAYERNORM_KERNELS = ("warp_layernorm_kernel", "layernorm_block_smem_kernel",
                     "layernorm_block_uncached_kernel")
KEEP_DRAM_BUSY = "a memory-bound kernel should keep DRAM busy"

WARP_CASES = warp_cases()
SMEM_CASES = block_cases()
UNCACHED_CASES = block_cases()  # the same shapes as SMEM_CASES

EXERCISES = (
    Exercise(
        id="layernorm.variance", lesson=LESSON,
        title="variance three ways (two-pass, naive, Welford) and Chan's combine",
        entry="variance_welford",
        needs=("variance_two_pass", "variance_naive", "welford_update", "welford_combine"),
        points=2,
        cases=variance_cases(),
        make_inputs=make_variance, reference=reference_variance,
        run=run_variance, verify=verify_variance,
        no_metric_rule="CPU-only: numpy",
    ),
    Exercise(
        id="layernorm.warp", lesson=LESSON,
        title="warp LayerNorm: a thread group per row, the row in registers",
        entry="make_warp_layernorm", needs=("welford_warp_allreduce",), points=3,
        cases=WARP_CASES, sanitizer_cases=exact_size(WARP_CASES["gpu"]),
        make_inputs=make_layer_norm, reference=reference_layer_norm,
        run=run_warp, verify=verify_kernel,
        # Duration and DRAM throughput do not separate the three-pass variant on an H200
        # (1.19x and 0.84x: the re-reads hit L2), so only the load count is a rule here.
        metric_rules=(
            MetricRule(metric=GLOBAL_LOADS, label="global load requests",
                       why="the row stays in registers: each element is loaded from global "
                           "memory once", tuned_on=TUNED_ON, max_ratio=1.2),
        ),
        profile=profile_warp, profile_kernels=("warp_layernorm_kernel",),
    ),
    Exercise(
        id="layernorm.block_smem", lesson=LESSON,
        title="block LayerNorm with the row in shared memory",
        entry="layernorm_block_smem_kernel", needs=("welford_block_allreduce",), points=3,
        cases=SMEM_CASES, sanitizer_cases=exact_size(SMEM_CASES["gpu"]),
        make_inputs=make_layer_norm, reference=reference_layer_norm,
        run=run_block("layernorm_block_smem_kernel", shared=True), verify=verify_kernel,
        metric_rules=(
            MetricRule(metric=DURATION, label="duration",
                       why="the whole block computes the statistics in parallel while loads "
                           "are in flight", tuned_on=TUNED_ON, max_ratio=1.3),
            MetricRule(metric=DRAM_PCT, label="DRAM throughput (% of peak)",
                       why=KEEP_DRAM_BUSY, tuned_on=TUNED_ON, min_ratio=0.75),
        ),
        profile=profile_block("layernorm_block_smem_kernel", 256, shared=True),
    ),
    Exercise(
        id="layernorm.block_uncached", lesson=LESSON,
        title="uncached block LayerNorm (the row read twice)",
        entry="layernorm_block_uncached_kernel", needs=("welford_block_allreduce",), points=2,
        cases=UNCACHED_CASES, sanitizer_cases=exact_size(UNCACHED_CASES["gpu"]),
        make_inputs=make_layer_norm, reference=reference_layer_norm,
        run=run_block("layernorm_block_uncached_kernel", shared=False), verify=verify_kernel,
        metric_rules=(
            MetricRule(metric=DURATION, label="duration",
                       why="coalesced loads and stores, UNROLL loads in flight per thread",
                       tuned_on=TUNED_ON, max_ratio=1.3),
            MetricRule(metric=DRAM_PCT, label="DRAM throughput (% of peak)",
                       why=KEEP_DRAM_BUSY, tuned_on=TUNED_ON, min_ratio=0.75),
        ),
        profile=profile_block("layernorm_block_uncached_kernel", 512, shared=False),
    ),
    Exercise(
        id="layernorm.dispatch", lesson=LESSON,
        title="dispatcher by row length and occupancy, float32 and float16",
        entry="layer_norm", needs=("plan_layer_norm",), points=2,
        cases=dispatch_cases(),
        make_inputs=make_layer_norm, reference=reference_dispatch,
        run=run_dispatch, verify=verify_dispatch,
        metric_rules=(
            MetricRule(metric=DURATION,
                       label=f"duration ({DISPATCH_SHAPE[0]} x {DISPATCH_SHAPE[1]} float32)",
                       why="short rows need thread groups narrower than a warp: a whole warp "
                           "per 16-column row leaves half its lanes idle",
                       tuned_on=TUNED_ON, max_ratio=1.3),
        ),
        profile=profile_dispatch, profile_kernels=LAYERNORM_KERNELS,
    ),
)
