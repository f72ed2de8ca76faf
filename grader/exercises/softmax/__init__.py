"""Lesson 03 (softmax): its exercises, each declared once with its cases and metric rules.

Every test is a ``(rows, cols)`` matrix of float32 or float16 whose rows are softmaxed
(or log-softmaxed) and compared with a float64 reference. The machinery, one job a module:

* :mod:`~grader.exercises.softmax.cases` -- the typed :class:`Shape` and each exercise's
  cases per mode, with the boundary shapes made from the kernels' launch parameters;
* :mod:`~grader.exercises.softmax.inputs` -- the input kinds and the reference;
* :mod:`~grader.exercises.softmax.checks` -- the tolerance and the diagnosis of a wrong
  result (:mod:`~grader.exercises.softmax.mistakes`: the mistakes it names);
* :mod:`~grader.exercises.softmax.buffers` -- guard rows and padding that show stray
  reads and writes;
* :mod:`~grader.exercises.softmax.runs` and :mod:`~grader.exercises.softmax.profiles` --
  the launches of the checks and of the GPU profile;
* :mod:`~grader.exercises.softmax.plans` -- the dispatcher's choices the grader expects;
* ``variants/`` -- the other submissions of each exercise (:mod:`grader.exercises.corpus`).
"""

from __future__ import annotations

from grader.exercise import Exercise
from grader.exercises.softmax import runs
from grader.exercises.softmax.buffers import GUARD_ROWS, SENTINEL
from grader.exercises.softmax.cases import (
    BLOCK_CASES,
    NAIVE_CASES,
    UNCACHED_CASES,
    WARP_CASES,
    Shape,
    cpu_cases,
    dispatch_cases,
    exact_size,
    log_cases,
)
from grader.exercises.softmax.checks import (
    expect_softmax,
    tolerance,
    verify,
    verify_dispatch,
    verify_log,
)
from grader.exercises.softmax.inputs import (
    make_dispatch,
    make_matrix,
    reference,
    reference_dispatch,
)
from grader.exercises.softmax.plans import (
    SMEM_LIMIT,
    WARP_MAX_COLS,
    expected_variant,
    warp_config,
)
from grader.exercises.softmax.profiles import (
    BLOCK_PROFILE,
    DISPATCH_PROFILE,
    SOFTMAX_KERNELS,
    UNCACHED_PROFILE,
    WARP_PROFILE,
    profile_block,
    profile_dispatch,
    profile_warp,
)
from grader.metric_rules import MetricRule

LESSON = "03_softmax"

# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---

TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22"
DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SMEM_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SMEM_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"

# The row-major pack layout makes each shared-memory store or load of 32 lanes a 4-way
# conflict (3 extra wavefronts): 3/32 of the element count, about 3.1 million each way here.
# The reference counts some too (its block reductions: 0.15 M stores, 0.31 M loads on an
# H100, 2026-11-25), and a correct kernel with its own reductions 1.11x the reference's
# loads; the row-major slow variant 22x / 11x. Bound: twice the reference's count.
CONFLICT_RATIO = 2.0


def _rule(metric, label, why, **bound) -> MetricRule:
    return MetricRule(metric=metric, label=label, why=why, tuned_on=TUNED_ON, **bound)


# --- the exercises ------------------------------------------------------------------------------

