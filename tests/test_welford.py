"""workbook.welford: the CPU references and the device all-reductions (in the current mode)."""

import numpy as np
import pytest
from numba import cuda, float32

import workbook  # noqa: F401  (mode first)
from workbook import welford as wf

# The simulator swaps the module-level name ``cuda`` inside kernels: kernels live at module level.


@cuda.jit
def warp_allreduce_kernel(values, counts, width, out):
    """Lane t holds the Welford statistics of values[t, :counts[t]]; every lane writes the
    result of its group of ``width`` lanes."""
    t = cuda.threadIdx.x
    m = m2 = n = float32(0.0)
    for j in range(counts[t]):
        m, m2, n = wf.welford_update_device(m, m2, n, values[t, j])
    m, m2, n = wf.welford_warp_allreduce(m, m2, n, width)
    out[t, 0] = m
    out[t, 1] = m2
    out[t, 2] = n


@cuda.jit
def block_allreduce_kernel(values, out):
    """Thread t folds values[r, t] for each row r; the block reduces row after row."""
    t = cuda.threadIdx.x
    for r in range(values.shape[0]):
        m = m2 = n = float32(0.0)
        if t < values.shape[1]:
            m, m2, n = wf.welford_update_device(m, m2, n, values[r, t])
        m, m2, n = wf.welford_block_allreduce(m, m2, n)
        out[r, t, 0] = m
        out[r, t, 1] = m2
        out[r, t, 2] = n


@cuda.jit
def combine_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        m, m2, n = wf.welford_combine_device(a[i, 0], a[i, 1], a[i, 2], b[i, 0], b[i, 1],
                                             b[i, 2])
        out[i, 0] = m
        out[i, 1] = m2
        out[i, 2] = n


def _stats(values):
    v = np.asarray(values, np.float64)
    if v.size == 0:
        return 0.0, 0.0, 0.0
    return v.mean(), ((v - v.mean()) ** 2).sum(), float(v.size)


# --- CPU ------------------------------------------------------------------------------------

def test_naive_variance_cancels_and_the_stable_ones_do_not(rng):
    x = (1e4 + rng.standard_normal((8, 1024))).astype(np.float32)
    exact = x.astype(np.float64).var(axis=1)
    # float32 x*x near 1e8 is quantised to steps of 8, so the naive result is 0, 8, 16, ...:
    # its error is of the order of the variance itself (exactly 1.0 relative when it is 0).
    assert np.median(np.abs(wf.variance_naive(x) - exact) / exact) > 0.5
    for stable in (wf.variance_two_pass, wf.variance_welford):
        assert np.max(np.abs(stable(x) - exact) / exact) < 1e-2
    mean, m2, count = wf.parallel_welford(x, threads=32)
    assert np.max(np.abs(m2 / count - exact) / exact) < 1e-2
    assert np.all(count == 1024)


def test_combine_matches_the_union_and_ignores_empty_sides(rng):
    x = rng.standard_normal(100) + 50
    for split in (0, 1, 37, 99, 100):
        a, b = _stats(x[:split]), _stats(x[split:])
        mean, m2, count = wf.welford_combine(*a, *b)
        want = _stats(x)
        assert count == want[2]
        assert mean == pytest.approx(want[0], rel=1e-12)
        assert m2 == pytest.approx(want[1], rel=1e-9)
    assert wf.welford_combine(0.0, 0.0, 0.0, 0.0, 0.0, 0.0) == (0.0, 0.0, 0.0)


def test_update_is_the_combine_with_a_single_value():
    state = (3.0, 2.0, 4.0)
    single = wf.welford_combine(*state, 7.0, 0.0, 1.0)
    assert wf.welford_update(*state, 7.0) == pytest.approx(single)


def test_layer_norm_reference_follows_the_definition(rng):
    x = rng.standard_normal((3, 10)).astype(np.float32)
    gamma, beta = rng.standard_normal(10), rng.standard_normal(10)
    y, mean, rstd = wf.layer_norm_reference(x, gamma, beta, eps=1e-5)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True)
                                                       + np.float32(1e-5)) * gamma + beta
    np.testing.assert_allclose(y, want, rtol=1e-12)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(x64.var(1) + np.float32(1e-5)), rtol=1e-12)
    y0, _, rstd0 = wf.layer_norm_reference(np.full((1, 4), 2.5, np.float32), eps=1e-2)
    assert rstd0[0] == pytest.approx(10.0, rel=1e-6) and not y0.any()


# --- device -------------------------------------------------------------------------------

def test_device_combine_handles_empty_sides():
    a = np.array([[0, 0, 0], [2.0, 8.0, 4.0], [0, 0, 0], [1.0, 0.0, 1.0]], np.float32)
    b = np.array([[0, 0, 0], [0, 0, 0], [5.0, 2.0, 3.0], [3.0, 0.0, 1.0]], np.float32)
    out = cuda.to_device(np.full((4, 3), np.nan, np.float32))
    combine_kernel[1, 32](cuda.to_device(a), cuda.to_device(b), out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:3], [[0, 0, 0], [2.0, 8.0, 4.0], [5.0, 2.0, 3.0]])
    np.testing.assert_allclose(got[3], [2.0, 2.0, 2.0])


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32])
def test_warp_allreduce_gives_every_lane_of_a_group_the_same_bits(width, rng):
    per_lane = 3
    values = (100 + rng.standard_normal((32, per_lane))).astype(np.float32)
    counts = rng.integers(0, per_lane + 1, size=32).astype(np.int32)
    counts[: min(width, 32)] = 0  # the first group: no data at all
    counts[width % 32] = per_lane  # and a lane with a full count elsewhere
    out = cuda.to_device(np.full((32, 3), np.nan, np.float32))
    warp_allreduce_kernel[1, 32](cuda.to_device(values), cuda.to_device(counts), width, out)
    got = out.copy_to_host()
    for first in range(0, 32, width):
        group = got[first:first + width]
        assert (group == group[0]).all(), f"lanes of group {first} disagree: {group}"
        data = np.concatenate([values[t, :counts[t]] for t in range(first, first + width)])
        mean, m2, count = _stats(data)
        assert group[0, 2] == count
        assert group[0, 0] == pytest.approx(mean, rel=1e-6, abs=1e-6)
        assert group[0, 1] == pytest.approx(m2, rel=1e-3, abs=1e-3)


@pytest.mark.parametrize("threads", [32, 96])
def test_block_allreduce_row_after_row(threads, rng):
    values = (-50 + rng.standard_normal((3, threads - 7))).astype(np.float32)
    out = cuda.to_device(np.full((3, threads, 3), np.nan, np.float32))
    block_allreduce_kernel[1, threads](cuda.to_device(values), out)
    got = out.copy_to_host()
    for r in range(3):
        assert (got[r] == got[r, 0]).all()
        mean, m2, count = _stats(values[r])
        assert got[r, 0, 2] == count
        assert got[r, 0, 0] == pytest.approx(mean, rel=1e-6)
        assert got[r, 0, 1] == pytest.approx(m2, rel=1e-3)
