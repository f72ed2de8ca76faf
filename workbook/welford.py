"""Welford's running mean and variance, and Chan's parallel combine: CPU and device code.

A partial result is the triple ``(mean, m2, count)``: the mean of ``count`` values
and ``m2``, the sum of their squared deviations from that mean (the variance is
``m2 / count``). Two updates keep it numerically stable in float32:

* :func:`welford_update` adds one value (Welford, 1962);
* :func:`welford_combine` merges two partial results (Chan, Golub and LeVeque, 1979):
  with ``delta = mean_b - mean_a`` and ``n = n_a + n_b``,
  ``mean = mean_a + delta * n_b / n`` and ``m2 = m2_a + m2_b + delta**2 * n_a * n_b / n``.

The CPU functions work elementwise on numpy arrays (one row per element) and are the
references the grader and the tests use. The device functions (``cuda.jit(device=True)``,
float32 arguments) are the building blocks of LayerNorm and other normalisation kernels:

* :func:`welford_update_device`, :func:`welford_combine_device`;
* :func:`welford_warp_allreduce` -- every lane of a thread group of ``width`` lanes
  (a power of two <= 32, groups aligned inside the warp) gets the group's result:
  a shuffle-down tree to the group's first lane, then a broadcast from it;
* :func:`welford_block_allreduce` -- every thread of the block gets the block's result
  (warp results through shared memory, combined by warp 0, broadcast through shared memory).

The collectives use the full warp mask: every lane of the warp must call them together
(a thread group without data passes ``count = 0``). Blocks must be a whole number of warps.
They follow the pattern of :mod:`workbook.collectives` (thread groups of ``width`` lanes,
a block all-reduce through one shared slot per warp) with one difference: the max and sum
there use a ``shfl_xor_sync`` butterfly, which leaves the result in every lane because
``a + b`` and ``b + a`` are the same float. Chan's combine is not symmetric in floating
point (lane ``a`` would compute ``combine(a, b)`` and lane ``b`` ``combine(b, a)``), so
here the group reduces to its first lane and broadcasts: every lane gets the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

import workbook  # noqa: F401  (the mode is chosen before numba.cuda is used)
from workbook.collectives import FULL_MASK, WARP_SIZE

# --- CPU: the three ways to compute a variance -----------------------------------------------


def variance_two_pass(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Population variance of each row: the mean first, then the mean squared deviation."""
    x = np.asarray(x, dtype=dtype)
    n = dtype(x.shape[-1])
    mean = np.sum(x, axis=-1, dtype=dtype) / n
    d = x - mean[..., None]
    return np.sum(d * d, axis=-1, dtype=dtype) / n


