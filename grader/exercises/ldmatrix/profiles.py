"""The launches Nsight Compute profiles on a GPU for lesson 01's metric rules."""

from __future__ import annotations

import numpy as np

from grader.exercises.ldmatrix.inputs import distinct_matrix
from grader.exercises.ldmatrix.launches import device, launch, zeros
from grader.profiled_range import unprofiled


def profile_swizzle(ns):
    """One block loading a 16 x 64 tile: a first launch warms up outside the profiled range,
    the second is profiled."""
    m = distinct_matrix(np.random.default_rng(0), (16, 64))

    def run():
        launch(ns["swizzled_fragments_kernel"], 1, 32, device(m), zeros((4, 32, 4), np.uint32))

    with unprofiled():
        run()
    run()


GEMM_PROFILE = (512, 512, 512)  # M, N, K: 256 blocks of 4 warps, 16 tiles of K each


def profile_gemm(ns):
    """A GEMM_PROFILE product: a first launch warms up outside the profiled range, the second
    is profiled."""
    rng = np.random.default_rng(0)
    m, n, k = GEMM_PROFILE
    tile = int(ns.get("TILE", 32))
    a, b = (device(rng.standard_normal(s).astype(np.float16).view(np.uint16))
            for s in ((m, k), (k, n)))

    def run():
        launch(ns["gemm_kernel"], (n // tile, m // tile), 128, a, b, zeros((m, n), np.float32))

    with unprofiled():
        run()
    run()
