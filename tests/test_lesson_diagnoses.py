"""Lessons 03 and 04: each likely mistake that gives a result of its own is named.

Every variant below plants one mistake in the solution and asserts that the check names
it (grader.exercises.softmax._known_mistake and _diagnose; grader.exercises.layernorm's
_variance_hint, _match_rstd and _y_hint). A mistake is named only where its result
differs from the right one: for each, the check computes what the mistake gives and
compares.
"""

import warnings

import pytest
from solution_cells import assert_rejected, bug_id, namespace_with

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise

LESSONS = {"softmax": "03_softmax", "layernorm": "04_layernorm"}

TWO_PASS = "return (deviation * deviation).sum(axis=1, dtype=np.float32) / n"
NAIVE = "return (x * x).sum(axis=1, dtype=np.float32) / n - mean * mean"
WELFORD_COUNT = ("    count = count + np.float32(1)\n    delta = value - mean\n"
                 "    mean = mean + delta / count\n")
RSTD = "inv_std = float32(1.0) / math.sqrt(m2 / n + eps)"
NORMALISE = "value = (buf[r, i] - m) * inv_std"

# (exercise, bug, text in the solution, replacement, words the message must hold)
BUGGY = [
    # lesson 03
    ("softmax.cpu", "computes in float16", "x32 = x.astype(np.float32)", "x32 = x",
     "computed in float16 arithmetic"),
    ("softmax.naive", "max starts at 0", "        m = NEG_INF\n", "        m = float32(0.0)\n",
     "starts at 0 instead of -inf"),
    ("softmax.naive", "no max subtraction in the sum",
     "s += math.exp(float32(x[r, c]) - row_max[r])", "s += math.exp(float32(x[r, c]))",
     "its softmax times exp(-max)"),
    ("softmax.warp", "sum over 32 lanes instead of the group", "s = warp_all_reduce_sum(s, W)",
     "s = warp_all_reduce_sum(s, 32)", "reduced over the warp's 32 lanes instead of the row's"),
    ("softmax.warp", "padding with 0 instead of -inf", "buf[r * CPT + p * pack + i] = NEG_INF",
     "buf[r * CPT + p * pack + i] = float32(0.0)", "zero(s) appended"),
    ("softmax.log", "log of the softmax",
     "y = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))",
     "y = np.log(np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True))",
     "That is log(softmax(x))"),
    # lesson 04
    ("layernorm.variance", "two-pass divides by n - 1", TWO_PASS,
     TWO_PASS.replace("/ n", "/ (n - np.float32(1))"), "sample variance (divided by n - 1)"),
    ("layernorm.variance", "two-pass without the mean subtracted", "deviation = x - mean[:, None]",
     "deviation = x", "That is the mean of x^2: subtract the mean"),
    ("layernorm.variance", "two-pass returns the standard deviation", TWO_PASS,
     TWO_PASS.replace("return (", "return np.sqrt((").replace("/ n", "/ n)"),
     "That is the standard deviation"),
    ("layernorm.variance", "naive without mean * mean", NAIVE, NAIVE.replace(" - mean * mean", ""),
     "That is the mean of x^2: subtract mean * mean"),
    ("layernorm.variance", "Welford m2 from the old mean only", "m2 = m2 + delta * (value - mean)",
     "m2 = m2 + delta * delta", "m2 += delta * delta (the old mean twice)"),
    ("layernorm.variance", "Welford divides before counting", WELFORD_COUNT,
     "    delta = value - mean\n    mean = mean + delta / count\n"
     "    count = count + np.float32(1)\n", "division by a count of 0"),
    ("layernorm.warp", "rstd from the sample variance", RSTD,
     "inv_std = float32(1.0) / math.sqrt(m2 / (n - float32(1.0)) + eps)", "sample variance"),
    ("layernorm.warp", "mean not subtracted", NORMALISE,
     "value = buf[r, i] * inv_std", "the mean was not subtracted"),
    ("layernorm.warp", "divided by rstd", NORMALISE, "value = (buf[r, i] - m) / inv_std",
     "rstd is 1 / std already"),
]


@pytest.mark.parametrize("exercise,bug,old,new,words", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_the_mistake_is_named(exercise, bug, old, new, words):
    namespace = namespace_with(LESSONS[exercise.split(".")[0]], exercise, old, new)
    with warnings.catch_warnings():  # a GPU divides by zero silently; so does the grader
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_exercise(get_exercise(exercise), namespace, workbook.MODE)
    assert_rejected(result, bug, ("wrong result", words), workbook.MODE)
