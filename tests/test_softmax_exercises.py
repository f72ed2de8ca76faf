"""Lesson 03: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import numpy as np
import pytest
from solution_cells import assert_rejected, bug_id, namespace_with, namespace_with_variant

import workbook
from grader.exercise import Mismatch, check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import softmax

LESSON = "03_softmax"

SIM_ONLY = pytest.mark.sim_only  # found by the simulator's sanitizer or warp checks

# The shared-memory kernel's last pass rewritten to walk the cache linearly: correct only
# with a cuda.syncthreads() before the next row overwrites the cache, which it lacks.
LAST_PASS = """            for p in range(tid, num_packs, threads):
                for i in range(pack):
                    v = cache[i * num_packs + p]
                    values[i] = v - scale if log else v * scale
                store_pack(y[row], p * pack, values, 0)
"""
LINEAR_LAST_PASS = """            for c in range(tid, cols, threads):
                v = cache[c]
                y[row, c % num_packs * pack + c // num_packs] = v - scale if log else v * scale
"""

# A bound one past the end of a row: the simulator raises IndexError ("... is out of bounds
# ..."); on a GPU a load there reads the NaN after the row and a store there changes the
# padding after it ("... past the end of ...").
PAST_END = {"sim": ("out of bounds", "out of bounds"), "gpu": ("wrong result", "past the end of")}
WRONG = ("wrong result", "wrong elements in rows")  # a wrong output (softmax.expect_softmax)
# exp of an input beyond 88.7 without the row max subtracted: inf on a GPU (then NaN), and in
# the simulator either that or, beyond 709.8 (the float64 range of Python's math.exp), an
# OverflowError: the random "large" inputs decide
OVERFLOW = {"sim": [("overflow", "math range error"), ("wrong result", "subtract the row max")],
            "gpu": ("wrong result", "subtract the row max")}
WARP_LOAD = "if row < rows and col < cols:\n                        load_pack"
WARP_STORE = "if row < rows and col < cols:\n                        store_pack"
UNCACHED_FIRST_PASS = ("            for p in range(tid, num_packs, threads):\n"
                       "                load_pack(x[row], p * pack, values, 0)\n"
                       "                pack_max")
UNCACHED_LAST_PASS = ("            for p in range(tid, num_packs, threads):\n"
                      "                load_pack(x[row], p * pack, values, 0)\n"
                      "                for i in range(pack):\n                    shifted")

# (exercise, bug, text in the solution, replacement, expected rejection: (kind, words in the
# message: a phrase or a tuple of alternatives) with kind a key of BUG_STATUSES, or a dict of
# them by mode)
BUGGY = [
    ("warp", "load guard one past the row (col <= cols)", WARP_LOAD,
     WARP_LOAD.replace("col < cols", "col <= cols"), PAST_END),
    ("warp", "store guard one past the row (col <= cols)", WARP_STORE,
     WARP_STORE.replace("col < cols", "col <= cols"), PAST_END),
    # on a GPU the rows past the last are read (guard rows) but never stored: the result is
    # right, and only the simulator (or memcheck on exact-size buffers) sees the reads
    pytest.param("warp", "no row bound on the loads", WARP_LOAD,
                 WARP_LOAD.replace("row < rows and ", ""),
                 ("out of bounds", "is out of bounds for axis 0"), marks=SIM_ONLY),
    ("block_uncached", "normalising pass one pack past the row", UNCACHED_LAST_PASS,
     UNCACHED_LAST_PASS.replace("num_packs,", "num_packs + 1,"), PAST_END),
    # on a GPU the pack after the row is NaN, and `pack_max > NEG_INF` is false for NaN: the
    # pack is skipped and the result is right
    pytest.param("block_uncached", "online pass one pack past the row", UNCACHED_FIRST_PASS,
                 UNCACHED_FIRST_PASS.replace("num_packs,", "num_packs + 1,"),
                 ("out of bounds", "out of bounds"), marks=SIM_ONLY),
    ("cpu", "no max subtraction", "shifted = x32 - x32.max(axis=1, keepdims=True)",
     "shifted = x32", ("wrong result", "subtract the row max")),
    ("cpu", "computes in float16", "x32 = x.astype(np.float32)", "x32 = x", WRONG),
    ("cpu", "returns float32 for float16 input", "return y.astype(x.dtype)", "return y",
     ("wrong result", "y has dtype float32")),
    ("naive", "max starts at 0", "        m = NEG_INF\n", "        m = float32(0.0)\n", WRONG),
    ("naive", "no max subtraction in the sum",
     "s += math.exp(float32(x[r, c]) - row_max[r])", "s += math.exp(float32(x[r, c]))", WRONG),
    # the simulator stops at the first index past the rows; on a GPU the store lands in the
    # guard rows after the output
    ("naive", "no row bound in normalize", "if r < x.shape[0] and c < x.shape[1]:",
     "if c < x.shape[1]:", {"sim": ("out of bounds", "is out of bounds for axis 0"),
                            "gpu": ("wrong result", ("past the end of", "wrong elements"))}),
    ("warp", "sum over 32 lanes instead of the group", "s = warp_all_reduce_sum(s, W)",
     "s = warp_all_reduce_sum(s, 32)", WRONG),
    ("warp", "no max subtraction", "shifted = buf[r * CPT + j] - m",
     "shifted = buf[r * CPT + j]", OVERFLOW),
    ("warp", "padding with 0 instead of -inf", "buf[r * CPT + p * pack + i] = NEG_INF",
     "buf[r * CPT + p * pack + i] = float32(0.0)",
     ("wrong result", "proportional to the right answer")),
    pytest.param("warp", "loop condition differs between the groups of a warp",
                 "while tile < rows:", "while tile + first < rows:",
                 ("warp", "exited without reaching"), marks=SIM_ONLY),
    pytest.param("block_smem", "block reduction called by some threads only",
                 "            m = block_all_reduce_max(m)\n",
                 "            if tid < num_packs:\n                m = block_all_reduce_max(m)\n",
                 ("barrier", "divergent cuda.syncthreads()"), marks=SIM_ONLY),
    pytest.param("block_smem", "missing barrier: last pass reads other threads' elements",
                 LAST_PASS, LINEAR_LAST_PASS, ("race", "data race on shared memory cache["),
                 marks=SIM_ONLY),
    # each thread now reads packs other threads wrote, with no barrier in between
    ("block_smem", "packs written row-major, read column-major",
     "cache[i * num_packs + p] = values[i]", "cache[p * pack + i] = values[i]",
     {"sim": ("race", "data race on shared memory cache["), "gpu": WRONG}),
    ("block_smem", "no max subtraction", "shifted = cache[c] - m", "shifted = cache[c]",
     OVERFLOW),
    ("block_uncached", "running sum not rescaled when the max grows",
     "                        s *= math.exp(m - pack_max)\n", "", WRONG),
    ("block_uncached", "packs of -inf not skipped", "if pack_max > NEG_INF:", "if True:",
     ("wrong result", "-inf")),
    ("block_uncached", "thread sums not rescaled to the block max",
     "            s *= math.exp(m - row_max)\n", "",
     ("wrong result", "proportional to the right answer")),
    ("dispatch", "block size: smallest instead of largest", "for threads in (1024, 512, 256):",
     "for threads in (256, 512, 1024):", ("wrong result", "choose_block_size")),
    ("dispatch", "warp kernel for every row length", "if cols <= WARP_MAX_COLS:", "if True:",
     ("wrong result", "chose 'warp'")),
    ("dispatch", "long float16 rows cached in shared memory",
     "if x.dtype == np.float16:", "if False:", ("wrong result", "chose 'block_smem'")),
    ("log", "log of the softmax",
     "y = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))",
     "y = np.log(np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True))",
     ("wrong result", "wrong elements in rows")),
]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in softmax.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"softmax.{exercise}")
    result = check_exercise(get_exercise(f"softmax.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,expect", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, expect):
    ns = namespace_with(LESSON, f"softmax.{exercise}", old, new)
    result = check_exercise(get_exercise(f"softmax.{exercise}"), ns, workbook.MODE)
    assert_rejected(result, bug, expect, workbook.MODE)


@pytest.mark.parametrize("exercise", sorted(softmax.SLOW_VARIANTS))
def test_slow_variants_are_correct(exercise):
    """The metric rules' slow variants must be graded correct on their output."""
    ns = namespace_with_variant(LESSON, exercise, softmax.SLOW_VARIANTS[exercise])
    result = check_exercise(get_exercise(exercise), ns, workbook.MODE)
    assert result.passed, result.summary()


def _inputs(x, log=False):
    return {"x": x, "log": log}


def test_reference_gives_nan_for_rows_of_minus_infinity():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    expected = softmax.reference(_inputs(x))
    assert np.isnan(expected[0]).all() and expected[1].tolist() == [1.0, 0.0]
    log = softmax.reference(_inputs(x, log=True))
    assert np.isnan(log[0]).all() and log[1].tolist() == [0.0, -np.inf]


def test_float32_result_passes_and_unwritten_elements_are_named():
    x = np.random.default_rng(0).standard_normal((4, 50)).astype(np.float32)
    inputs = _inputs(x)
    expected = softmax.reference(inputs)
    softmax.expect_softmax(expected.astype(np.float32), expected, inputs)
    got = expected.astype(np.float32)
    got[2, 40:] = softmax.SENTINEL
    with pytest.raises(Mismatch, match="never written.*rows 2"):
        softmax.expect_softmax(got, expected, inputs)


def test_overflow_is_diagnosed():
    x = np.array([[1000.0, 999.0, 0.0]], np.float32)
    inputs = _inputs(x)
    got = np.full(x.shape, np.nan, np.float32)
    with pytest.raises(Mismatch, match="subtract the row max"):
        softmax.expect_softmax(got, softmax.reference(inputs), inputs)


def test_a_wrong_sum_is_diagnosed_as_proportional_rows():
    x = np.random.default_rng(1).standard_normal((3, 20)).astype(np.float32)
    inputs = _inputs(x)
    expected = softmax.reference(inputs)
    got = (expected * 0.5).astype(np.float32)
    with pytest.raises(Mismatch, match="proportional"):
        softmax.expect_softmax(got, expected, inputs)


def test_float16_tolerance_allows_its_rounding_only():
    x = np.random.default_rng(2).standard_normal((2, 300)).astype(np.float16)
    inputs = _inputs(x)
    expected = softmax.reference(inputs)
    softmax.expect_softmax(expected.astype(np.float16), expected, inputs)
    with pytest.raises(Mismatch):
        softmax.expect_softmax((expected * 1.01).astype(np.float16), expected, inputs)


def test_dispatch_expectations_follow_the_lesson():
    assert softmax.expected_variant(2048, "float32") == ("warp",)
    assert softmax.expected_variant(2048, "float16") == ("warp",)
    assert softmax.expected_variant(2049, "float32") == ("block_smem",)
    assert softmax.expected_variant(2049, "float16") == ("block_uncached",)
    assert softmax.expected_variant(60000, "float32") == ("block_uncached",)
    assert softmax.warp_config(32, 4) == (4, 8, 2)
    assert softmax.warp_config(33, 1) == (2, 32, 1)
    assert softmax.warp_config(1024, 8) == (32, 32, 1)
