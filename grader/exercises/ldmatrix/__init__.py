"""Lesson 01 (ldmatrix / stmatrix / mma through inline PTX): the exercises, declared once.

Every exercise that has CUDA C first compiles it with NVRTC and assembles it
with ptxas on the CPU (:mod:`workbook.ptx`), checks numba's foreign-function
ABI and that the function contains the intended instruction (``ldmatrix .x1``
without ``.trans``, ``cvta.to.shared`` before it, ...). Then the kernels run:
on the GPU, or in the simulator where the PTX itself is executed
(:mod:`workbook.sim.foreign`). Each kernel must issue the instruction its exercise
is about (:func:`.instructions.expect_instructions`): the simulator counts the ``ldmatrix``,
``stmatrix`` and ``mma`` it executes, and on a GPU the compiled SASS must contain
``LDSM``, ``STSM``, ``HMMA`` where a disassembler is installed; fragments assembled
from ordinary shared-memory loads give the same numbers without the instruction. On
a GPU with Nsight Compute the metric rules of ``mma`` and ``gemm`` count the
instructions executed as well.

Input matrices hold distinct values, so that a wrong fragment can be traced to
the element it came from. float16 results are compared with a float64 numpy
reference within ``(K + K/16 + 1) * 2^-23 * (|A| @ |B|)``: one float32 unit of
truncation per product and per accumulation (tensor cores truncate); small-integer
inputs must come out exact.

The machinery sits beside this file: :mod:`.cases`, :mod:`.inputs` (with the references),
:mod:`.sources` (the CUDA C checks), :mod:`.launches`, :mod:`.instructions`, :mod:`.runs`,
:mod:`.checks`, :mod:`.profiles`; other submissions of each exercise in ``variants/``
(:mod:`grader.exercises.corpus`).
"""

from __future__ import annotations

from grader.exercise import Exercise
from grader.exercises.ldmatrix import checks, inputs, runs
from grader.exercises.ldmatrix.cases import (
    ADDRESS_CASES,
    FRAGMENT_CASES,
    GEMM_CASES,
    MMA_CASES,
    PREDICT_CASES,
    GemmCase,
)
from grader.exercises.ldmatrix.checks import SHARED_BYTES, expect_gemm, gemm_tolerance
from grader.exercises.ldmatrix.inputs import distinct_matrix
from grader.exercises.ldmatrix.instructions import (
    HMMA_SHARE,
    LDSM_SHARE,
    expect_instructions,
    gemm_instructions,
)
from grader.exercises.ldmatrix.profiles import GEMM_PROFILE, profile_gemm, profile_swizzle
from grader.metric_rules import MetricRule

__all__ = ["EXERCISES", "GEMM_PROFILE", "HMMA_SHARE", "LDSM_SHARE", "LESSON", "SHARED_BYTES",
           "GemmCase", "distinct_matrix", "expect_gemm", "expect_instructions",
           "gemm_instructions", "gemm_tolerance"]

LESSON = "01_ldmatrix"

ONE_WARP = ("one warp, one tile, no loop: every check counts the instruction it is about, "
            "exactly (as the simulator runs it; in the SASS on a GPU), which is what Nsight "
            "Compute would count; a launch this small has no speed to measure")
# Metric rules (GPU only). swizzle: the swizzle must remove every bank conflict. gemm: the
# ldmatrix and mma instructions executed, counted by Nsight Compute against the reference's
# count in the same run (the simulator holds a kernel to the same shares, see runs.run_gemm;
# the SASS check only sees whether the instructions are there at all, and only where a
# disassembler is installed).
COUNTED = "any GPU: a count compared with the reference's count in the same run"

