"""workbook.collectives (warp and block all-reduce) and workbook.occupancy."""

import numpy as np
import pytest
from numba import cuda, float32

from workbook.collectives import (
    NEG_INF,
    block_all_reduce_max,
    block_all_reduce_sum,
    warp_all_reduce_max,
    warp_all_reduce_sum,
)
from workbook.occupancy import (
    HOPPER,
    allow_dynamic_shared_memory,
    estimate_active_blocks,
    max_active_blocks,
)

WIDTHS = (1, 2, 4, 8, 16, 32)

# Kernels live at module level: the simulator swaps the module-level name ``cuda``.


def _group_kernel(width):
    @cuda.jit
    def group_reduce(values, maxima, sums):
        t = cuda.grid(1)
        v = values[t]
        maxima[t] = warp_all_reduce_max(v, width)
        sums[t] = warp_all_reduce_sum(v, width)

    return group_reduce


GROUP_KERNELS = {w: _group_kernel(w) for w in WIDTHS}


@cuda.jit
def block_reduce_twice(values, out):
    """max, sum, then a second sum of different values: the shared slots are reused."""
    t = cuda.threadIdx.x
    v = values[cuda.blockIdx.x, t]
    m = block_all_reduce_max(v)
    s = block_all_reduce_sum(v)
    s2 = block_all_reduce_sum(float32(2.0) * v + float32(1.0))
    out[cuda.blockIdx.x, t, 0] = m
    out[cuda.blockIdx.x, t, 1] = s
    out[cuda.blockIdx.x, t, 2] = s2


@cuda.jit
def fill_from_dynamic_shared(out):
    cache = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    n = out.size
    for i in range(t, n, cuda.blockDim.x):
        cache[i] = i
    cuda.syncthreads()
    for i in range(t, n, cuda.blockDim.x):
        out[i] = cache[n - 1 - i]


@pytest.mark.parametrize("width", WIDTHS)
def test_warp_all_reduce_gives_each_lane_its_group_result(width, rng):
    values = rng.standard_normal(64).astype(np.float32)
    values[:width] = -np.inf  # a group of -inf keeps -inf as its max
    maxima = np.zeros(64, np.float32)
    sums = np.zeros(64, np.float32)
    GROUP_KERNELS[width][1, 64](values, maxima, sums)
    groups = values.reshape(-1, width)
    expected_max = np.repeat(groups.max(axis=1), width)
    np.testing.assert_array_equal(maxima, expected_max)
    finite = np.isfinite(groups).all(axis=1)
    expected_sum = np.repeat(groups.astype(np.float64).sum(axis=1), width)
    keep = np.repeat(finite, width)
    np.testing.assert_allclose(sums[keep], expected_sum[keep], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [32, 96, 256])
def test_block_all_reduce_gives_every_thread_the_block_result(threads, rng):
    blocks = 2
    values = rng.standard_normal((blocks, threads)).astype(np.float32)
    out = np.zeros((blocks, threads, 3), np.float32)
    block_reduce_twice[blocks, threads](values, out)
    for b in range(blocks):
        v = values[b].astype(np.float64)
        np.testing.assert_array_equal(out[b, :, 0], np.float32(v.max()))
        np.testing.assert_allclose(out[b, :, 1], v.sum(), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(out[b, :, 2], (2 * v + 1).sum(), rtol=1e-5, atol=1e-4)


def test_block_max_of_minus_infinity_is_minus_infinity():
    values = np.full((1, 64), -np.inf, np.float32)
    out = np.zeros((1, 64, 3), np.float32)
    block_reduce_twice[1, 64](values, out)
    assert (out[0, :, 0] == NEG_INF).all()


def test_occupancy_estimate_follows_the_limits():
    assert estimate_active_blocks(128) == 16            # threads: 2048 / 128
    assert estimate_active_blocks(1024) == 2
    assert estimate_active_blocks(64) == 32             # blocks per SM
    assert estimate_active_blocks(128, 16384) == 13     # 228 KiB / (16 + 1 KiB)
    assert estimate_active_blocks(256, 0, registers_per_thread=128) == 2
    assert estimate_active_blocks(128, HOPPER.shared_per_block) == 1
    assert estimate_active_blocks(128, HOPPER.shared_per_block + 4) == 0
    assert estimate_active_blocks(2048) == 0


@pytest.mark.sim_only
def test_simulator_occupancy_is_the_estimate():
    assert max_active_blocks(fill_from_dynamic_shared, 256, 64 * 1024) == \
        estimate_active_blocks(256, 64 * 1024)


@pytest.mark.gpu
def test_gpu_occupancy_and_large_dynamic_shared_memory():
    n = 25_000  # 100 kB of float32: more than the 48 KiB a kernel may use by default
    out = cuda.device_array(n, np.float32)
    args = (out,)
    small = max_active_blocks(fill_from_dynamic_shared, 128, 1024, args)
    large = max_active_blocks(fill_from_dynamic_shared, 128, 4 * n, args)
    assert small >= large >= 1
    assert max_active_blocks(fill_from_dynamic_shared, 128, 300 * 1024, args) == 0
    allow_dynamic_shared_memory(fill_from_dynamic_shared, 4 * n, args)
    fill_from_dynamic_shared[1, 256, 0, 4 * n](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(n, dtype=np.float32)[::-1])
