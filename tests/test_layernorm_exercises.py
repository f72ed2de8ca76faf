"""Lesson 04: the solutions pass, and known-buggy variants are rejected with a diagnosis.

The buggy, slow and correct variants live in grader/exercises/layernorm/variants/*.toml."""

import warnings

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
from grader.exercises import get as get_exercise
from grader.exercises import layernorm, slow_variant

LESSON = layernorm.LESSON
SLOW = [v for e in layernorm.EXERCISES if (v := slow_variant(e.id))]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in layernorm.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"layernorm.{exercise}")
    result = check_exercise(get_exercise(f"layernorm.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("variant", buggy_params(layernorm.EXERCISES))
def test_buggy_variant_rejected(variant):
    ns = namespace_with_variant(LESSON, variant)
    with warnings.catch_warnings():  # a GPU divides by zero silently; so does the grader
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert_variant_rejected(result, variant, workbook.MODE)


@pytest.mark.parametrize("variant", SLOW, ids=lambda v: v.exercise_id)
def test_slow_variants_are_correct(variant):
    """The metric rules' slow variants must be graded correct on their output."""
    ns = namespace_with_variant(LESSON, variant)
    result = check_exercise(get_exercise(variant.exercise_id), ns, workbook.MODE)
    assert result.passed, result.summary()


# --- the comparison itself, on hand-made outputs -----------------------------------------------

def _inputs(x, affine=True, eps=1e-5, seed=0):
    rng = np.random.default_rng(seed)
    cols = x.shape[1]
    gamma = (1 + 0.5 * rng.standard_normal(cols)).astype(x.dtype)
    beta = rng.standard_normal(cols).astype(x.dtype)
    return {"x": x, "gamma": gamma, "beta": beta, "affine": affine, "eps": np.float32(eps)}


def _rounded(expected, dtype):
    y, mean, rstd = expected
    return y.astype(dtype), mean.astype(np.float32), rstd.astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reference_rounded_to_the_output_types_passes(dtype):
    x = layernorm.make_rows(np.random.default_rng(1), 6, 300, "large-mean", np.dtype(dtype).name)
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    layernorm.expect_layer_norm(_rounded(expected, dtype), inputs, expected, seq=10)


def test_naive_variance_is_rejected_on_large_mean_rows():
    x = layernorm.make_rows(np.random.default_rng(2), 8, 512, "large-mean", "float32")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    n = np.float32(x.shape[1])
    mean = x.sum(axis=1, dtype=np.float32) / n
    var = (x * x).sum(axis=1, dtype=np.float32) / n - mean * mean
    rstd = (1 / np.sqrt(np.maximum(var, 0) + np.float32(1e-5))).astype(np.float32)
    got = (expected[0].astype(np.float32), mean, rstd)
    with pytest.raises(Mismatch, match="cancels catastrophically"):
        layernorm.expect_layer_norm(got, inputs, expected, seq=16)


def test_float32_welford_on_the_cpu_is_within_tolerance():
    from workbook.welford import parallel_welford

    x = layernorm.make_rows(np.random.default_rng(3), 16, 4096, "large-mean", "float32")
    inputs = _inputs(x, affine=False)
    expected = layernorm.reference_layer_norm(inputs)
    mean, m2, count = parallel_welford(x, threads=32)
    rstd = (np.float32(1) / np.sqrt(m2 / count + np.float32(1e-5))).astype(np.float32)
    y = ((x - mean[:, None]) * rstd[:, None]).astype(np.float32)
    layernorm.expect_layer_norm((y, mean, rstd), inputs, expected, seq=128)


def test_unwritten_rows_and_columns_are_named():
    x = layernorm.make_rows(np.random.default_rng(4), 10, 40, "normal", "float32")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float32)
    late_mean, late_rstd = mean.copy(), rstd.copy()
    late_mean[6:] = late_rstd[6:] = layernorm.unwritten(4)  # what the launches start with
    with pytest.raises(Mismatch, match="from 6 on.*grid-stride"):
        layernorm.expect_layer_norm((y, late_mean, late_rstd), inputs, expected, seq=2)
    with pytest.raises(Mismatch, match="negative variance"):
        layernorm.expect_layer_norm((y, mean, late_rstd), inputs, expected, seq=2)
    # a NaN the kernel computed and stored is no unwritten element: NaN got into the sums
    computed_mean, computed_rstd = mean.copy(), rstd.copy()
    computed_mean[6:] = computed_rstd[6:] = np.nan
    with pytest.raises(Mismatch, match=r"kernel wrote them: a NaN entered.*past the end of"):
        layernorm.expect_layer_norm((y, computed_mean, computed_rstd), inputs, expected, seq=2)
    holes = y.copy()
    holes[:, 32:] = np.nan
    with pytest.raises(Mismatch, match="never written"):
        layernorm.expect_layer_norm((holes, mean, rstd), inputs, expected, seq=2)


def test_missing_eps_and_gamma_are_diagnosed():
    x = layernorm.make_rows(np.random.default_rng(5), 9, 64, "eps", "float32")
    inputs = _inputs(x, eps=1e-3)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float32)
    var = x.astype(np.float64).var(axis=1)
    with np.errstate(divide="ignore"):
        no_eps = (1 / np.sqrt(var)).astype(np.float32)
    with pytest.raises(Mismatch, match="eps is missing"):
        layernorm.expect_layer_norm((y, mean, no_eps), inputs, expected, seq=2)
    xhat = (x - expected[1][:, None]) * expected[2][:, None]
    with pytest.raises(Mismatch, match="gamma and beta were not applied"):
        layernorm.expect_layer_norm((xhat.astype(np.float32), mean, rstd), inputs, expected,
                                    seq=2)


def test_statistics_must_be_float32():
    x = layernorm.make_rows(np.random.default_rng(6), 3, 20, "normal", "float16")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float16)
    with pytest.raises(Mismatch, match="must be float32"):
        layernorm.expect_layer_norm((y, mean.astype(np.float16), rstd), inputs, expected, seq=1)
