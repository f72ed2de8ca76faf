"""Warp intrinsics, checked against numpy in the simulator and on a GPU.

The kernels of the tests not marked ``sim_only`` are valid CUDA, and those
tests run unmodified with ``WORKBOOK_MODE=gpu``. The ``sim_only`` tests check
what the simulator does where a GPU's behaviour is undefined or would hang.
"""

import inspect
import re
import time

import numpy as np
import pytest

import workbook  # noqa: F401  (selects the mode: import it before numba.cuda)
from workbook.sim import sanitizer
from workbook.sim.sanitizer import UninitializedReadError
from workbook.sim.warp import TIMEOUT_ENV, WarpCollectiveError

# isort: split
from numba import cuda

# numba-cuda's performance hints on small launches and host arrays (the messages may be coloured).
FULL = 0xFFFFFFFF
EVEN = 0x55555555
DTYPES = [np.int32, np.int64, np.float32, np.float64]
# (blocks, threads per block): full warps, several warps, several blocks, partial warps.
LAYOUTS = [(1, 32), (1, 128), (3, 64), (2, 40), (1, 50)]
PARTIAL = (2, 40)


# ---------------------------------------------------------------------------
# Expected values, from numpy


def lanes(blocks, threads):
    """For each global thread: its lane, the global index of its warp's lane 0, the warp's size."""
    g = np.arange(blocks * threads)
    t = g % threads
    lane = t % 32
    return lane, g - lane, np.minimum(32, threads - (t - lane))


def make_values(rng, dtype, n):
    """Distinct values of ``dtype``; 64-bit ones do not fit in 32 bits."""
    v = rng.permutation(n) - n // 2
    if dtype == np.int64:
        return v.astype(np.int64) * (1 << 33) + 7
    if dtype == np.float64:
        return v.astype(np.float64) * 1e10 + 0.5
    return v.astype(dtype) + dtype(0.5) if np.dtype(dtype).kind == "f" else v.astype(dtype)


def shuffled(values, lane, base, size, src):
    """Values read from lane ``src`` of each warp (own value where ``src`` is outside 0..31),
    and where that is defined (the source lane exists)."""
    inside = (src >= 0) & (src < 32)
    defined = ~inside | (src < size)
    read = np.where(inside & defined, base + src, np.arange(values.size))
    return values[read], defined


def reading_missing_lanes():
    """For launches whose shuffles read lanes past the end of a partial warp and compare only
    the defined results: the simulator's sanitizer would report those reads (see
    test_undefined_reads_are_reported), so it is off here; a GPU runs them as they are."""
    return sanitizer.disabled()


def per_warp_sum(x, base):
    sums = np.zeros(x.size, dtype=x.dtype)
    np.add.at(sums, base, x)
    return sums[base]


def bits_of(lane, flags):
    return flags.astype(np.uint64) << lane.astype(np.uint64)


# ---------------------------------------------------------------------------
# Kernels