EXERCISES = (
    Exercise(
        id="ldmatrix.address", lesson=LESSON,
        title="foreign-function ABI: a shared-space address from C",
        entry="shared_address_kernel", needs=("ADDRESS_CU",), points=1,
        cases=ADDRESS_CASES, make_inputs=inputs.address_inputs, reference=inputs.no_reference,
        run=runs.run_address, verify=checks.verify_address,
        no_metric_rule="a shared-space address, checked exactly; one tiny launch, nothing to "
                       "measure",
    ),
    Exercise(
        id="ldmatrix.predict", lesson=LESSON,
        title="predict the ldmatrix .x1 fragment map (numpy)",
        entry="x1_fragment_map", points=1,
        cases=PREDICT_CASES, make_inputs=inputs.no_inputs, reference=inputs.predict_reference,
        run=runs.run_predict, verify=checks.verify_predict,
        no_metric_rule="CPU-only: numpy",
    ),
    Exercise(
        id="ldmatrix.x1", lesson=LESSON, title="ldmatrix .x1: one 8x8 matrix",
        entry="ldmatrix_x1_kernel", needs=("LDMATRIX_X1_CU",), points=1,
        cases=FRAGMENT_CASES, make_inputs=inputs.matrix_inputs((8, 8)),
        reference=inputs.x1_reference,
        run=runs.run_ldmatrix("ldmatrix_x1_kernel", "LDMATRIX_X1_CU", 1, "ldmatrix .x1"),
        verify=checks.verify_x1,
        no_metric_rule=ONE_WARP,
    ),
    Exercise(
        id="ldmatrix.x4", lesson=LESSON, title="ldmatrix .x4: an mma A fragment",
        entry="ldmatrix_x4_kernel", needs=("LDMATRIX_X4_CU",), points=1,
        cases=FRAGMENT_CASES, make_inputs=inputs.matrix_inputs((16, 16)),
        reference=inputs.x4_reference,
        run=runs.run_ldmatrix("ldmatrix_x4_kernel", "LDMATRIX_X4_CU", 4, "ldmatrix .x4"),
        verify=checks.verify_x4,
        no_metric_rule=ONE_WARP,
    ),
    Exercise(
        id="ldmatrix.trans", lesson=LESSON, title="ldmatrix .x2.trans: an mma B fragment",
        entry="ldmatrix_x2_trans_kernel", needs=("LDMATRIX_X2_TRANS_CU",), points=1,
        cases=FRAGMENT_CASES, make_inputs=inputs.matrix_inputs((16, 8)),
        reference=inputs.trans_reference,
        run=runs.run_ldmatrix("ldmatrix_x2_trans_kernel", "LDMATRIX_X2_TRANS_CU", 2,
                              "ldmatrix .x2.trans"),
        verify=checks.verify_trans,
        no_metric_rule=ONE_WARP,
    ),
    Exercise(
        id="ldmatrix.stmatrix", lesson=LESSON,
        title="stmatrix .x4, and an ldmatrix -> stmatrix round trip",
        entry="stmatrix_x4_kernel", needs=("STMATRIX_CU", "roundtrip_kernel"), points=2,
        cases=FRAGMENT_CASES, make_inputs=inputs.stmatrix_inputs, reference=inputs.no_reference,
        run=runs.run_stmatrix, verify=checks.verify_stmatrix,
        no_metric_rule=ONE_WARP,
    ),
    Exercise(
        id="ldmatrix.mma", lesson=LESSON, title="one mma.m16n8k16 tile from ldmatrix fragments",
        entry="mma_tile_kernel", needs=("MMA_CU",), points=2,
        cases=MMA_CASES, make_inputs=inputs.gemm_inputs, reference=inputs.gemm_reference,
        run=runs.run_mma, verify=checks.verify_mma,
        no_metric_rule=ONE_WARP,
    ),
    Exercise(
        id="ldmatrix.gemm", lesson=LESSON, title="GEMM from ldmatrix fragments and mma tiles",
        entry="gemm_kernel", points=2,
        cases=GEMM_CASES, make_inputs=inputs.gemm_inputs, reference=inputs.gemm_reference,
        run=runs.run_gemm, verify=checks.verify_gemm,
        metric_rules=(
            MetricRule(
                "sm__inst_executed_op_ldsm.sum", "ldmatrix instructions executed (LDSM)",
                "the fragments of both operands come from ldmatrix: per warp and 16-wide step "
                "of k the reference issues 3 (one .x4 for A, two .x2.trans for B), a kernel "
                "loading B's with one .x4 issues 2, one assembling B's from scalar shared-memory "
                "loads 1, one assembling both (as the lesson's gemm_scalar_kernel) none",
                COUNTED, min_ratio=LDSM_SHARE),
            MetricRule(
                "sm__inst_executed_pipe_tensor_op_hmma.sum",
                "tensor-core mma instructions executed (HMMA)",
                "every 16x8x16 product runs on the tensor cores: M*N*K/2048 mma.m16n8k16 for "
                "any tensor-core GEMM, none for one of scalar multiply-adds",
                COUNTED, min_ratio=HMMA_SHARE),
        ),
        profile=profile_gemm,
    ),
    Exercise(
        id="ldmatrix.swizzle", lesson=LESSON,
        title="XOR-swizzled tile: ldmatrix without bank conflicts",
        entry="swizzled_fragments_kernel", needs=("swizzle",), points=1,
        cases=FRAGMENT_CASES, make_inputs=inputs.matrix_inputs((16, 64)),
        reference=inputs.slices_reference,
        run=runs.run_swizzle, verify=checks.verify_swizzle,
        metric_rules=(
            MetricRule(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "shared-load bank conflicts",
                "with the XOR swizzle the eight 16-byte rows an ldmatrix phase reads sit in "
                "eight different groups of banks",
                "NVIDIA H200 (cc 9.0), 2026-11-22", max_value=0),
        ),
        profile=profile_swizzle,
    ),
)