def variance_naive(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """E[x^2] - E[x]^2 in one pass: cancels catastrophically when |mean| >> std."""
    x = np.asarray(x, dtype=dtype)
    n = dtype(x.shape[-1])
    mean = np.sum(x, axis=-1, dtype=dtype) / n
    return np.sum(x * x, axis=-1, dtype=dtype) / n - mean * mean


def welford_update(mean, m2, count, value):
    """Add ``value`` to the partial result ``(mean, m2, count)`` (elementwise on arrays)."""
    count = count + 1
    delta = value - mean
    mean = mean + delta / count
    m2 = m2 + delta * (value - mean)
    return mean, m2, count


def welford_combine(mean_a, m2_a, count_a, mean_b, m2_b, count_b):
    """Chan's combine of two partial results (elementwise on arrays); an empty side
    (count 0) leaves the other unchanged."""
    count = count_a + count_b
    safe = np.where(count == 0, 1, count)
    delta = mean_b - mean_a
    b_share = count_b / safe
    mean = mean_a + delta * b_share
    m2 = m2_a + m2_b + delta * delta * count_a * b_share
    return mean, m2, count


def variance_welford(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Population variance of each row with Welford's update, one column at a time."""
    x = np.asarray(x, dtype=dtype)
    mean = np.zeros(x.shape[:-1], dtype)
    m2 = np.zeros(x.shape[:-1], dtype)
    count = np.zeros(x.shape[:-1], dtype)
    for j in range(x.shape[-1]):
        mean, m2, count = welford_update(mean, m2, count, x[..., j])
    return m2 / count


def parallel_welford(x: np.ndarray, threads: int, dtype=np.float32):
    """The GPU scheme on the CPU: lane ``t`` of ``threads`` (a power of two) runs Welford
    over columns ``t, t + threads, ...`` of each row, then a tree of Chan combines.
    Returns ``(mean, m2, count)`` per row, computed in ``dtype``."""
    x = np.asarray(x, dtype=dtype)
    rows, cols = x.shape
    mean = np.zeros((rows, threads), dtype)
    m2 = np.zeros((rows, threads), dtype)
    count = np.zeros((rows, threads), dtype)
    for start in range(0, cols, threads):
        chunk = x[:, start:start + threads]
        k = chunk.shape[1]
        mean[:, :k], m2[:, :k], count[:, :k] = welford_update(mean[:, :k], m2[:, :k],
                                                              count[:, :k], chunk)
    width = threads
    while width > 1:
        half = width // 2
        mean, m2, count = welford_combine(mean[:, :half], m2[:, :half], count[:, :half],
                                          mean[:, half:width], m2[:, half:width],
                                          count[:, half:width])
        width = half
    return mean[:, 0], m2[:, 0], count[:, 0]


def row_stats(x: np.ndarray):
    """Exact (float64) mean, variance and count of each row."""
    x64 = np.asarray(x, dtype=np.float64)
    return x64.mean(axis=-1), x64.var(axis=-1), x64.shape[-1]


def layer_norm_reference(x, gamma=None, beta=None, eps: float = 1e-5):
    """LayerNorm over the last axis in float64, as ``torch.nn.functional.layer_norm``:
    returns ``(y, mean, rstd)`` with ``rstd = 1 / sqrt(var + eps)`` (population variance)."""
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=-1)
    var = x64.var(axis=-1)
    rstd = 1.0 / np.sqrt(var + np.float64(np.float32(eps)))
    y = (x64 - mean[..., None]) * rstd[..., None]
    if gamma is not None:
        y = y * np.asarray(gamma, dtype=np.float64)
    if beta is not None:
        y = y + np.asarray(beta, dtype=np.float64)
    return y, mean, rstd


# --- device functions ------------------------------------------------------------------------


@cuda.jit(device=True)
def welford_update_device(mean, m2, count, value):
    """Add ``value`` to ``(mean, m2, count)`` (all float32)."""
    count += float32(1.0)
    delta = value - mean
    mean += delta / count
    m2 += delta * (value - mean)
    return mean, m2, count


@cuda.jit(device=True)
def welford_combine_device(mean, m2, count, b_mean, b_m2, b_count):
    """Chan's combine of ``(mean, m2, count)`` and ``(b_mean, b_m2, b_count)``."""
    n = count + b_count
    if n == float32(0.0):
        return mean, m2, count
    delta = b_mean - mean
    b_share = b_count / n
    return mean + delta * b_share, m2 + b_m2 + delta * delta * count * b_share, n


@cuda.jit(device=True)
def welford_pack_update(mean, m2, count, values, start, n):
    """Add ``values[start:start + n]`` (a pack held in registers) to ``(mean, m2, count)``.

    The pack's own mean and m2 come from two passes over its ``n`` values (``n`` a
    compile-time power of two: no division), then one Chan combine: one division per
    pack, where :func:`welford_update_device` pays one per element.
    """
    total = float32(0.0)
    for k in range(n):
        total += values[start + k]
    pack_mean = total / float32(n)
    pack_m2 = float32(0.0)
    for k in range(n):
        d = values[start + k] - pack_mean
        pack_m2 += d * d
    return welford_combine_device(mean, m2, count, pack_mean, pack_m2, float32(n))


@cuda.jit(device=True)
def welford_warp_reduce(mean, m2, count, width):
    """The first lane of each group of ``width`` lanes gets the group's result
    (other lanes get partial results)."""
    offset = width // 2
    while offset > 0:
        b_mean = cuda.shfl_down_sync(FULL_MASK, mean, offset)
        b_m2 = cuda.shfl_down_sync(FULL_MASK, m2, offset)
        b_count = cuda.shfl_down_sync(FULL_MASK, count, offset)
        mean, m2, count = welford_combine_device(mean, m2, count, b_mean, b_m2, b_count)
        offset //= 2
    return mean, m2, count


@cuda.jit(device=True)
def welford_warp_allreduce(mean, m2, count, width):
    """Every lane of each aligned group of ``width`` lanes gets the group's result."""
    mean, m2, count = welford_warp_reduce(mean, m2, count, width)
    lane = cuda.threadIdx.x % WARP_SIZE
    first = lane - lane % width
    mean = cuda.shfl_sync(FULL_MASK, mean, first)
    m2 = cuda.shfl_sync(FULL_MASK, m2, first)
    count = cuda.shfl_sync(FULL_MASK, count, first)
    return mean, m2, count


@cuda.jit(device=True)
def welford_block_allreduce(mean, m2, count):
    """Every thread of the block gets the block's result (1D blocks, whole warps).

    Safe to call again right away (e.g. once per row): the shared arrays are
    rewritten only after every thread has passed the barriers of the previous call.
    """
    warp_mean = cuda.shared.array(WARP_SIZE, float32)
    warp_m2 = cuda.shared.array(WARP_SIZE, float32)
    warp_count = cuda.shared.array(WARP_SIZE, float32)
    result = cuda.shared.array(3, float32)
    lane = cuda.threadIdx.x % WARP_SIZE
    warp = cuda.threadIdx.x // WARP_SIZE
    mean, m2, count = welford_warp_reduce(mean, m2, count, WARP_SIZE)
    if lane == 0:
        warp_mean[warp] = mean
        warp_m2[warp] = m2
        warp_count[warp] = count
    cuda.syncthreads()
    if warp == 0:
        warps = (cuda.blockDim.x + WARP_SIZE - 1) // WARP_SIZE
        mean = m2 = count = float32(0.0)
        if lane < warps:
            mean, m2, count = warp_mean[lane], warp_m2[lane], warp_count[lane]
        mean, m2, count = welford_warp_reduce(mean, m2, count, WARP_SIZE)
        if lane == 0:
            result[0] = mean
            result[1] = m2
            result[2] = count
    cuda.syncthreads()
    return result[0], result[1], result[2]


__all__ = [
    "FULL_MASK", "WARP_SIZE", "layer_norm_reference", "parallel_welford", "row_stats",
    "variance_naive", "variance_two_pass", "variance_welford", "welford_block_allreduce",
    "welford_combine", "welford_combine_device", "welford_pack_update", "welford_update",
    "welford_update_device",
    "welford_warp_allreduce", "welford_warp_reduce",
]