@cuda.jit
def shfl_idx_kernel(values, src, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(0xFFFFFFFF, values[i], src[i])


@cuda.jit
def shfl_up_kernel(values, delta, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_up_sync(0xFFFFFFFF, values[i], delta)


@cuda.jit
def shfl_down_kernel(values, delta, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], delta)


@cuda.jit
def shfl_xor_kernel(values, lane_mask, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(0xFFFFFFFF, values[i], lane_mask)


@cuda.jit
def warp_sum_kernel(values, down, butterfly):
    i = cuda.grid(1)
    v = values[i]
    w = values[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        w += cuda.shfl_xor_sync(0xFFFFFFFF, w, offset)
        offset //= 2
    down[i] = v
    butterfly[i] = w


@cuda.jit
def block_sum_kernel(values, out):
    partial = cuda.shared.array(32, np.int64)
    t = cuda.threadIdx.x
    v = values[cuda.grid(1)]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        partial[t // 32] = v
    cuda.syncthreads()
    if t < 32:
        w = partial[t] if t < cuda.blockDim.x // 32 else 0
        offset = 16
        while offset > 0:
            w += cuda.shfl_down_sync(0xFFFFFFFF, w, offset)
            offset //= 2
        if t == 0:
            out[cuda.blockIdx.x] = w


@cuda.jit
def syncwarp_kernel(out):
    buf = cuda.shared.array(128, np.int32)
    t = cuda.threadIdx.x
    buf[t] = 3 * t + 1
    cuda.syncwarp()
    out[cuda.grid(1)] = buf[t ^ 1]
    cuda.syncwarp(0xFFFFFFFF)


@cuda.jit
def even_lanes_kernel(values, down, idx, total, ballot, votes):
    i = cuda.grid(1)
    if cuda.laneid % 2 == 0:
        v = values[i]
        down[i] = cuda.shfl_down_sync(0x55555555, v, 2)
        idx[i] = cuda.shfl_sync(0x55555555, v, 6)
        s = v
        offset = 2
        while offset < 32:
            s += cuda.shfl_xor_sync(0x55555555, s, offset)
            offset *= 2
        total[i] = s
        ballot[i] = cuda.ballot_sync(0x55555555, v > 0)
        cuda.syncwarp(0x55555555)
        votes[i] = cuda.any_sync(0x55555555, v > 0) + 2 * cuda.all_sync(0x55555555, v > 0)


@cuda.jit
def quarter_groups_kernel(out):
    i = cuda.grid(1)
    q = cuda.laneid % 4
    if q == 0:
        out[i] = cuda.ballot_sync(0x11111111, True)
    elif q == 1:
        out[i] = cuda.ballot_sync(0x22222222, True)
    elif q == 2:
        out[i] = cuda.ballot_sync(0x44444444, True)
    else:
        out[i] = cuda.ballot_sync(0x88888888, True)


@cuda.jit
def ballot_kernel(pred, out):
    i = cuda.grid(1)
    out[i] = cuda.ballot_sync(0xFFFFFFFF, pred[i])


@cuda.jit
def vote_kernel(pred, out_all, out_any, out_eq):
    i = cuda.grid(1)
    p = pred[i] != 0
    out_all[i] = cuda.all_sync(0xFFFFFFFF, p)
    out_any[i] = cuda.any_sync(0xFFFFFFFF, p)
    out_eq[i] = cuda.eq_sync(0xFFFFFFFF, p)


@cuda.jit
def match_any_kernel(values, out):
    i = cuda.grid(1)
    out[i] = cuda.match_any_sync(0xFFFFFFFF, values[i])


@cuda.jit
def match_all_kernel(values, out_mask, out_pred):
    i = cuda.grid(1)
    mask, pred = cuda.match_all_sync(0xFFFFFFFF, values[i])
    out_mask[i] = mask
    out_pred[i] = pred


@cuda.jit
def lane_masks_kernel(active, lt):
    i = cuda.grid(1)
    active[i] = cuda.activemask()
    lt[i] = cuda.lanemask_lt()


@cuda.jit
def diverged_activemask_kernel(n, active, ballot):
    i = cuda.grid(1)
    if i < n:
        mask = cuda.activemask()
        active[i] = mask
        ballot[i] = cuda.ballot_sync(mask, i % 3 == 0)


@cuda.jit
def block_3d_kernel(first, ballot):
    bx, by, bz = cuda.blockDim.x, cuda.blockDim.y, cuda.blockDim.z
    tid = cuda.threadIdx.x + bx * (cuda.threadIdx.y + by * cuda.threadIdx.z)
    g = cuda.blockIdx.x * (bx * by * bz) + tid
    first[g] = cuda.shfl_sync(0xFFFFFFFF, tid, 0)
    ballot[g] = cuda.ballot_sync(0xFFFFFFFF, cuda.threadIdx.y % 2 == 0)


# ---------------------------------------------------------------------------
# Shuffles


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_shfl_sync_reads_any_existing_lane(rng, dtype, layout):
    blocks, threads = layout
    lane, base, size = lanes(blocks, threads)
    values = make_values(rng, dtype, lane.size)
    # Only the low 5 bits of the source lane count: -32 and +64 wrap round.
    target = rng.integers(0, size)
    src = (target + 32 * rng.integers(-1, 3, lane.size)).astype(np.int32)
    out = np.zeros_like(values)
    shfl_idx_kernel[blocks, threads](values, src, out)
    np.testing.assert_array_equal(out, values[base + target])
    assert out.dtype == dtype


@pytest.mark.parametrize(
    ("kernel", "source"),
    [
        (shfl_up_kernel, lambda lane, d: lane - (d & 31)),
        (shfl_down_kernel, lambda lane, d: np.where(lane + (d & 31) > 31, -1, lane + (d & 31))),
        (shfl_xor_kernel, lambda lane, d: lane ^ (d & 31)),
    ],
    ids=["up", "down", "xor"],
)
@pytest.mark.parametrize("delta", [0, 1, 5, 16, 31, 32, 33])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shfl_relative(rng, kernel, source, delta, dtype):
    blocks, threads = PARTIAL
    lane, base, size = lanes(blocks, threads)
    values = make_values(rng, dtype, lane.size)
    out = np.zeros_like(values)
    with reading_missing_lanes():
        kernel[blocks, threads](values, np.int32(delta), out)
    expected, defined = shuffled(values, lane, base, size, source(lane, delta))
    np.testing.assert_array_equal(out[defined], expected[defined])
    assert defined[:32].all()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("kernel", "source"),
    [
        (shfl_up_kernel, lambda lane: lane - 3),
        (shfl_down_kernel, lambda lane: np.where(lane + 3 > 31, -1, lane + 3)),
        (shfl_xor_kernel, lambda lane: lane ^ 3),
    ],
    ids=["up", "down", "xor"],
)
def test_shfl_relative_layouts(rng, kernel, source, layout):
    blocks, threads = layout
    lane, base, size = lanes(blocks, threads)
    values = make_values(rng, np.int32, lane.size)
    out = np.zeros_like(values)
    with reading_missing_lanes():
        kernel[blocks, threads](values, np.int32(3), out)
    expected, defined = shuffled(values, lane, base, size, source(lane))
    np.testing.assert_array_equal(out[defined], expected[defined])


@pytest.mark.parametrize("dtype", DTYPES)
def test_warp_sum_reduction(rng, dtype):
    blocks, threads = 3, 128
    lane, base, _ = lanes(blocks, threads)
    values = make_values(rng, dtype, lane.size) // 8
    down = np.zeros_like(values)
    butterfly = np.zeros_like(values)
    warp_sum_kernel[blocks, threads](values, down, butterfly)
    sums = per_warp_sum(values.astype(np.float64), base)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(down[lane == 0], sums[lane == 0], rtol=rtol)
    np.testing.assert_allclose(butterfly, sums, rtol=rtol)


def test_block_sum_with_shuffles_and_syncthreads(rng):
    blocks, threads = 3, 256
    values = rng.integers(-(1 << 40), 1 << 40, blocks * threads)
    out = np.zeros(blocks, np.int64)
    block_sum_kernel[blocks, threads](values, out)
    np.testing.assert_array_equal(out, values.reshape(blocks, threads).sum(axis=1))


# ---------------------------------------------------------------------------
# syncwarp and masks naming a subset of lanes


@pytest.mark.parametrize("layout", [(1, 32), (1, 128), (2, 40)])
def test_syncwarp_orders_shared_memory(layout):
    blocks, threads = layout
    out = np.zeros(blocks * threads, np.int32)
    syncwarp_kernel[blocks, threads](out)
    t = np.arange(out.size) % threads
    np.testing.assert_array_equal(out, 3 * (t ^ 1) + 1)


@pytest.mark.parametrize("layout", [(1, 32), (2, 64)])
def test_even_lanes_only(rng, layout):
    blocks, threads = layout
    lane, base, _ = lanes(blocks, threads)
    values = rng.integers(-100, 100, lane.size).astype(np.int32)
    down, idx, total, ballot, votes = (np.full(lane.size, -7, np.int64) for _ in range(5))
    even_lanes_kernel[blocks, threads](values, down, idx, total, ballot, votes)

    even = lane % 2 == 0
    np.testing.assert_array_equal(down[~even], -7)
    src = np.where(lane + 2 > 31, np.arange(lane.size), base + lane + 2)
    np.testing.assert_array_equal(down[even], values[src][even])
    np.testing.assert_array_equal(idx[even], values[base + 6][even])
    sums = per_warp_sum(np.where(even, values, 0).astype(np.int64), base)
    np.testing.assert_array_equal(total[even], sums[even])
    bits = per_warp_sum(bits_of(lane, even & (values > 0)), base)
    np.testing.assert_array_equal(ballot[even], bits[even])
    positives = per_warp_sum((even & (values > 0)).astype(np.int64), base)
    expected_votes = (positives > 0) + 2 * (positives == 16)
    np.testing.assert_array_equal(votes[even], expected_votes[even])


@pytest.mark.parametrize("layout", [(1, 32), (2, 96)])
def test_disjoint_groups_run_side_by_side(layout):
    blocks, threads = layout
    out = np.zeros(blocks * threads, np.uint32)
    quarter_groups_kernel[blocks, threads](out)
    lane = np.arange(out.size) % threads % 32
    np.testing.assert_array_equal(out, np.uint32(0x11111111) << (lane % 4).astype(np.uint32))


# ---------------------------------------------------------------------------
# Votes, matches and lane masks


def predicates(rng, lane, base):
    """Per warp in turn: all true, all false, random, all but one true."""
    kind = (base // 32) % 4
    random = rng.integers(0, 2, lane.size)
    pred = np.select([kind == 0, kind == 1, kind == 2], [1, 0, random], default=lane != 3)
    return pred.astype(np.int32)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ballot_sync(rng, layout):
    blocks, threads = layout
    lane, base, _ = lanes(blocks, threads)
    pred = rng.integers(0, 2, lane.size).astype(np.int32)
    out = np.zeros(lane.size, np.uint32)
    ballot_kernel[blocks, threads](pred, out)
    np.testing.assert_array_equal(out, per_warp_sum(bits_of(lane, pred != 0), base))


@pytest.mark.parametrize("layout", [(1, 128), (2, 40), (1, 200)])
def test_all_any_eq_sync(rng, layout):
    blocks, threads = layout
    lane, base, size = lanes(blocks, threads)
    pred = predicates(rng, lane, base)
    out_all, out_any, out_eq = (np.full(lane.size, 9, np.int32) for _ in range(3))
    vote_kernel[blocks, threads](pred, out_all, out_any, out_eq)
    count = per_warp_sum(pred.astype(np.int64), base)
    np.testing.assert_array_equal(out_all, count == size)
    np.testing.assert_array_equal(out_any, count > 0)
    np.testing.assert_array_equal(out_eq, (count == 0) | (count == size))


def match_values(rng, dtype, n):
    if np.dtype(dtype).kind == "f":
        return rng.choice(np.array([0.0, -0.0, 1.5, np.nan], dtype=dtype), n)
    return (rng.integers(-2, 2, n) * (1 << 33 if dtype == np.int64 else 1)).astype(dtype)


def same_bits(values):
    bits = values.view(f"u{values.itemsize}")
    return bits[:, None] == bits[None, :]


@pytest.mark.parametrize("layout", [(1, 64), (2, 40)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_match_any_sync(rng, dtype, layout):
    blocks, threads = layout
    lane, base, _ = lanes(blocks, threads)
    values = match_values(rng, dtype, lane.size)
    out = np.zeros(lane.size, np.uint32)
    match_any_kernel[blocks, threads](values, out)
    warp = base[:, None] == base[None, :]
    expected = ((same_bits(values) & warp) * (np.uint64(1) << lane.astype(np.uint64))).sum(1)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("layout", [(1, 128), (2, 40)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_match_all_sync(rng, dtype, layout):
    blocks, threads = layout
    lane, base, size = lanes(blocks, threads)
    values = match_values(rng, dtype, lane.size)
    uniform = (base // 32) % 2 == 0
    values[uniform] = values[base[uniform]]
    values[~uniform & (lane == 0)] = 7  # the other values are 0, -0, 1.5, nan or -2..1
    out_mask = np.full(lane.size, 5, np.uint32)
    out_pred = np.full(lane.size, 5, np.int32)
    match_all_kernel[blocks, threads](values, out_mask, out_pred)
    existing = (np.uint64(1) << size.astype(np.uint64)) - np.uint64(1)
    np.testing.assert_array_equal(out_pred, uniform)
    np.testing.assert_array_equal(out_mask, np.where(uniform, existing, 0))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_activemask_and_lanemask_lt(layout):
    blocks, threads = layout
    lane, _, size = lanes(blocks, threads)
    active = np.zeros(lane.size, np.uint32)
    lt = np.zeros(lane.size, np.uint32)
    lane_masks_kernel[blocks, threads](active, lt)
    one = np.uint64(1)
    np.testing.assert_array_equal(active, (one << size.astype(np.uint64)) - one)
    np.testing.assert_array_equal(lt, (one << lane.astype(np.uint64)) - one)


@pytest.mark.parametrize("n", [0, 1, 17, 45, 64])
def test_activemask_in_a_branch(n):
    blocks, threads = 1, 64
    lane, base, _ = lanes(blocks, threads)
    active = np.zeros(blocks * threads, np.uint32)
    ballot = np.zeros(blocks * threads, np.uint32)
    diverged_activemask_kernel[blocks, threads](n, active, ballot)
    taken = np.arange(lane.size) < n
    np.testing.assert_array_equal(active[~taken], 0)
    np.testing.assert_array_equal(active[taken], per_warp_sum(bits_of(lane, taken), base)[taken])
    expected = per_warp_sum(bits_of(lane, taken & (np.arange(lane.size) % 3 == 0)), base)
    np.testing.assert_array_equal(ballot[taken], expected[taken])


@pytest.mark.parametrize("block", [(8, 4, 2), (5, 3, 3)])
def test_warps_of_a_3d_block(block):
    blocks = 2
    threads = int(np.prod(block))
    first = np.zeros(blocks * threads, np.int64)
    ballot = np.zeros(blocks * threads, np.uint32)
    block_3d_kernel[blocks, block](first, ballot)

    tid = np.arange(first.size) % threads
    y = tid // block[0] % block[1]
    lane, base, _ = lanes(blocks, threads)
    np.testing.assert_array_equal(first, tid - lane)
    np.testing.assert_array_equal(ballot, per_warp_sum(bits_of(lane, y % 2 == 0), base))


# ---------------------------------------------------------------------------
# Simulator only: value types, undefined reads, misuse


@cuda.jit
def pass_around_kernel(values, results):
    lane = cuda.laneid
    results[lane] = cuda.shfl_xor_sync(0xFFFFFFFF, values[lane], 1)


@pytest.mark.sim_only
@pytest.mark.parametrize(
    "value",
    [7, 2.5, np.float32(2.5), np.int8(-3), np.uint64(1 << 63)],  # bool, float16: rejected
    ids=repr,
)
def test_shuffle_keeps_the_value_object(value):
    values = [value] * 32
    values[1] = type(value)(1)
    results = [None] * 32
    pass_around_kernel[1, 32](values, results)
    assert results[0] is values[1] and type(results[0]) is type(value)


@cuda.jit
def undefined_reads_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid < 4:
        out[i] = cuda.shfl_down_sync(0x0000000F, values[i], 2)
    else:
        out[i] = cuda.shfl_sync(0xFFFFFFF0, values[i], 30)


@pytest.mark.sim_only
def test_undefined_reads_return_own_value():
    # Lanes 2 and 3 read lanes 4 and 5, outside their mask; in warp 1, which has
    # lanes 0..7, lanes 4..7 read lane 30, which does not exist.
    values = np.arange(40, dtype=np.int32) * 10
    out = np.zeros_like(values)
    with sanitizer.disabled():  # the plain simulator: the caller's own value
        undefined_reads_kernel[1, 40](values, out)
    np.testing.assert_array_equal(out[:4], [20, 30, 20, 30])
    np.testing.assert_array_equal(out[4:32], 300)
    np.testing.assert_array_equal(out[32:], [340, 350, 340, 350, 360, 370, 380, 390])


@cuda.jit
def early_exit_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        return
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@cuda.jit
def syncthreads_deadlock_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        cuda.syncthreads()
    else:
        out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@cuda.jit
def mismatched_op_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        out[i] = cuda.ballot_sync(0xFFFFFFFF, True)
    else:
        out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@cuda.jit
def mismatched_mask_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        out[i] = cuda.shfl_down_sync(0x0000FFFF, values[i], 1)
    else:
        out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@cuda.jit
def not_in_mask_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 7:
        out[i] = cuda.shfl_sync(0x00000001, values[i], 0)


@cuda.jit
def late_lane_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        time.sleep(1.5)
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@cuda.jit
def failing_lane_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid == 5:
        out[i] = values[10**6]
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


def run_failing(kernel, threads=64):
    values = np.arange(threads, dtype=np.int32)
    out = np.zeros_like(values)
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        kernel[1, threads](values, out)
    assert time.monotonic() - start < 10
    return info


@pytest.mark.sim_only
def test_lane_exiting_before_a_collective():
    info = run_failing(early_exit_kernel)
    assert info.type is WarpCollectiveError
    assert "lane 5 " in str(info.value) and "exited" in str(info.value)
    assert "shfl_down_sync" in str(info.value) and "0xffffffff" in str(info.value)


@pytest.mark.sim_only
def test_lane_in_syncthreads_while_others_shuffle():
    info = run_failing(syncthreads_deadlock_kernel)
    assert info.type is WarpCollectiveError
    assert "lane 5 " in str(info.value) and "syncthreads" in str(info.value)


@pytest.mark.sim_only
def test_lanes_calling_different_intrinsics():
    info = run_failing(mismatched_op_kernel)
    assert info.type is WarpCollectiveError
    message = str(info.value)
    assert "lane 5 " in message and "ballot_sync" in message and "shfl_down_sync" in message


@pytest.mark.sim_only
def test_lanes_passing_different_masks():
    info = run_failing(mismatched_mask_kernel)
    assert info.type is WarpCollectiveError
    message = str(info.value)
    assert "lane 5" in message and "0x0000ffff" in message and "0xffffffff" in message


@pytest.mark.sim_only
def test_caller_not_in_its_mask():
    info = run_failing(not_in_mask_kernel)
    assert info.type is WarpCollectiveError
    assert "lane 7 " in str(info.value) and "0x00000001" in str(info.value)


@pytest.mark.sim_only
def test_timeout_names_the_missing_lane(monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    info = run_failing(late_lane_kernel, threads=32)
    assert info.type is WarpCollectiveError
    assert "without another lane arriving" in str(info.value)
    assert "lane 5 (running)" in str(info.value)


@pytest.mark.sim_only
def test_error_in_one_lane_reaches_the_caller():
    info = run_failing(failing_lane_kernel)
    assert info.type is IndexError


def kernel_line(kernel, text: str) -> int:
    """The line number, in this file, of the first line of ``kernel`` that holds ``text``."""
    lines, first = inspect.getsourcelines(kernel.py_func)
    return first + next(k for k, line in enumerate(lines) if text in line)


@cuda.jit
def shuffle_in_a_branch_kernel(values, out, n):
    i = cuda.grid(1)
    if cuda.laneid < n:  # lanes n..31 skip the shuffle that names them
        out[i] = values[i] + cuda.shfl_down_sync(0xFFFFFFFF, values[i], 1)


@pytest.mark.sim_only
def test_a_skipped_shuffle_is_reported_root_first():
    # Each lane waits for every lane of its mask: a lane below 24 may stop because another
    # waiting lane stopped, and that one because of a lane that left. The report names the
    # lane that left first, once, with its line and the collective it skipped; then,
    # briefly, the lanes left waiting.
    values = np.arange(32, dtype=np.int32)
    with pytest.raises(WarpCollectiveError) as info:
        shuffle_in_a_branch_kernel[1, 32](values, np.zeros_like(values), 24)
    message = str(info.value)
    root = re.match(r"(tid=\[[^\]]*\] ctaid=\[[^\]]*\]: )?lane (\d+) of warp 0 \(block "
                    r"\(0,0,0\)\) exited without reaching shfl_down_sync with mask 0xffffffff",
                    message)
    assert root and 24 <= int(root.group(2)) < 32, message
    assert message.count("exited without reaching") == 1 and "stopped with" not in message
    branch = kernel_line(shuffle_in_a_branch_kernel, "if cuda.laneid < n")
    shuffle = kernel_line(shuffle_in_a_branch_kernel, "shfl_down_sync")
    assert f"left the kernel at {__file__}:{branch} in shuffle_in_a_branch_kernel" in message
    assert f"waits in shfl_down_sync at {__file__}:{shuffle}" in message
    waiting = re.findall(r"lane (\d+) \(shfl_down_sync, line (\d+)\)", message)
    assert all(int(lane) < 24 and int(line) == shuffle for lane, line in waiting), message


@pytest.mark.sim_only
def test_lanes_calling_different_collectives_are_named_with_their_lines():
    info = run_failing(mismatched_op_kernel)
    message = str(info.value)
    ballot = kernel_line(mismatched_op_kernel, "ballot_sync")
    shuffle = kernel_line(mismatched_op_kernel, "shfl_down_sync")
    assert f"{__file__}:{ballot} in mismatched_op_kernel" in message
    assert f"{__file__}:{shuffle} in mismatched_op_kernel" in message


# ---------------------------------------------------------------------------
# Undefined shuffle reads in sanitized launches: poisoned, reported when used


@cuda.jit
def partial_warp_kernel(values, out):
    i = cuda.grid(1)
    v = values[i]
    v += cuda.shfl_down_sync(0xFFFFFFFF, v, 4)
    out[i] = v


@cuda.jit
def outside_the_mask_kernel(values, out):
    i = cuda.grid(1)
    if cuda.laneid < 16:
        out[i] = cuda.shfl_xor_sync(0x0000FFFF, values[i], 16)  # lanes 16..31: not in the mask


@cuda.jit
def guarded_partial_warp_kernel(values, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    width = min(32, cuda.blockDim.x - (cuda.threadIdx.x - lane))
    v = values[i]
    for offset in (16, 8, 4, 2, 1):
        other = cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        if lane + offset < width:  # a missing lane's value is read, and left unused
            v += other
    out[i] = v


@pytest.mark.sim_only
def test_a_used_read_of_a_missing_lane_is_reported_and_poisoned():
    # 40 threads: warp 1 has lanes 0..7, and its lanes 4..7 read lanes 8..11
    values = np.arange(40, dtype=np.float32)
    d_out = cuda.to_device(np.zeros(40, np.float32))
    with pytest.raises(UninitializedReadError) as info:
        partial_warp_kernel[1, 40](values, d_out)
    message = str(info.value)
    found = re.search(r"lane (\d+) of warp 1 \(block \(0,0,0\)\) read lane (\d+) in "
                      r"shfl_down_sync with mask 0xffffffff", message)
    assert found, message
    reader, source = int(found.group(1)), int(found.group(2))
    assert 4 <= reader <= 7 and source == reader + 4
    assert (f"lane {source} does not exist: the block has 40 threads, so warp 1 has lanes "
            "0-7 only") in message
    line = kernel_line(partial_warp_kernel, "shfl_down_sync")
    assert f"read and used at {__file__}:{line} in partial_warp_kernel" in message
    # every lane ran to the end: the four that read a missing lane hold NaN, lanes 28-31 of
    # warp 0 read past the warp's end and got their own value (defined), the others lane + 4
    out = d_out.copy_to_host()
    lane = np.arange(40) % 32
    size = np.where(np.arange(40) < 32, 32, 8)
    source_value = np.where(lane + 4 > 31, values, values[np.minimum(np.arange(40) + 4, 39)])
    defined = (lane + 4 > 31) | (lane + 4 < size)
    np.testing.assert_array_equal(out[defined], (values + source_value)[defined])
    assert np.isnan(out[~defined]).all() and (~defined).sum() == 4


@pytest.mark.sim_only
def test_a_read_outside_the_mask_is_reported_with_an_integer_poison():
    values = np.arange(32, dtype=np.int32)
    d_out = cuda.to_device(np.zeros(32, np.int32))
    with pytest.raises(UninitializedReadError) as info:
        outside_the_mask_kernel[1, 32](values, d_out)
    message = str(info.value)
    found = re.search(r"lane (\d+) of warp 0 \(block \(0,0,0\)\) read lane (\d+) in "
                      r"shfl_xor_sync with mask 0x0000ffff, and lane \d+ is not in the mask "
                      r"0x0000ffff", message)
    assert found and int(found.group(2)) == int(found.group(1)) ^ 16, message
    line = kernel_line(outside_the_mask_kernel, "shfl_xor_sync")
    assert f"{__file__}:{line} in outside_the_mask_kernel" in message
    out = d_out.copy_to_host()
    assert (out[:16] == 0x7FADBEEF).all() and (out[16:] == 0).all()


@pytest.mark.sim_only
@pytest.mark.parametrize("threads", [40, 50, 100])
def test_a_read_of_a_missing_lane_left_unused_is_not_reported(threads):
    values = np.arange(threads, dtype=np.float32)
    out = np.zeros(threads, np.float32)
    guarded_partial_warp_kernel[1, threads](values, out)  # the sanitizer is on: no report
    starts = np.arange(0, threads, 32)
    np.testing.assert_array_equal(out[starts], np.add.reduceat(values, starts))


@pytest.mark.sim_only
def test_a_check_of_a_partial_warp_shuffle_fails_naming_the_lane():
    from grader.exercise import Case, Exercise, check_exercise

    def run(ns, inputs, mode):
        out = np.zeros(40, np.float32)
        ns["partial_warp_kernel"][1, 40](inputs["x"], out)
        return out

    def verify(got, expected, inputs, mode):
        np.testing.assert_array_equal(got, expected)

    cases = (Case(40),)
    exercise = Exercise(
        id="warp.partial", lesson="tests", title="a partial warp's shuffle",
        entry="partial_warp_kernel", run=run, verify=verify, cases={"sim": cases, "gpu": cases},
        make_inputs=lambda rng, case: {"x": np.arange(case.size, dtype=np.float32)},
        reference=lambda inputs: inputs["x"])
    result = check_exercise(exercise, {"partial_warp_kernel": partial_warp_kernel}, "sim")
    assert not result.passed
    assert re.search(r"lane [4-7] of warp 1 \(block \(0,0,0\)\) read lane (8|9|10|11) in "
                     r"shfl_down_sync", result.summary()), result.summary()


@pytest.mark.sim_only
def test_outside_a_kernel():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    fake = FakeCUDAModule((1, 1, 1), (32, 1, 1), 0)
    with pytest.raises(WarpCollectiveError, match="inside a kernel"):
        fake.ballot_sync(FULL, True)


@pytest.mark.sim_only
def test_install_is_idempotent():
    from numba.cuda.simulator.kernel import BlockThread
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    from workbook.sim import warp

    run, shfl = BlockThread.run, FakeCUDAModule.shfl_sync
    warp.install()
    assert BlockThread.run is run and FakeCUDAModule.shfl_sync is shfl
    assert all(hasattr(FakeCUDAModule, name) for name in warp.INTRINSICS)


@pytest.mark.sim_only
def test_reduction_is_fast(rng):
    values = rng.standard_normal(256)
    down = np.zeros_like(values)
    butterfly = np.zeros_like(values)
    start = time.monotonic()
    warp_sum_kernel[1, 256](values, down, butterfly)
    assert time.monotonic() - start < 2


@cuda.jit
def barrier_then_fail_kernel(values, out):
    t = cuda.threadIdx.x
    out[t] = values[t]
    cuda.syncthreads()
    if t == 3:
        out[1000] = 1  # out of bounds: an IndexError in one thread
    cuda.syncthreads()
    out[t] += 1


@pytest.mark.sim_only
def test_block_manager_waits_instead_of_spinning_and_keeps_the_semantics():
    from numba.cuda.simulator import kernel

    from workbook.sim import scheduler

    assert kernel.BlockManager.run is scheduler._run_block
    values = np.arange(64, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    block_sum_kernel[1, 64](values, out)  # shuffles and a barrier across two warps
    assert out[0] == values.sum()
    info = run_failing(barrier_then_fail_kernel)
    assert info.type is IndexError  # the failing thread's error, the others aborted


# ---------------------------------------------------------------------------
# Argument types: what the GPU compiler rejects, the simulator rejects too


@cuda.jit
def vote_all_with(mask, predicate, result):
    i = cuda.grid(1)
    if i < result.shape[0]:
        result[i] = cuda.all_sync(mask[i], predicate[i])


@cuda.jit
def shuffle_from_lane_0(values, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(FULL, values[i], 0)


@cuda.jit
def shuffle_with_offset(offsets, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(FULL, i, offsets[i])


# numba-cuda's own test_vote_sync_type_validation cases, and shuffled values it rejects
INVALID_TYPES = [
    (vote_all_with, (np.float32, np.int32), "Mask type must be an integer"),
    (vote_all_with, (np.bool_, np.int32), "Mask type must be an integer"),
    (vote_all_with, (np.float64, np.int32), "Mask type must be an integer"),
    (vote_all_with, (np.int32, np.float32), "Predicate must be an integer or boolean"),
    (vote_all_with, (np.int32, np.float64), "Predicate must be an integer or boolean"),
    (shuffle_from_lane_0, (np.bool_,), "only supports 32- and 64-bit ints and floats"),
    (shuffle_from_lane_0, (np.float16,), "only supports 32- and 64-bit ints and floats"),
]


def _arguments(dtypes, n=32):
    inputs = [np.full(n, 0xFFFFFFFF if k == 0 and len(dtypes) == 2 else 1).astype(dtype)
              for k, dtype in enumerate(dtypes)]
    return [*inputs, np.zeros(n, np.int32)]


@pytest.mark.parametrize("kernel,dtypes,words", INVALID_TYPES,
                         ids=[f"{k.__name__}-{'-'.join(np.dtype(d).name for d in ds)}"
                              for k, ds, _ in INVALID_TYPES])
def test_argument_types_the_compiler_rejects(kernel, dtypes, words):
    """Rejected with the GPU compiler's words: a TypingError there, a TypeError here."""
    from numba.core.errors import TypingError

    from workbook.sim.warp import WarpTypeError

    with pytest.raises((WarpTypeError, TypingError), match=words):
        kernel[1, 32](*_arguments(dtypes))


@pytest.mark.sim_only
def test_a_float_shuffle_offset_or_a_complex_value_is_rejected():
    with pytest.raises(TypeError, match="the lane or offset must be an integer. Got float32"):
        shuffle_with_offset[1, 32](np.ones(32, np.float32), np.zeros(32, np.int64))
    with pytest.raises(TypeError, match="only supports 32- and 64-bit ints and floats"):
        pass_around_kernel[1, 32]([1 + 2j] * 32, [None] * 32)


@pytest.mark.parametrize("mask,predicate", [(np.uint32, np.uint32), (np.int64, np.int64),
                                            (np.uint32, np.bool_), (np.int32, np.int32)])
def test_argument_types_the_compiler_accepts(mask, predicate):
    n = 32
    masks = np.full(n, 0xFFFFFFFF).astype(mask)
    predicates = (np.arange(n) % 2).astype(predicate)
    result = np.zeros(n, np.int32)
    vote_all_with[1, n](masks, predicates, result)
    assert not result.any()  # half the lanes vote false
    vote_all_with[1, n](masks, np.ones(n, predicate), result)
    assert result.all()
