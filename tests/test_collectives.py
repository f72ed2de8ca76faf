"""workbook.collectives (warp and block all-reduce) and workbook.occupancy."""

import numpy as np
import pytest

import workbook

# isort: split
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
    compiled,
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


@cuda.jit
def polynomial_rows(x, out):
    """Sixteen values live at once: more registers than the kernels above."""
    t = cuda.grid(1)
    if t < out.size:
        a0, a1, a2, a3 = x[t, 0], x[t, 1], x[t, 2], x[t, 3]
        a4, a5, a6, a7 = x[t, 4], x[t, 5], x[t, 6], x[t, 7]
        a8, a9, a10, a11 = x[t, 8], x[t, 9], x[t, 10], x[t, 11]
        a12, a13, a14, a15 = x[t, 12], x[t, 13], x[t, 14], x[t, 15]
        acc = float32(0.0)
        for k in range(16):
            v = float32(k)
            acc += ((((a0 * v + a1) * v + a2) * v + a3) * v + a4) * (a5 - v) * (a6 + v)
            acc += ((a7 * v + a8) * v + a9) * (a10 - v) * (a11 + v) * (a12 * v + a13)
            acc += a14 * a15 * v
        out[t] = acc


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


# Per-SM limits of compute capability 9.0 (H100, H200) from NVIDIA's own tables: CCCL's
# cuda/__device/arch_traits.h for sm_90 (228 KiB of shared memory per SM, 32 resident blocks,
# 2048 threads, 1 KiB of shared memory reserved per block, so 227 KiB the most one block may
# opt in to) and cuda_occupancy.h (65536 registers per SM, allocated per warp in units of 256).
# Each expected count below is worked out from those numbers alone.
@pytest.mark.parametrize("block,dynamic,registers,static,expected", [
    (32, 0, 32, 0, 32),            # 32-block limit (the threads would allow 64)
    (1024, 0, 32, 0, 2),           # threads 2048 / 1024; registers 65536 / 32768 = 2
    (1024, 0, 64, 0, 1),           # registers: 64 x 1024 = 65536 per block
    (256, 0, 64, 0, 4),            # 64 x 32 = 2048 per warp, 8 warps: 65536 / 16384
    (128, 0, 40, 0, 12),           # 40 x 32 = 1280 per warp (5 units), 4 warps: 65536 / 5120
    (128, 0, 33, 0, 12),           # 33 x 32 = 1056 per warp, rounded up to 1280: as above
    (32, 0, 255, 0, 8),            # 255 x 32 = 8160, rounded up to 8192 per warp: 65536 / 8192
    (128, 100 * 1024, 32, 0, 2),   # shared: 233472 / (102400 + 1024) = 2.26
    (64, 48 * 1024, 32, 8 * 1024, 4),  # 49152 + 8192 + 1024 = 58368 per block: 233472 / 58368
    (128, 232448, 32, 0, 1),       # 227 KiB: the most one block may have
    (128, 232449, 32, 0, 0),       # one byte more: the block cannot run
])
def test_occupancy_estimate_for_compute_capability_9_by_hand(block, dynamic, registers, static,
                                                              expected):
    assert estimate_active_blocks(block, dynamic, registers_per_thread=registers,
                                  static_shared_bytes=static) == expected


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


def _occupancy_launches():
    """(kernel, block size, dynamic shared bytes, arguments) of a few launches that differ in
    threads, registers, static and dynamic shared memory."""
    out = cuda.device_array(25_000, np.float32)
    values = cuda.device_array((2, 1024), np.float32)
    triples = cuda.device_array((2, 1024, 3), np.float32)
    rows = cuda.device_array((4096, 16), np.float32)
    return [(fill_from_dynamic_shared, block, dynamic, (out,))
            for block, dynamic in ((32, 0), (128, 1024), (256, 16 * 1024), (128, 100 * 1024),
                                   (1024, 48 * 1024), (64, 200 * 1024))] + \
        [(block_reduce_twice, block, 0, (values, triples)) for block in (64, 256, 1024)] + \
        [(polynomial_rows, block, 0, (rows, out)) for block in (128, 512, 1024)]


@pytest.mark.gpu
@pytest.mark.skipif(workbook.MODE == "gpu" and
                    cuda.get_current_device().compute_capability != (9, 0),
                    reason="the estimate describes an SM of compute capability 9.0 (H100, H200)")
def test_occupancy_estimate_agrees_with_the_driver():
    """The simulator's estimate, given the compiled kernel's registers and static shared
    memory, against the CUDA driver's occupancy calculator
    (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
    rows = []
    for kernel, block, dynamic, args in _occupancy_launches():
        overload = compiled(kernel, args)
        regs, static = overload.regs_per_thread, overload.shared_mem_per_block
        driver = max_active_blocks(kernel, block, dynamic, args)
        estimate = estimate_active_blocks(block, dynamic, regs, static)
        rows.append((kernel.__name__, block, dynamic, regs, static, driver, estimate))
    assert all(r[-1] == r[-2] for r in rows), [r for r in rows if r[-1] != r[-2]]
    assert len({r[3] for r in rows}) >= 2, "the launches should differ in registers per thread"
