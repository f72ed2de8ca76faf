"""Lesson 04's inputs and their float64 references.

Inputs are rows of several kinds: ``normal`` (modest mean and spread), ``large-mean``
(|mean| / std up to 10^4 in float32, 10^3 in float16: the rows where E[x^2] - E[x]^2
cancels catastrophically) and ``eps`` (constant rows, where only eps keeps rstd
finite, rows whose variance is comparable to eps, and ordinary rows). Every case
draws fresh random data.
"""

from __future__ import annotations

import numpy as np

from grader.exercises.layernorm.cases import NormCase, VarianceCase
from workbook.welford import layer_norm_reference


def make_rows(rng: np.random.Generator, rows: int, cols: int, kind: str, dtype: str):
    """``(rows, cols)`` data of ``kind`` in ``dtype`` (see the module docstring)."""
    half = dtype == "float16"
    if kind == "large-mean":
        sign = rng.choice([-1.0, 1.0], size=(rows, 1))
        mean = sign * rng.uniform(300, 1000, (rows, 1)) if half else \
            sign * rng.uniform(3e3, 1e4, (rows, 1))
        x = mean + rng.standard_normal((rows, cols))
    elif kind == "eps":
        x = rng.uniform(-2, 2, (rows, 1)) + rng.uniform(0.5, 2, (rows, 1)) * \
            rng.standard_normal((rows, cols))
        which = np.arange(rows) % 3
        constant = rng.integers(-8, 9, size=(rows, 1)) * 0.5  # exact: sums stay exact
        x = np.where(which[:, None] == 0, constant, x)
        tiny = rng.uniform(0.2, 1.0, (rows, 1)) + 1e-3 * rng.standard_normal((rows, cols))
        x = np.where(which[:, None] == 1, tiny, x)
    else:
        x = rng.uniform(-2, 2, (rows, 1)) + rng.uniform(0.5, 2, (rows, 1)) * \
            rng.standard_normal((rows, cols))
    return x.astype(dtype)


def make_layer_norm(rng: np.random.Generator, case: NormCase) -> dict:
    x = make_rows(rng, case.rows, case.size, case.kind, case.dtype)
    if case.affine:
        gamma = (1 + 0.5 * rng.standard_normal(case.size)).astype(case.dtype)
        beta = rng.standard_normal(case.size).astype(case.dtype)
    else:  # NaN: a kernel that reads them without affine produces NaN
        gamma = np.full(case.size, np.nan, case.dtype)
        beta = np.full(case.size, np.nan, case.dtype)
    return {"x": x, "gamma": gamma, "beta": beta, "affine": case.affine,
            "eps": np.float32(case.eps), "case": case}


def reference_layer_norm(inputs: dict):
    gamma = inputs["gamma"] if inputs["affine"] else None
    beta = inputs["beta"] if inputs["affine"] else None
    return layer_norm_reference(inputs["x"], gamma, beta, float(inputs["eps"]))


def reference_dispatch(inputs: dict):
    """The dispatcher's reference: none for a plan (nothing is launched)."""
    if inputs["case"].plan:
        return None
    return reference_layer_norm(inputs)


def make_variance(rng: np.random.Generator, case: VarianceCase) -> dict:
    rows, cols = case.rows, case.size
    if case.data == "large-mean":
        x = make_rows(rng, rows, cols, "large-mean", "float32")
    elif case.data == "zero-mean":
        x = rng.standard_normal((rows, cols)).astype(np.float32)
    else:
        x = make_rows(rng, rows, cols, "normal", "float32")
    inputs = {"x": x, "kind": case.kind}
    if case.kind == "combine":
        # split each row in two at a random point; force empty sides and both empty
        split = rng.integers(0, cols + 1, size=rows)
        split[:3] = (0, cols, 0)
        inputs["split"] = split
        inputs["both_empty"] = np.arange(rows) == 2
    return inputs


def reference_variance(inputs: dict):
    return inputs["x"].astype(np.float64).var(axis=1)
