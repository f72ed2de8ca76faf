"""How each of lesson 01's tests runs the student's code: its CUDA C checked first, then one
launch per kernel, whose instructions are counted (:mod:`.instructions`)."""

from __future__ import annotations

import numpy as np

from grader.exercises.ldmatrix.instructions import (
    MMA_USES,
    SCALAR_LOADS,
    emulated_stats,
    expect_instructions,
    gemm_instructions,
)
from grader.exercises.ldmatrix.launches import device, launch, zeros
from grader.exercises.ldmatrix.sources import check_sources


def run_address(ns, inputs, mode):
    check_sources(ns, "ADDRESS_CU")
    n = inputs["threads"]
    out = zeros(n, np.uint32, 0xFFFFFFFF)
    launch(ns["shared_address_kernel"], 1, n, out)
    return out.copy_to_host()


def run_predict(ns, inputs, mode):
    return np.asarray(ns["x1_fragment_map"]())


def run_ldmatrix(kernel: str, source: str, regs: int, instruction: str):
    """The run of an ldmatrix exercise: one warp loads ``regs`` registers a lane."""
    def run(ns, inputs, mode):
        check_sources(ns, source)
        out = zeros((32, regs), np.uint32)
        launch(ns[kernel], 1, 32, device(inputs["m"]), out)
        expect_instructions(ns[kernel], mode, f"the reference loads the registers with one "
                            f"{instruction} per warp; {SCALAR_LOADS}", LDSM=1)
        return out.copy_to_host()

    return run


def run_stmatrix(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "STMATRIX_CU")
    stored = zeros((16, 16), np.uint16)
    launch(ns["stmatrix_x4_kernel"], 1, 32, device(inputs["frags"]), stored)
    expect_instructions(ns["stmatrix_x4_kernel"], mode, "the reference stores the fragments "
                        "with one stmatrix .x4 per warp; registers written to shared memory "
                        "element by element give the same tile without it", STSM=1)
    round_trip = zeros((16, 16), np.uint16)
    launch(ns["roundtrip_kernel"], 1, 32, device(inputs["m"]), round_trip)
    expect_instructions(ns["roundtrip_kernel"], mode, "the round trip is one ldmatrix .x4 "
                        "and one stmatrix .x4 per warp; a copy through ordinary loads and "
                        "stores gives the same tile without them", LDSM=1, STSM=1)
    return stored.copy_to_host(), round_trip.copy_to_host()


def run_mma(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "LDMATRIX_X2_TRANS_CU", "MMA_CU")
    c = zeros((16, 8), np.float32, np.nan)
    launch(ns["mma_tile_kernel"], 1, 32, device(inputs["a"].view(np.uint16)),
           device(inputs["b"].view(np.uint16)), c)
    expect_instructions(ns["mma_tile_kernel"], mode, MMA_USES, LDSM=2, HMMA=1)
    return c.copy_to_host()


def run_gemm(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "LDMATRIX_X2_TRANS_CU", "MMA_CU")
    a, b = inputs["a"], inputs["b"]
    tile = int(ns.get("TILE", 32))
    m, n = a.shape[0], b.shape[1]
    c = zeros((m, n), np.float32, np.nan)
    launch(ns["gemm_kernel"], (n // tile, m // tile), 128, device(a.view(np.uint16)),
           device(b.view(np.uint16)), c)
    least, why = gemm_instructions(m, n, a.shape[1])
    expect_instructions(ns["gemm_kernel"], mode, why, executed=least, LDSM=1, HMMA=1)
    return c.copy_to_host()


def run_swizzle(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU")
    out = zeros((4, 32, 4), np.uint32)
    conflicts = None
    launch(ns["swizzled_fragments_kernel"], 1, 32, device(inputs["m"]), out)
    if mode == "sim":
        conflicts = emulated_stats().get("ldmatrix", {}).get("conflicts", 0)
    expect_instructions(ns["swizzled_fragments_kernel"], mode, "the reference loads each of "
                        "the four column slices with one ldmatrix .x4; the bank conflicts to "
                        f"remove are ldmatrix's, and {SCALAR_LOADS}", LDSM=1)
    return out.copy_to_host(), conflicts
