"""Lesson 02: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import pytest
from solution_cells import namespace_with

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import reduction

LESSON = "02_reduction"

RACE = pytest.mark.sim_only  # on a GPU a race may happen to give the right sum on one run

# (exercise, bug, text in the solution, replacement, words expected in the message)
BUGGY = [
    pytest.param("simple", "missing barrier", "        cuda.syncthreads()\n", "", "", marks=RACE),
    ("simple", "wrong index", "i = 2 * t\n", "i = t\n", ""),
    ("simple", "wrong stride", "stride *= 2", "stride *= 4", ""),
    pytest.param("convergent", "missing barrier", "        cuda.syncthreads()\n", "", "",
                 marks=RACE),
    pytest.param("convergent", "off-by-one bound", "if t < stride:", "if t <= stride:", "",
                 marks=RACE),
    ("shared", "writes its input", "partial[t] = input[t] + input[t + cuda.blockDim.x]",
     "input[t] += input[t + cuda.blockDim.x]\n    partial[t] = input[t]", "modified input"),
    pytest.param("shared", "missing barrier", "        cuda.syncthreads()\n", "", "", marks=RACE),
    ("segmented", "missing bounds check", "    if i < n:\n        value = input[i]",
     "    value = input[i]", ""),
    pytest.param("segmented", "non-atomic cross-block add", "cuda.atomic.add(output, 0, total)",
                 "output[0] += total", "data race on output[0]", marks=RACE),
    ("segmented", "segment stride one block too short",
     "i = 2 * cuda.blockDim.x * cuda.blockIdx.x + t", "i = cuda.blockDim.x * cuda.blockIdx.x + t",
     ""),
    ("coarsened", "wrong stride", "i = start + k * cuda.blockDim.x", "i = start + k", ""),
    ("coarsened", "missing bounds check", "        if i < n:\n            value += input[i]",
     "        value += input[i]", ""),
    ("shuffle", "a shuffle step missing", "(16, 8, 4, 2, 1)", "(16, 8, 4, 2)", ""),
    ("shuffle", "block-stride instead of grid-stride", "i += cuda.gridsize(1)",
     "i += cuda.blockDim.x", ""),
    pytest.param("shuffle", "non-atomic cross-block add", "cuda.atomic.add(output, 0, acc)",
                 "output[0] += acc", "data race on output[0]", marks=RACE),
    ("generic", "wrong identity for idle lanes", "if lane < warps else init_value",
     "if lane < warps else float32(0.0)", ""),
    ("generic", "index not shuffled", "other_index = cuda.shfl_down_sync(FULL_MASK, index, offset)",
     "other_index = index", "argmax index"),
]


def _bug_id(case):
    values = case.values if hasattr(case, "values") else case
    return f"{values[0]}-{values[1].replace(' ', '_')}"


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in reduction.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"reduction.{exercise}")
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,words", BUGGY, ids=[_bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, words):
    ns = namespace_with(LESSON, f"reduction.{exercise}", old, new)
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert not result.passed, f"{bug} was not caught: {result.summary()}"
    assert words in result.summary()
