"""Lesson 01: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import pytest
from solution_cells import assert_rejected, bug_id, namespace_with
from tool_fixtures import ncu_csv

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import ldmatrix
from workbook.sim.watchdog import simulated_threads

LESSON = "01_ldmatrix"
SIM = pytest.mark.sim_only  # detected by the simulator; on a GPU the result may look right

CVTA = "static_cast<unsigned int>(__cvta_generic_to_shared(row))"
NO_CVTA = "static_cast<unsigned int>(reinterpret_cast<unsigned long long>(row))"

REJECTED = "rejected code"  # what the grader reads in the CUDA C or its PTX before a launch
WRONG = "wrong result"
NO_INSTRUCTION = REJECTED  # code without the instruction the exercise is about (counted as it runs)

# (exercise, bug, text in the solution, replacement, expected rejection: (kind, words in the
# message) with kind a key of BUG_STATUSES, or a dict of them by mode)
BUGGY = [
    ("address", "generic address instead of shared",
     "*ret = static_cast<unsigned int>(__cvta_generic_to_shared(p));",
     "*ret = static_cast<unsigned int>(reinterpret_cast<unsigned long long>(p));",
     (REJECTED, "cvta")),
    ("address", "wrong element", "shared_address(tile[t:].ctypes)",
     "shared_address(tile[2 * t:].ctypes)", (WRONG, "bytes after thread 0")),
    ("address", "C++ name", 'extern "C" __device__ int shared_address',
     "__device__ int shared_address", (REJECTED, 'extern "C"')),
    ("predict", "transposed map", "(lane // 4, 2 * (lane % 4) + half)",
     "(2 * (lane % 4) + half, lane // 4)", (WRONG, ".trans layout")),
    ("predict", "halves swapped", "2 * (lane % 4) + half)", "2 * (lane % 4) + 1 - half)",
     (WRONG, "halves are swapped")),
    ("x1", "wrong row-address lane mapping", "ldmatrix_x1(tile[lane % 8, :].ctypes)",
     "ldmatrix_x1(tile[lane // 4, :].ctypes)", (WRONG, "row address")),
    ("x1", "missing cvta", CVTA, NO_CVTA, (REJECTED, "cvta")),
    ("x1", "trans where none belongs", "m8n8.x1.shared.b16", "m8n8.x1.trans.shared.b16",
     (REJECTED, "without .trans")),
    ("x1", "uint32_t (no <cstdint> in NVRTC)", "unsigned int address =", "uint32_t address =",
     (REJECTED, "does not compile")),
    ("x1", "misspelled instruction", "ldmatrix.sync.aligned.m8n8.x1",
     "ldmatrix.sync.aligned.m8n8.x3", (REJECTED, "ptxas")),
    # rows 4..7 of the tile are never stored: the simulator's initcheck stops ldmatrix's read
    # of them; on a GPU they hold whatever the shared memory held
    ("x1", "half of the matrix never copied",
     "    tile[lane // 8 + 4, lane % 8] = matrix[lane // 8 + 4, lane % 8]\n", "",
     {"sim": ("uninitialised", "read of uninitialised shared memory tile["),
      "gpu": (WRONG, "registers differ")}),
    ("x4", "wrong register order", '"=r"(ret[0]), "=r"(ret[1]), "=r"(ret[2])',
     '"=r"(ret[1]), "=r"(ret[0]), "=r"(ret[2])',
     (WRONG, "Register 0 holds what register 1 should")),
    ("x4", "wrong matrix addressing", "tile[lane % 16, 8 * (lane // 16):]",
     "tile[lane % 8, 8 * (lane // 8 % 2):]", (WRONG, "which lanes address which matrix")),
    ("x4", "missing cvta", CVTA, NO_CVTA, (REJECTED, "cvta")),
    ("trans", "missing .trans", "x2.trans.shared.b16", "x2.shared.b16",
     (REJECTED, "x2.trans.shared.b16 instruction")),
    ("trans", "register order", '"=r"(ret[0]), "=r"(ret[1])', '"=r"(ret[1]), "=r"(ret[0])',
     (WRONG, "Register 0 holds what register 1 should")),
    ("stmatrix", "register order", "[%0], {%1, %2, %3, %4}", "[%0], {%2, %1, %3, %4}",
     (WRONG, "stmatrix_x4_kernel: element")),
    ("stmatrix", "missing cvta", CVTA, NO_CVTA, (REJECTED, "cvta")),
    # lanes l and l + 16 give the same row address: two stmatrix rows land on one, which the
    # simulator's racecheck reports; on a GPU the round trip comes back wrong
    ("stmatrix", "round trip through the wrong rows",
     "stmatrix_x4(dst[lane % 16, 8 * (lane // 16):].ctypes, r0, r1, r2, r3)",
     "stmatrix_x4(dst[lane % 16, 8 * (lane // 8 % 2):].ctypes, r0, r1, r2, r3)",
     {"sim": ("race", "data race on shared memory dst["), "gpu": (WRONG, "roundtrip_kernel")}),
    ("mma", "a1 and a2 swapped", "mma_m16n8k16(a0, a1, a2, a3, b0, b1, zero",
     "mma_m16n8k16(a0, a2, a1, a3, b0, b1, zero", (WRONG, "elements are off")),
    ("mma", "layout .col.row (not an sm_90 mma)", "m16n8k16.row.col.f32", "m16n8k16.col.row.f32",
     (REJECTED, "does not compile")),
    ("mma", "accumulator rows swapped", "c[g + 8, t2] = d2", "c[g + 8, t2] = d1",
     (WRONG, "Wrong rows: [8, 9, 10, 11, 12, 13, 14, 15]")),
    ("gemm", "B fragment from the wrong k rows", "tile_b[kk + lane % 16, wn:]",
     "tile_b[lane % 16, wn:]", (WRONG, "elements are off")),
    ("gemm", "accumulators in the wrong order",
     "b0, b1, d0, d1, d2, d3)", "b0, b1, d0, d1, d3, d2)", (WRONG, "of 1024 elements are off")),
    # two warps store the same output columns: a race between them in the simulator, a wrong
    # result on a GPU
    ("gemm", "warp tiles overlap", "wn = 16 * (t // 32 % 2)", "wn = 8 * (t // 32 % 2)",
     {"sim": ("race", "data race on global memory c["), "gpu": (WRONG, "elements are off")}),
    pytest.param("swizzle", "no swizzle: right fragments, 8-way bank conflicts",
                 "return ((col // 8) ^ (row % 8)) * 8 + col % 8", "return col",
                 (WRONG, "bank conflicts"), marks=SIM),
    ("swizzle", "swizzled store, plain load", "tile[row, swizzle(row, col):]", "tile[row, col:]",
     (WRONG, "registers differ")),
    # The emulated PTX reports its shared-memory accesses to racecheck: a tile written by the
    # lanes and read by ldmatrix (or written by stmatrix and read by the lanes) needs a barrier.
    *(pytest.param(exercise, f"no barrier before the {what}", old, new,
                   ("race", "racecheck: data race"), marks=SIM)
      for exercise, what, old, new in [
        ("x1", "ldmatrix", "    cuda.syncthreads()\n    out[lane] = ldmatrix_x1",
         "    out[lane] = ldmatrix_x1"),
        ("x4", "ldmatrix", "    cuda.syncthreads()\n    r0, r1, r2, r3 = ldmatrix_x4(tile[",
         "    r0, r1, r2, r3 = ldmatrix_x4(tile["),
        ("trans", "ldmatrix", "    cuda.syncthreads()\n    r0, r1 = ldmatrix_x2_trans",
         "    r0, r1 = ldmatrix_x2_trans"),
        ("stmatrix", "reads of what stmatrix wrote",
         "frags[lane, 2], frags[lane, 3])\n    cuda.syncthreads()\n",
         "frags[lane, 2], frags[lane, 3])\n"),
        ("stmatrix", "round trip's ldmatrix",
         "    cuda.syncthreads()\n    r0, r1, r2, r3 = ldmatrix_x4(src",
         "    r0, r1, r2, r3 = ldmatrix_x4(src"),
        ("mma", "ldmatrix", "    cuda.syncthreads()\n    a0, a1, a2, a3 = ldmatrix_x4",
         "    a0, a1, a2, a3 = ldmatrix_x4"),
        ("gemm", "ldmatrix", "        cuda.syncthreads()\n        for kk", "        for kk"),
        ("gemm", "next tile overwrites what ldmatrix reads",
         "d4, d5, d6, d7)\n        cuda.syncthreads()\n", "d4, d5, d6, d7)\n"),
        ("swizzle", "ldmatrix", "    cuda.syncthreads()\n    row = lane % 16",
         "    row = lane % 16"),
    ]),
    # Fragments assembled from ordinary shared-memory loads give the right numbers without the
    # instruction the exercise is about: the simulator counts the instructions each launch
    # executes (on a GPU the SASS check, where a disassembler is installed, and the metric
    # rule of ldmatrix.gemm catch them)
    *(pytest.param(exercise, bug, old, new, (NO_INSTRUCTION, words), marks=SIM)
      for exercise, bug, old, new, words in [
        ("x1", "registers from scalar shared-memory loads",
         "    out[lane] = ldmatrix_x1(tile[lane % 8, :].ctypes)\n",
         "    g, c = lane // 4, 2 * (lane % 4)\n"
         "    out[lane] = uint32(tile[g, c]) | (uint32(tile[g, c + 1]) << 16)\n",
         "ldmatrix_x1_kernel issued 0 ldmatrix instructions"),
        ("stmatrix", "round trip through ordinary loads and stores",
         "    r0, r1, r2, r3 = ldmatrix_x4(src[lane % 16, 8 * (lane // 16):].ctypes)\n"
         "    stmatrix_x4(dst[lane % 16, 8 * (lane // 16):].ctypes, r0, r1, r2, r3)\n",
         "    for i in range(8):\n"
         "        e = lane + 32 * i\n"
         "        dst[e // 16, e % 16] = src[e // 16, e % 16]\n",
         "roundtrip_kernel issued 0 ldmatrix instructions"),
        ("mma", "B's fragments from scalar shared-memory loads",
         "    b0, b1 = ldmatrix_x2_trans(tile_b[lane % 16, :].ctypes)\n",
         "    k, n = 2 * (lane % 4), lane // 4\n"
         "    b0 = uint32(uint32(tile_b[k, n]) | (uint32(tile_b[k + 1, n]) << 16))\n"
         "    b1 = uint32(uint32(tile_b[k + 8, n]) | (uint32(tile_b[k + 9, n]) << 16))\n",
         "mma_tile_kernel issued 1 ldmatrix instruction (counted by the simulator as it ran), "
         "expected at least 2"),
        # as the lesson's gemm_scalar_kernel
        ("gemm", "fragments from scalar shared-memory loads",
         "            a0, a1, a2, a3 = ldmatrix_x4(tile_a[wm + lane % 16, kk + 8 * (lane // 16):]"
         ".ctypes)\n"
         "            b0, b1 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn:].ctypes)\n"
         "            b2, b3 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn + 8:].ctypes)\n",
         "            g, t2 = lane // 4, 2 * (lane % 4)\n"
         "            i, k, n = wm + g, kk + t2, wn + g\n"
         "            a0 = uint32(tile_a[i, k]) | (uint32(tile_a[i, k + 1]) << 16)\n"
         "            a1 = uint32(tile_a[i + 8, k]) | (uint32(tile_a[i + 8, k + 1]) << 16)\n"
         "            a2 = uint32(tile_a[i, k + 8]) | (uint32(tile_a[i, k + 9]) << 16)\n"
         "            a3 = uint32(tile_a[i + 8, k + 8]) | (uint32(tile_a[i + 8, k + 9]) << 16)\n"
         "            b0 = uint32(tile_b[k, n]) | (uint32(tile_b[k + 1, n]) << 16)\n"
         "            b1 = uint32(tile_b[k + 8, n]) | (uint32(tile_b[k + 9, n]) << 16)\n"
         "            b2 = uint32(tile_b[k, n + 8]) | (uint32(tile_b[k + 1, n + 8]) << 16)\n"
         "            b3 = uint32(tile_b[k + 8, n + 8]) | (uint32(tile_b[k + 9, n + 8]) << 16)\n",
         "gemm_kernel issued 0 ldmatrix instructions"),
        # the metric rule's slow variant: 8 of the reference's 24 on the first case, 32x32x32
        ("gemm", "B's fragments from scalar shared-memory loads",
         *ldmatrix.SLOW_VARIANTS["ldmatrix.gemm"][1:],
         "gemm_kernel issued 8 ldmatrix instructions (counted by the simulator as it ran), "
         "expected at least 10"),
        ("swizzle", "fragments from scalar loads of the swizzled tile",
         "        r0, r1, r2, r3 = ldmatrix_x4(tile[row, swizzle(row, col):].ctypes)\n",
         "        g, c = lane // 4, 16 * s + 2 * (lane % 4)\n"
         "        p0, p1, p2, p3 = (swizzle(g, c), swizzle(g + 8, c), swizzle(g, c + 8),\n"
         "                          swizzle(g + 8, c + 8))\n"
         "        r0 = uint32(tile[g, p0]) | (uint32(tile[g, p0 + 1]) << 16)\n"
         "        r1 = uint32(tile[g + 8, p1]) | (uint32(tile[g + 8, p1 + 1]) << 16)\n"
         "        r2 = uint32(tile[g, p2]) | (uint32(tile[g, p2 + 1]) << 16)\n"
         "        r3 = uint32(tile[g + 8, p3]) | (uint32(tile[g + 8, p3 + 1]) << 16)\n",
         "swizzled_fragments_kernel issued 0 ldmatrix instructions"),
    ]),
]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in ldmatrix.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"ldmatrix.{exercise}")
    result = check_exercise(get_exercise(f"ldmatrix.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,expect", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, expect):
    ns = namespace_with(LESSON, f"ldmatrix.{exercise}", old, new)
    result = check_exercise(get_exercise(f"ldmatrix.{exercise}"), ns, workbook.MODE)
    assert_rejected(result, bug, expect, workbook.MODE)
    # the error in one lane stops the block: no lane may stay blocked in a warp-wide
    # ldmatrix (its lock held by a lane that was stopped) and outlive the check
    if workbook.MODE == "sim":
        assert not simulated_threads(), "threads of the stopped kernel still run"


def test_c_stub_is_not_implemented():
    """A finished kernel with the CUDA C still a stub is 'not implemented', not a failure."""
    from grader.release import C_STUB

    solution = namespace_with(LESSON, "ldmatrix.x1")
    stub = solution["LDMATRIX_X1_CU"].split("// BEGIN SOLUTION")[0] + f"    {C_STUB}\n}}\n"
    ns = dict(solution, LDMATRIX_X1_CU=stub)
    result = check_exercise(get_exercise("ldmatrix.x1"), ns, workbook.MODE)
    assert result.status == "not implemented", result.summary()
    assert "LDMATRIX_X1_CU" in result.summary()


def test_tolerance_is_documented_and_scales_with_k():
    import numpy as np

    a = np.ones((16, 64), np.float16)
    b = np.ones((64, 8), np.float16)
    tol, why = ldmatrix.gemm_tolerance(a, b)
    assert np.allclose(tol, (64 + 4 + 1) * 2.0**-23 * 64)
    assert "K + K/16 + 1" in why


# --- benchmarks/ldmatrix.py, without a GPU ---------------------------------------------------

def _benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "ldmatrix.py"
    spec = importlib.util.spec_from_file_location("ldmatrix_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# benchmarks/ldmatrix.py's ncu run, --csv --page raw (tests/fixtures/ncu, see tool_fixtures)
NCU_CSV = ncu_csv("ldmatrix-bank-conflicts")


def test_benchmark_reads_ncu_csv():
    bench = _benchmark()
    metrics = ["gpu__time_duration.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
    records = {r["kernel"]: r for r in bench.parse_ncu_csv(NCU_CSV, metrics)}
    assert set(records) == {"plain_fragments_kernel", "swizzled_fragments_kernel"}
    plain, swizzled = records["plain_fragments_kernel"], records["swizzled_fragments_kernel"]
    assert all(isinstance(r[m], float) for r in (plain, swizzled) for m in metrics)
    assert plain[metrics[0]] > 0 and swizzled[metrics[0]] > 0  # nanoseconds, as recorded
    # one block of 4 ldmatrix.x4 on 128-byte rows: 8-way conflicts, 7 extra wavefronts for
    # each of the 16 8x8 matrices (the simulator counts the same 112), none once swizzled
    assert plain[metrics[1]] == 112 and swizzled[metrics[1]] == 0
    assert bench.parse_ncu_csv("==PROF== nothing profiled\n", metrics) == []


@pytest.mark.sim_only
def test_benchmark_smoke_run_writes_recorded_format(tmp_path):
    from workbook.recorded import format_table

    bench = _benchmark()
    out = tmp_path / "01_ldmatrix.json"
    result = bench.main(["--smoke", "--checks", "ldmatrix.predict", "--out", str(out)])
    assert out.exists() and set(result) == {"device", "date", "command", "parts"}
    checks = result["parts"]["checks"]["rows"]
    assert checks == [["ldmatrix.predict", "passed", 1, checks[0][3], checks[0][4]]]
    gemm = result["parts"]["gemm"]
    assert [r[0] for r in gemm["rows"]] == ["gemm_kernel", "gemm_scalar_kernel"]
    assert gemm["rows"][1][-1] == 1.0  # the scalar kernel relative to itself
    for part in result["parts"].values():
        assert format_table(part["columns"], part["rows"])
