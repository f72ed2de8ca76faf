"""Lesson 03's inputs and the float64 reference.

Every test is a ``(rows, cols)`` matrix of float32 or float16 whose rows are
softmaxed (or log-softmaxed). Inputs come in kinds that catch the common bugs:

* ``normal`` -- standard normal values times 3;
* ``large`` -- rows shifted by +-100 to 1000: exp overflows (or every term underflows
  to 0) unless the row max is subtracted first;
* ``masked`` -- about a third of the entries are ``-inf`` (attention masks): they
  must give exactly 0 (``-inf`` for log-softmax) without disturbing the rest;
* ``-inf rows`` -- ``masked``, and some rows entirely ``-inf``: their result is NaN
  (as ``torch.softmax`` gives; ``-inf - (-inf)`` is NaN, no special case needed);
* ``wide`` -- values spread over ``[-200, 0]``: probabilities below float32's range,
  whose log must still be finite.

The dispatcher's cases of kind ``block size`` and ``plan`` carry no matrix to softmax
(see :class:`grader.exercises.softmax.cases.Shape`).
"""

from __future__ import annotations

import numpy as np

from grader.exercises.softmax.cases import Shape
from grader.exercises.softmax.plans import BLOCK_TABLES, expected_variant


def make_matrix(rng: np.random.Generator, case: Shape) -> dict:
    rows, cols = case.rows, case.cols
    x = 3.0 * rng.standard_normal((rows, cols))
    if case.kind == "large":
        # even rows far above 0 (exp overflows), odd rows far below (exp underflows to 0)
        sign = np.where(np.arange(rows) % 2 == 0, 1.0, -1.0)[:, None]
        x += sign * rng.uniform(100.0, 1000.0, size=(rows, 1))
    elif case.kind == "wide":
        x = rng.uniform(-200.0, 0.0, size=(rows, cols))
    elif case.kind in ("masked", "-inf rows"):
        mask = rng.random((rows, cols)) < 0.35
        mask[np.arange(rows), rng.integers(0, cols, size=rows)] = False  # one finite per row
        x[mask] = -np.inf
        if case.kind == "-inf rows":
            x[rng.random(rows) < 0.3] = -np.inf
            x[rows // 2] = -np.inf  # at least one
    return {"x": x.astype(case.dtype), "log": case.log, "case": case}


def reference(inputs: dict) -> np.ndarray:
    """Softmax (or log-softmax) of each row in float64; NaN for rows of -inf."""
    x = inputs["x"].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = x - x.max(axis=1, keepdims=True)
        total = np.exp(shifted).sum(axis=1, keepdims=True)
        if inputs["log"]:
            return shifted - np.log(total)
        return np.exp(shifted) / total


def make_dispatch(rng, case: Shape) -> dict:
    if case.kind == "block size":
        return {"table": case.resident, "case": case, "log": False, "x": np.zeros((1, 1))}
    if case.kind == "plan":
        return {"case": case, "log": False, "x": np.zeros((case.rows, case.cols), case.dtype)}
    return make_matrix(rng, case)


def reference_dispatch(inputs):
    if "table" in inputs:
        return dict(BLOCK_TABLES)[inputs["table"]]
    if inputs["case"].kind == "plan":
        return expected_variant(inputs["case"].cols, inputs["case"].dtype)
    return reference(inputs)
