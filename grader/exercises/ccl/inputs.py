"""Each exercise's inputs for one case, made from the case's seed."""

from __future__ import annotations

import numpy as np

from grader.exercise import Case
from grader.exercises.ccl.cases import ImageCase
from grader.exercises.ccl.images import make_image
from grader.exercises.ccl.references import first_pixel_labels, scipy_labels


def make_image_inputs(rng: np.random.Generator, case: ImageCase) -> dict:
    return {"image": make_image(rng, case.kind, case.shape), "connectivity": case.connectivity}


def make_scan(rng: np.random.Generator, case: Case) -> dict:
    if case.kind == "flags":
        x = (rng.random(case.size) < 0.3).astype(np.int32)
    else:
        x = rng.integers(0, 10, size=case.size).astype(np.int32)
    return {"x": x}


def make_compaction(rng: np.random.Generator, case: ImageCase) -> dict:
    inputs = make_image_inputs(rng, case)
    inputs["roots"] = first_pixel_labels(inputs["image"], inputs["connectivity"])
    return inputs


def make_stats(rng: np.random.Generator, case: ImageCase) -> dict:
    inputs = make_image_inputs(rng, case)
    labels, count = scipy_labels(inputs["image"], inputs["connectivity"])
    inputs.update(labels=labels, count=count)
    return inputs
