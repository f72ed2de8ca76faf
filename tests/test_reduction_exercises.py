"""Lesson 02: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import pytest
from solution_cells import (
    assert_rejected,
    assert_variant_rejected,
    buggy_params,
    namespace_with,
    namespace_with_variant,
    solution_notebook,
)

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import reduction
from grader.runner import exec_cell

LESSON = "02_reduction"

BUGGY = buggy_params(reduction.EXERCISES)  # grader/exercises/reduction/variants/*.toml


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in reduction.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"reduction.{exercise}")
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("variant", BUGGY)
def test_buggy_variant_rejected(variant):
    ns = namespace_with_variant(LESSON, variant)
    result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert_variant_rejected(result, variant, workbook.MODE)


# Barriers removed from block_tree_sum, the setup cell's helper (exercises 4 and 5 call it).
TREE_BUGS = [
    ("first barrier", "        cuda.syncthreads()\n        if t < stride:",
     "        if t < stride:"),
    ("last barrier", "    cuda.syncthreads()\n    return partial[0]", "    return partial[0]"),
]


def _namespace_with_helper_bug(exercise_id, old, new):
    """Like ``namespace_with``, but the replacement applies to the setup cell that holds it."""
    namespace: dict = {"__name__": "__main__"}
    for cell in solution_notebook(LESSON).program_for(exercise_id):
        source = cell.source
        if cell.role == "setup" and "def block_tree_sum" in source:
            assert source.count(old) == 1, f"mutation {old!r} does not match once"
            source = source.replace(old, new)
        exec_cell({"index": cell.index, "source": source}, namespace)
    return namespace


@pytest.mark.sim_only
@pytest.mark.parametrize("bug,old,new", TREE_BUGS, ids=[b[0].replace(" ", "_") for b in TREE_BUGS])
@pytest.mark.parametrize("exercise", ["segmented", "coarsened"])
def test_missing_barrier_in_helper_diagnosed(exercise, bug, old, new):
    ns = _namespace_with_helper_bug(f"reduction.{exercise}", old, new)
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert_rejected(result, bug, ("race", "missing cuda.syncthreads()?"), workbook.MODE)
