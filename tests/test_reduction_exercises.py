"""Lesson 02: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import pytest
from solution_cells import namespace_with

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import reduction

LESSON = "02_reduction"

# (exercise, bug, text in the solution, replacement, words expected in the message)
BUGGY = [
    ("simple", "missing barrier", "        cuda.syncthreads()\n", "", ""),
    ("simple", "wrong index", "i = 2 * t\n", "i = t\n", ""),
    ("simple", "wrong stride", "stride *= 2", "stride *= 4", ""),
    ("convergent", "missing barrier", "        cuda.syncthreads()\n", "", ""),
    ("convergent", "off-by-one bound", "if t < stride:", "if t <= stride:", ""),
    ("shared", "writes its input", "partial[t] = input[t] + input[t + cuda.blockDim.x]",
     "input[t] += input[t + cuda.blockDim.x]\n    partial[t] = input[t]", "modified input"),
    ("shared", "missing barrier", "        cuda.syncthreads()\n", "", ""),
    ("segmented", "missing bounds check", "    if i < n:\n        value = input[i]",
     "    value = input[i]", ""),
    ("segmented", "non-atomic cross-block add", "cuda.atomic.add(output, 0, total)",
     "output[0] += total", ""),
    ("segmented", "segment stride one block too short",
     "i = 2 * cuda.blockDim.x * cuda.blockIdx.x + t", "i = cuda.blockDim.x * cuda.blockIdx.x + t",
     ""),
    ("coarsened", "wrong stride", "i = start + k * cuda.blockDim.x", "i = start + k", ""),
    ("coarsened", "missing bounds check", "        if i < n:\n            value += input[i]",
     "        value += input[i]", ""),
    ("shuffle", "a shuffle step missing", "(16, 8, 4, 2, 1)", "(16, 8, 4, 2)", ""),
    ("shuffle", "block-stride instead of grid-stride", "i += cuda.gridsize(1)",
     "i += cuda.blockDim.x", ""),
    ("shuffle", "non-atomic cross-block add", "cuda.atomic.add(output, 0, acc)",
     "output[0] += acc", ""),
    ("generic", "wrong identity for idle lanes", "if lane < warps else init_value",
     "if lane < warps else float32(0.0)", ""),
    ("generic", "index not shuffled", "other_index = cuda.shfl_down_sync(FULL_MASK, index, offset)",
     "other_index = index", "argmax index"),
]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in reduction.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"reduction.{exercise}")
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,words", BUGGY,
                         ids=[f"{b[0]}-{b[1].replace(' ', '_')}" for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, words):
    ns = namespace_with(LESSON, f"reduction.{exercise}", old, new)
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert not result.passed, f"{bug} was not caught: {result.summary()}"
    assert words in result.summary()
