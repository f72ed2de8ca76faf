"""Runtime helpers the notebooks use: tolerance messages, diagrams, recorded data, timing,
64- and 128-bit loads and stores."""

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import workbook
from grader import check
from grader.exercise import Mismatch
from grader.verify import expect_sum, summation_tolerance
from workbook import diagrams, recorded
from workbook.bench import NeedsGPU, bandwidth_gbs, time_gpu
from workbook.vector import load4, load4_int32, load_half8, store2_int32, store4, store_half8

ROOT = Path(__file__).resolve().parents[1]

# The simulator swaps the module-level name ``cuda`` inside kernels, so test kernels
# live at module level.


@cuda.jit
def fill_ones(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = 1.0


@cuda.jit
def weigh_four(x, out):
    i = cuda.grid(1)
    if 4 * i < x.size:
        a, b, c, d = load4(x, 4 * i)
        out[i] = a + 10 * b + 100 * c + 1000 * d


@cuda.jit
def misaligned_load4(x, out):
    a, b, c, d = load4(x, 1)
    out[0] = a


@cuda.jit
def spread_four_ints(x, out):
    i = cuda.grid(1)
    if 4 * i < x.size:
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = load4_int32(x, 4 * i)


@cuda.jit
def misaligned_load4_int32(x, out):
    a, b, c, d = load4_int32(x, 2)
    out[0, 0] = a


@cuda.jit
def copies_first_element(input, output):  # a wrong "sum"
    if cuda.threadIdx.x == 0:
        output[0] = input[0]


def test_tolerance_grows_with_depth_and_magnitude():
    x = np.ones(1024, np.float32)
    tol, why = summation_tolerance(x)
    assert 0 < tol < 1e-3 and "gamma_11" in why
    assert summation_tolerance(x, sequential_terms=100)[0] > 5 * tol
    assert summation_tolerance(100 * x)[0] == pytest.approx(100 * tol)


def test_lost_blocks_are_diagnosed():
    x = np.arange(1, 1001, dtype=np.float32)
    first_two_blocks = float(x[:200].sum())
    with pytest.raises(Mismatch, match="first 2 block segment"):
        expect_sum(first_two_blocks, x, segment=100)


def test_overwritten_output_is_diagnosed():
    x = np.arange(1, 1001, dtype=np.float32)
    with pytest.raises(Mismatch, match="overwrote the output"):
        expect_sum(float(x[300:400].sum()), x, segment=100)


def test_nan_points_at_uninitialised_reads():
    with pytest.raises(Mismatch, match="bounds check"):
        expect_sum(float("nan"), np.ones(8, np.float32))


def test_a_correct_sum_passes_within_tolerance():
    x = np.random.default_rng(0).random(10_000, dtype=np.float32)
    expect_sum(float(np.sum(x, dtype=np.float32)), x)


@pytest.mark.parametrize("scheme", ["interleaved", "convergent"])
@pytest.mark.parametrize("n", [2, 16, 2048])
def test_tree_steps_compute_the_sum(scheme, n):
    x = np.arange(n, dtype=np.int64)
    for step in diagrams.tree_steps(n, scheme):
        writes = [dst for _, dst, _ in step]
        assert len(set(writes)) == len(writes), "two threads write one element in a step"
        for _, dst, src in step:
            x[dst] += x[src]
    assert x[0] == n * (n - 1) // 2


def test_convergent_scheme_keeps_fewer_warps_busy():
    _, interleaved = diagrams.active_warps(1024, "interleaved")
    _, convergent = diagrams.active_warps(1024, "convergent")
    assert convergent.sum() < interleaved.sum() / 2


def test_recorded_table_has_provenance(capsys):
    recorded.show_recorded("02_reduction", "single_block", plot=False)
    out = capsys.readouterr().out
    assert "measured on NVIDIA" in out and "simple_sum_kernel" in out


def test_missing_recording_is_reported(capsys):
    recorded.show_recorded("99_missing", "bandwidth")
    assert "no recorded GPU measurement" in capsys.readouterr().out


def test_merged_rows_replace_only_the_remeasured_ones(tmp_path):
    import json

    path = tmp_path / "lesson.json"
    rows = [["f32", 64, "dispatch", 1.0], ["f32", 64, "warp", 2.0], ["f32", 32, "dispatch", 3.0]]
    path.write_text(json.dumps({"device": "GPU A", "date": "d0", "parts": {
        "bandwidth": {"title": "t", "columns": ["dtype", "cols", "variant", "GB/s"],
                      "rows": rows, "all_rows": rows},
        "launch": {"rows": [["old", 1]]}}}))
    new = [["f32", 32, "dispatch", 5.0], ["f32", 64, "dispatch", 6.0]]
    update = {"date": "d1", "command": "bench --dispatch-only", "what": "dispatch rows"}
    result = recorded.merge_rows(path, {"bandwidth": {"rows": new, "all_rows": new},
                                        "launch": {"rows": [["new", 2]]}},
                                 lambda r: r[2] == "dispatch", "GPU A", update,
                                 order=lambda r: r[1], whole=("launch",))
    assert json.loads(path.read_text()) == result
    assert result["parts"]["bandwidth"]["rows"] == [
        ["f32", 32, "dispatch", 5.0], ["f32", 64, "warp", 2.0], ["f32", 64, "dispatch", 6.0]]
    assert result["parts"]["launch"]["rows"] == [["new", 2]]
    assert result["updates"] == [update] and result["date"] == "d0"
    with pytest.raises(ValueError, match="recorded on GPU A"):
        recorded.merge_rows(path, {}, lambda r: True, "GPU B", update)


def test_bandwidth_units():
    assert bandwidth_gbs(4e9, 1000.0) == pytest.approx(4.0)


@pytest.mark.sim_only
def test_timing_in_simulator_mode_says_it_needs_a_gpu():
    with pytest.raises(NeedsGPU, match="needs a real GPU"):
        time_gpu(lambda: None)


@pytest.mark.gpu
def test_timing_measures_a_kernel_on_the_gpu():
    a = cuda.device_array(1 << 24, np.float32)
    timing = time_gpu(lambda: fill_ones[(a.size + 255) // 256, 256](a), repeat=5, inner=3)
    assert 0 < timing.p20_ms <= timing.median_ms <= timing.p80_ms


def test_load4_reads_four_elements():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(4, np.float32)
    weigh_four[1, 4](x, out)
    expected = x[0::4] + 10 * x[1::4] + 100 * x[2::4] + 1000 * x[3::4]
    np.testing.assert_array_equal(out, expected)


def test_load4_int32_reads_four_integers_exactly():
    # values a float32 could not hold: a load that went through floats would round them
    x = np.array([2**31 - 1, -2**31, 16777217, -1, 0, 7, -16777219, 123456789], np.int32)
    out = np.zeros((2, 4), np.int32)
    spread_four_ints[1, 2](x, out)
    np.testing.assert_array_equal(out, x.reshape(2, 4))


@pytest.mark.sim_only
@pytest.mark.parametrize("kernel,array,error,message", [
    (misaligned_load4_int32, np.zeros(8, np.int32), IndexError, "multiple of 4"),
    (spread_four_ints, np.zeros(8, np.int64), TypeError, "reads an int32 array"),
], ids=["misaligned", "int64"])
def test_load4_int32_rejects_misaligned_index_and_other_dtypes(kernel, array, error, message):
    with pytest.raises(error, match=message):
        kernel[1, 1](array, np.zeros((2, 4), np.int32))


@pytest.mark.sim_only
def test_load4_rejects_misaligned_index():
    with pytest.raises(IndexError, match="multiple of 4"):
        misaligned_load4[1, 1](np.zeros(8, np.float32), np.zeros(1, np.float32))


def test_notebook_check_reports_a_wrong_kernel():
    result = check("reduction.simple", {"simple_sum_kernel": copies_first_element}, seed=1)
    assert result.status == "failed" and "expected" in result.messages[0]
    assert result.mode == workbook.MODE and result.score == 0


simple_sum_kernel = copies_first_element  # found by check() in this module's globals


def test_notebook_check_looks_names_up_in_the_callers_globals():
    assert check("reduction.simple").status == "failed"


@cuda.jit
def scale_four(x, y):
    i = 4 * cuda.grid(1)
    if i < x.size:
        a, b, c, d = load4(x, i)
        store4(y, i, 2 * a, b + 1, c, -d)


@cuda.jit
def halves_through_float32(x, y, sums):
    g = cuda.grid(1)
    i = 8 * g
    if i < x.size:
        v0, v1, v2, v3, v4, v5, v6, v7 = load_half8(x, i)
        sums[g] = ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))
        store_half8(y, i, v0 * 3, v1 * 3, v2 * 3, v3 * 3, v4 * 3, v5 * 3, v6 * 3, v7 * 3)


@cuda.jit
def misaligned_store4(y):
    store4(y, 2, 1.0, 2.0, 3.0, 4.0)


@cuda.jit
def pairs_swapped(x, y):
    i = 2 * cuda.grid(1)
    if i < x.size:
        store2_int32(y, i, x[i + 1], x[i])


@cuda.jit
def misaligned_store2_int32(y):
    store2_int32(y, 3, 1, 2)


@cuda.jit
def misaligned_load_half8(x, out):
    v0, v1, v2, v3, v4, v5, v6, v7 = load_half8(x, 4)
    out[0] = v0


def test_store4_writes_four_elements():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    scale_four[1, 4](x, y)
    expected = x.copy()
    expected[0::4] *= 2
    expected[1::4] += 1
    expected[3::4] *= -1
    np.testing.assert_array_equal(y, expected)


def test_store2_int32_writes_two_integers_exactly():
    # values a float32 could not hold, and the sign bit: a store through floats would round
    x = np.array([2**31 - 1, -2**31, 16777217, -1, 0, 7, -16777219, 123456789], np.int32)
    y = np.zeros(8, np.int32)
    pairs_swapped[1, 4](x, y)
    np.testing.assert_array_equal(y, x.reshape(4, 2)[:, ::-1].reshape(-1))


@pytest.mark.sim_only
@pytest.mark.parametrize("kernel,args,error,message", [
    (misaligned_store2_int32, (np.zeros(8, np.int32),), IndexError,
     "a 64-bit access needs an index that is a multiple of 2"),
    (pairs_swapped, (np.zeros(8, np.int32), np.zeros(8, np.int64)), TypeError,
     "store2_int32 writes an int32 array"),
], ids=["misaligned", "int64"])
def test_store2_int32_rejects_odd_index_and_other_dtypes(kernel, args, error, message):
    with pytest.raises(error, match=message):
        kernel[1, 1](*args)


def test_half8_loads_exactly_and_stores_rounded_to_nearest_even():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(32) * 100).astype(np.float16)
    x[:4] = [1.0, 1 + 2**-10, 65504.0, -2**-24]  # 1 + 2^-10: times 3 lands on a tie
    y = np.zeros(32, np.float16)
    sums = np.zeros(4, np.float32)
    halves_through_float32[1, 4](x, y, sums)
    x32 = x.astype(np.float32)
    expected_sums = [((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
                     for a in x32.reshape(4, 8)]
    np.testing.assert_array_equal(sums, np.array(expected_sums, np.float32))
    with np.errstate(over="ignore"):
        expected = (x32 * np.float32(3)).astype(np.float16)  # numpy rounds to nearest even
    np.testing.assert_array_equal(y, expected)


@pytest.mark.sim_only
@pytest.mark.parametrize("kernel,args,multiple", [
    (misaligned_store4, (np.zeros(8, np.float32),), "multiple of 4"),
    (misaligned_load_half8, (np.zeros(16, np.float16), np.zeros(1, np.float32)),
     "multiple of 8"),
])
def test_wide_accesses_reject_misaligned_indices(kernel, args, multiple):
    with pytest.raises(IndexError, match=multiple):
        kernel[1, 1](*args)


@pytest.mark.sim_only
@pytest.mark.parametrize("x,y,message", [
    (np.zeros(8, np.float32), np.zeros(8, np.float16), "load_half8 reads a float16 array"),
    (np.zeros(8, np.float16), np.zeros(8, np.float32), "store_half8 writes a float16 array"),
], ids=["load from float32", "store to float32"])
def test_half_accesses_reject_other_dtypes(x, y, message):
    with pytest.raises(TypeError, match=message):
        halves_through_float32[1, 1](x, y, np.zeros(1, np.float32))


WIDE_ACCESS_PTX = r'''
from grader.gpu_compile import target
target.use_real_compiler()
from numba import cuda, float32, int32
from numba.cuda.types import float16
from workbook.vector import load4, load4_int32, load4_once, load_half8, load_half8_once
from workbook.vector import store2_int32

def copy4(load):
    def kernel(x, y):
        a, b, c, d = load(x, 0)
        y[0] = a + b + c + d
    return kernel

def copy8(load):
    def kernel(x, y):
        v = load(x, 0)
        y[0] = v[0] + v[7]
    return kernel

def instructions(ptx, prefix):
    return sorted({line.split()[0] for line in ptx.splitlines()
                   if line.strip().startswith(prefix)})

for name, make, load, dtype in (("load4", copy4, load4, float32),
                                ("load4_once", copy4, load4_once, float32),
                                ("load_half8", copy8, load_half8, float16),
                                ("load_half8_once", copy8, load_half8_once, float16),
                                ("load4_int32", copy4, load4_int32, int32)):
    out = int32 if dtype is int32 else float32
    ptx, _ = cuda.compile_ptx(make(load), (dtype[::1], out[::1]), cc=(9, 0))
    print(name, *instructions(ptx, "ld.global"))

def pair(x, y):
    store2_int32(y, 2 * cuda.grid(1), x[0], x[1])

ptx, _ = cuda.compile_ptx(pair, (int32[::1], int32[::1]), cc=(9, 0))
print("store2_int32", *instructions(ptx, "st.global"))
'''


@functools.cache
def wide_access_instructions() -> dict:
    """The global-memory instructions in the PTX of each wide access of workbook.vector,
    compiled for sm_90 without a GPU (one process for all of them: the compiler's start-up
    is most of its time)."""
    done = subprocess.run([sys.executable, "-c", WIDE_ACCESS_PTX], capture_output=True,
                          text=True, cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(line.split(maxsplit=1) for line in done.stdout.splitlines()
                if line.startswith(("load", "store")))


def test_store2_int32_is_one_64_bit_store():
    """The PTX of store2_int32: one st.global.v2.s32, no scalar store."""
    found = wide_access_instructions()
    assert found["store2_int32"] == "st.global.v2.s32", found


def test_read_once_loads_ask_the_l1_not_to_keep_the_data():
    """The PTX of each 128-bit load (compiled for sm_90 without a GPU): the read-once
    versions add the L1::no_allocate eviction hint of the PTX ISA to the same load; the int32
    load is the ordinary (coherent) one, not the read-only .nc path."""
    found = wide_access_instructions()
    loads = {name: found[name] for name in found if name.startswith("load")}
    assert loads == {"load4": "ld.global.nc.v4.f32",
                     "load4_once": "ld.global.nc.L1::no_allocate.v4.f32",
                     "load_half8": "ld.global.nc.v4.b32",
                     "load_half8_once": "ld.global.nc.L1::no_allocate.v4.b32",
                     "load4_int32": "ld.global.v4.s32"}, found
