"""Lesson 01: the solutions pass, and the known-buggy variants of
grader/exercises/ldmatrix/variants/ are rejected with a diagnosis."""

import dataclasses

import pytest
from sim_threads import threads_left_behind
from solution_cells import (
    assert_variant_rejected,
    buggy_params,
    namespace_with,
    namespace_with_variant,
)
from tool_fixtures import ncu_csv

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import ldmatrix, slow_variant
from workbook.sim.watchdog import where_threads_are

LESSON = ldmatrix.LESSON

# ldmatrix.gemm's slow variant (grader/exercises/ldmatrix/variants/gemm.toml) is correct but
# issues too few ldmatrix: the simulator counts 8 of the reference's 24 on the first case,
# 32x32x32, and rejects it as the GPU's metric rule does
SLOW_GEMM = dataclasses.replace(
    slow_variant("ldmatrix.gemm"), role="buggy",
    description="B's fragments from scalar shared-memory loads", sim_only=True,
    expect={"any": {"rejected code": "gemm_kernel issued 8 ldmatrix instructions (counted by "
                                     "the simulator as it ran), expected at least 10"}})
# the buggy variants of grader/exercises/ldmatrix/variants/*.toml, and the slow one above
BUGGY = [*buggy_params(ldmatrix.EXERCISES),
         pytest.param(SLOW_GEMM, id=SLOW_GEMM.short_id, marks=[pytest.mark.sim_only])]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in ldmatrix.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"ldmatrix.{exercise}")
    result = check_exercise(get_exercise(f"ldmatrix.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("variant", BUGGY)
def test_buggy_variant_rejected(variant):
    ns = namespace_with_variant(LESSON, variant)
    result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert_variant_rejected(result, variant, workbook.MODE)
    # the error in one lane stops the block: no lane may stay blocked in a warp-wide
    # ldmatrix (its lock held by a lane that was stopped) and outlive the check
    if workbook.MODE == "sim":
        left = threads_left_behind()
        assert not left, f"threads of the stopped kernel still run:\n{where_threads_are(left)}"


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
