"""Lesson 03: the solutions pass, and the buggy variants of its corpus
(grader/exercises/softmax/variants/) are rejected with a diagnosis."""

import numpy as np
import pytest
from solution_cells import (
    assert_variant_rejected,
    buggy_params,
    namespace_with,
    namespace_with_variant,
)

import workbook
from grader.exercise import Mismatch, check_exercise
from grader.exercises import buggy_variants, slow_variant, softmax
from grader.exercises import get as get_exercise

LESSON = softmax.LESSON

# The shared-memory kernel's last pass rewritten without the barrier it needs, a buggy variant
# of softmax.block_smem: tests/test_sim_diagnoses.py plants it too.
(_MISSING_BARRIER,) = [v for v in buggy_variants("softmax.block_smem")
                       if v.description.startswith("missing barrier")]
LAST_PASS, LINEAR_LAST_PASS = _MISSING_BARRIER.old, _MISSING_BARRIER.new


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in softmax.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"softmax.{exercise}")
    result = check_exercise(get_exercise(f"softmax.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("variant", buggy_params(softmax.EXERCISES))
def test_buggy_variant_rejected(variant):
    ns = namespace_with_variant(LESSON, variant)
    result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert_variant_rejected(result, variant, workbook.MODE)


@pytest.mark.parametrize("exercise", sorted(e.id for e in softmax.EXERCISES
                                            if slow_variant(e.id)))
def test_slow_variants_are_correct(exercise):
    """The metric rules' slow variants must be graded correct on their output."""
    ns = namespace_with_variant(LESSON, slow_variant(exercise))
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
