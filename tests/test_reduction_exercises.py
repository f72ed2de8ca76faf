"""Lesson 02: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import pytest
from solution_cells import assert_rejected, bug_id, namespace_with, solution_notebook

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import reduction
from grader.runner import exec_cell

LESSON = "02_reduction"

RACE = pytest.mark.sim_only  # on a GPU a race may happen to give the right sum on one run

# What a wrong sum reports (grader.verify.expect_sum), and a bound one past the input: the
# simulator stops at the index; on a GPU the read past the end gives a wrong (or NaN) sum.
WRONG_SUM = ("wrong result", "(float64 reference), got")
PAST_INPUT = {"sim": ("out of bounds", "is out of bounds for axis 0"),
              "gpu": ("wrong result", ("(float64 reference), got", "past the end of the input"))}

# (exercise, bug, text in the solution, replacement, expected rejection: (kind, words in the
# message) with kind a key of BUG_STATUSES, or a dict of them by mode)
BUGGY = [
    pytest.param("simple", "missing barrier", "        cuda.syncthreads()\n", "",
                 ("race", "data race on global memory input["), marks=RACE),
    # threads 2t and 2t + 1 now overlap: the simulator's racecheck sees one read another's
    # element; on a GPU the sum is wrong
    ("simple", "wrong index", "i = 2 * t\n", "i = t\n",
     {"sim": ("race", "data race on global memory input["), "gpu": WRONG_SUM}),
    ("simple", "wrong stride", "stride *= 2", "stride *= 4", WRONG_SUM),
    pytest.param("convergent", "missing barrier", "        cuda.syncthreads()\n", "",
                 ("race", "data race on global memory input["), marks=RACE),
    pytest.param("convergent", "off-by-one bound", "if t < stride:", "if t <= stride:",
                 ("race", "racecheck: data race"), marks=RACE),
    ("shared", "writes its input", "partial[t] = input[t] + input[t + cuda.blockDim.x]",
     "input[t] += input[t + cuda.blockDim.x]\n    partial[t] = input[t]",
     ("wrong result", "modified input")),
    pytest.param("shared", "missing barrier", "        cuda.syncthreads()\n", "",
                 ("race", "data race on shared memory partial["), marks=RACE),
    ("segmented", "missing bounds check", "    if i < n:\n        value = input[i]",
     "    value = input[i]", PAST_INPUT),
    pytest.param("segmented", "non-atomic cross-block add", "cuda.atomic.add(output, 0, total)",
                 "output[0] += total", ("race", "data race on output[0]"), marks=RACE),
    ("segmented", "segment stride one block too short",
     "i = 2 * cuda.blockDim.x * cuda.blockIdx.x + t", "i = cuda.blockDim.x * cuda.blockIdx.x + t",
     WRONG_SUM),
    ("coarsened", "wrong stride", "i = start + k * cuda.blockDim.x", "i = start + k", WRONG_SUM),
    ("coarsened", "missing bounds check", "        if i < n:\n            value += input[i]",
     "        value += input[i]", PAST_INPUT),
    ("shuffle", "a shuffle step missing", "(16, 8, 4, 2, 1)", "(16, 8, 4, 2)", WRONG_SUM),
    ("shuffle", "block-stride instead of grid-stride", "i += cuda.gridsize(1)",
     "i += cuda.blockDim.x", WRONG_SUM),
    pytest.param("shuffle", "non-atomic cross-block add", "cuda.atomic.add(output, 0, acc)",
                 "output[0] += acc", ("race", "data race on output[0]"), marks=RACE),
    # the max of non-positive values over idle lanes holding 0: the value is wrong
    ("generic", "wrong identity for idle lanes", "if lane < warps else init_value",
     "if lane < warps else float32(0.0)", ("wrong result", "max value: expected")),
    ("generic", "index not shuffled", "other_index = cuda.shfl_down_sync(FULL_MASK, index, offset)",
     "other_index = index", ("wrong result", "argmax index")),
    # Diagnosed by the simulator sanitizer (workbook.sim.sanitizer): racecheck, initcheck,
    # synccheck. On a GPU these give a wrong (or, by luck, right) result instead.
    pytest.param("simple", "missing barrier, diagnosed", "        cuda.syncthreads()\n", "",
                 ("race", "missing cuda.syncthreads()?"), marks=RACE),
    pytest.param("simple", "barrier inside the branch",
                 "            input[i] += input[i + stride]\n        cuda.syncthreads()",
                 "            input[i] += input[i + stride]\n            cuda.syncthreads()",
                 ("barrier", "synccheck"), marks=RACE),
    pytest.param("convergent", "missing barrier, diagnosed", "        cuda.syncthreads()\n", "",
                 ("race", "missing cuda.syncthreads()?"), marks=RACE),
    pytest.param("convergent", "off-by-one bound, diagnosed", "if t < stride:", "if t <= stride:",
                 ("race", "data race on global memory input["), marks=RACE),
    pytest.param("shared", "missing barrier, diagnosed", "        cuda.syncthreads()\n", "",
                 ("race", "data race on shared memory partial["), marks=RACE),
    pytest.param("shared", "stores one slot off",
                 "partial[t] = input[t] + input[t + cuda.blockDim.x]",
                 "partial[t + 1] = input[t] + input[t + cuda.blockDim.x]",
                 ("uninitialised", "read of uninitialised shared memory partial[0]"), marks=RACE),
    pytest.param("shared", "no bounds check in the tree",
                 "        if t < stride:\n            partial[t] += partial[t + stride]",
                 "        partial[t] += partial[t + stride]", ("race", "racecheck"), marks=RACE),
    pytest.param("segmented", "missing bounds check, diagnosed",
                 "    if i < n:\n        value = input[i]", "    value = input[i]",
                 ("out of bounds", "out of bounds"), marks=RACE),
    pytest.param("segmented", "early return past the end",
                 "    value = float32(0.0)\n    if i < n:\n        value = input[i]\n",
                 "    if i >= n:\n        return\n    value = input[i]\n",
                 ("barrier", "returned after 0 cuda.syncthreads()"), marks=RACE),
    pytest.param("segmented", "partial[0] never written", "    partial[t] = value\n",
                 "    if t > 0:\n        partial[t] = value\n",
                 ("uninitialised", "read of uninitialised shared memory partial[0]"), marks=RACE),
    pytest.param("coarsened", "non-atomic cross-block add", "cuda.atomic.add(output, 0, total)",
                 "output[0] += total", ("race", "data race on output[0]"), marks=RACE),
    pytest.param("coarsened", "missing bounds check, diagnosed",
                 "        if i < n:\n            value += input[i]", "        value += input[i]",
                 ("out of bounds", "out of bounds"), marks=RACE),
    pytest.param("coarsened", "partial[0] never written", "    partial[t] = value\n",
                 "    if t > 0:\n        partial[t] = value\n",
                 ("uninitialised", "read of uninitialised shared memory partial[0]"), marks=RACE),
    pytest.param("coarsened", "early return past the end",
                 "    value = float32(0.0)\n    for k",
                 "    if start >= n:\n        return\n    value = float32(0.0)\n    for k",
                 ("barrier", "synccheck"), marks=RACE),
    pytest.param("shuffle", "reads every lane's warp total",
                 "acc = warp_totals[lane] if lane < warps else float32(0.0)",
                 "acc = warp_totals[lane]",
                 ("uninitialised", "read of uninitialised shared memory warp_totals["),
                 marks=RACE),
    # A shuffle orders the lanes of one warp only: the warp totals that lane 0 of each warp
    # writes and warp 0 reads need a barrier (caught in blocks of several warps).
    pytest.param("shuffle", "no barrier between warp totals and their reads",
                 "        warp_totals[warp] = acc\n    cuda.syncthreads()\n",
                 "        warp_totals[warp] = acc\n",
                 ("race", "data race on shared memory warp_totals["), marks=RACE),
    pytest.param("generic", "no barrier between warp values and their reads",
                 "        warp_indices[warp] = index\n        cuda.syncthreads()\n",
                 "        warp_indices[warp] = index\n",
                 ("race", "data race on shared memory warp_"), marks=RACE),
    pytest.param("generic", "non-atomic cross-block write", "out_values[cuda.blockIdx.x] = value",
                 "out_values[0] = value", ("race", "data race on out_values[0]"), marks=RACE),
    pytest.param("generic", "reads every lane's warp value",
                 "value = warp_values[lane] if lane < warps else init_value",
                 "value = warp_values[lane]",
                 ("uninitialised", "read of uninitialised shared memory warp_values["),
                 marks=RACE),
]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in reduction.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"reduction.{exercise}")
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,expect", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, expect):
    ns = namespace_with(LESSON, f"reduction.{exercise}", old, new)
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert_rejected(result, bug, expect, workbook.MODE)


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


@RACE
@pytest.mark.parametrize("bug,old,new", TREE_BUGS, ids=[b[0].replace(" ", "_") for b in TREE_BUGS])
@pytest.mark.parametrize("exercise", ["segmented", "coarsened"])
def test_missing_barrier_in_helper_diagnosed(exercise, bug, old, new):
    ns = _namespace_with_helper_bug(f"reduction.{exercise}", old, new)
    result = check_exercise(get_exercise(f"reduction.{exercise}"), ns, workbook.MODE)
    assert_rejected(result, bug, ("race", "missing cuda.syncthreads()?"), workbook.MODE)