EXERCISES = (
    Exercise(
        id="softmax.cpu", lesson=LESSON, title="numerically stable softmax in numpy",
        entry="softmax_cpu", points=1,
        cases={"sim": cpu_cases(), "gpu": cpu_cases()},
        make_inputs=make_matrix, reference=reference, run=runs.run_cpu("softmax_cpu"),
        verify=verify,
        no_metric_rule="CPU-only: numpy",
    ),
    Exercise(
        id="softmax.naive", lesson=LESSON,
        title="naive GPU softmax: max, exp-sum and normalise kernels",
        entry="row_max_kernel", needs=("exp_sum_kernel", "normalize_kernel", "softmax_naive"),
        points=1,
        cases=NAIVE_CASES,
        make_inputs=make_matrix, reference=reference, run=runs.run_naive, verify=verify,
        no_metric_rule="the lesson's baseline, slow by design (one thread per row, reads "
                       "strided by the row length): its speed is what the later kernels "
                       "improve on, not a target",
    ),
    Exercise(
        id="softmax.warp", lesson=LESSON,
        title="warp softmax: a row in registers, shuffle all-reduce",
        entry="make_warp_softmax", points=3,
        cases=WARP_CASES, sanitizer_cases=exact_size(WARP_CASES["gpu"]),
        make_inputs=make_matrix, reference=reference, run=runs.run_warp, verify=verify,
        metric_rules=(
            _rule(DRAM_PCT, "DRAM throughput (% of peak)", "each row is read once with "
                  "16-byte coalesced loads and written once: DRAM should stay busy",
                  min_ratio=0.8),
            _rule(DURATION, "duration", "one read and one write per element, at DRAM speed",
                  max_ratio=1.25),
        ),
        profile=profile_warp, profile_kernels=("warp_softmax_kernel",),
    ),
    Exercise(
        id="softmax.block_smem", lesson=LESSON,
        title="block softmax with the row cached in shared memory",
        entry="make_block_smem_softmax", points=2,
        cases=BLOCK_CASES, sanitizer_cases=exact_size(BLOCK_CASES["gpu"]),
        make_inputs=make_matrix, reference=reference,
        run=runs.run_block("make_block_smem_softmax", cached=True), verify=verify,
        metric_rules=(
            _rule(SMEM_ST_CONFLICTS, "shared-memory store bank conflicts", "packs stored "
                  "column-major put the 32 lanes of a store on 32 different banks",
                  max_ratio=CONFLICT_RATIO),
            _rule(SMEM_LD_CONFLICTS, "shared-memory load bank conflicts", "packs read back "
                  "column-major: one bank per lane", max_ratio=CONFLICT_RATIO),
        ),
        profile=profile_block("make_block_smem_softmax", True, BLOCK_PROFILE, 128),
        profile_kernels=("block_smem_softmax_kernel",),
    ),
    Exercise(
        id="softmax.block_uncached", lesson=LESSON,
        title="block softmax for long rows: online max and sum",
        entry="make_block_uncached_softmax", points=2,
        cases=UNCACHED_CASES, sanitizer_cases=exact_size(UNCACHED_CASES["gpu"]),
        make_inputs=make_matrix, reference=reference,
        run=runs.run_block("make_block_uncached_softmax", cached=False), verify=verify,
        metric_rules=(
            _rule(DRAM_PCT, "DRAM throughput (% of peak)", "every thread of the block "
                  "streams 16-byte packs: DRAM should stay busy", min_ratio=0.8),
            _rule(DURATION, "duration", "two reads and one write per element, the second "
                  "read partly from L2 (correct kernels measured up to 1.13x on an H100, "
                  "one thread per row 72x)", max_ratio=1.5),
        ),
        profile=profile_block("make_block_uncached_softmax", False, UNCACHED_PROFILE, 512),
        profile_kernels=("block_uncached_softmax_kernel",),
    ),
    Exercise(
        id="softmax.dispatch", lesson=LESSON,
        title="dispatcher: kernel by columns, block size by occupancy",
        entry="softmax_gpu", needs=("choose_block_size", "plan"), points=2,
        cases=dispatch_cases(),
        make_inputs=make_dispatch, reference=reference_dispatch, run=runs.run_dispatch,
        verify=verify_dispatch,
        metric_rules=(
            MetricRule(DURATION, f"duration ({DISPATCH_PROFILE[0]} x {DISPATCH_PROFILE[1]} "
                       "float32)", "short rows need thread groups narrower than a warp "
                       "(warp_config: 4 lanes and 2 rows each for 16 float32 columns): a "
                       "whole warp per 16-column row leaves 28 of its 32 lanes idle",
                       "NVIDIA H100 80GB HBM3, 2026-11-25: correct plans up to 1.09x, a "
                       "whole warp per row 6.9x (H200, same day: 1.14x and 7.8x)",
                       max_ratio=1.5),
        ),
        profile=profile_dispatch, profile_kernels=SOFTMAX_KERNELS,
    ),
    Exercise(
        id="softmax.log", lesson=LESSON,
        title="log-softmax on the CPU and with the same kernels",
        entry="log_softmax_cpu", needs=("softmax_gpu",), points=1,
        cases=log_cases(),
        make_inputs=make_matrix, reference=reference, run=runs.run_log, verify=verify_log,
        no_metric_rule="its code, log_softmax_cpu, runs on the CPU (numpy); on the GPU it runs "
                       "softmax_gpu(log=True), whose plan and kernels are the dispatch, warp "
                       "and block exercises', measured by their rules",
    ),
)

__all__ = ["EXERCISES", "GUARD_ROWS", "LESSON", "SENTINEL", "SMEM_LIMIT", "WARP_MAX_COLS",
           "WARP_PROFILE", "Shape", "expect_softmax", "expected_variant", "reference",
           "tolerance", "warp_config"]
