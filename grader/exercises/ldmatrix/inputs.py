"""Inputs of lesson 01's tests, and the numpy references they are compared with.

Input matrices hold distinct values, so that a wrong fragment can be traced to the element
it came from.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from workbook import fragments as F

# The halves of the simulator sanitizer's poison word 0x7FADBEEF: it takes shared memory
# still holding them for never written, and the emulated stmatrix writes it does not see.
POISON_HALVES = (0xBEEF, 0x7FAD)
_VALUES = np.setdiff1d(np.arange(1 << 16), POISON_HALVES)


def distinct_matrix(rng, shape) -> np.ndarray:
    """uint16 matrix of distinct values: 0 .. size-1 in order (rng None), or random ones."""
    size = int(np.prod(shape))
    if rng is None:
        return np.arange(size, dtype=np.uint16).reshape(shape)
    values = rng.choice(_VALUES, size=size, replace=False)
    return values.astype(np.uint16).reshape(shape)


def address_inputs(rng, case):
    return {"threads": case.size}


def no_inputs(rng, case):
    return {}


def matrix_inputs(shape):
    """``make_inputs`` of a ``shape`` matrix of distinct values, in order for an iota case."""
    def make(rng, case):
        return {"m": distinct_matrix(None if case.kind == "iota" else rng, shape)}

    return make


def stmatrix_inputs(rng, case):
    a = distinct_matrix(None if case.kind == "iota" else rng, (16, 16))
    return {"m": a, "frags": F.a_fragments(a)}


def _fp16_matrix(rng, shape, kind):
    if kind == "integers":
        return rng.integers(-4, 5, size=shape).astype(np.float16)
    if kind == "identity":
        return np.eye(*shape, dtype=np.float16)
    return rng.standard_normal(shape).astype(np.float16)


def gemm_inputs(rng, case):
    """A and B of a :class:`cases.GemmCase`; an identity case multiplies B by I."""
    kind_a = "identity" if case.kind == "identity" else case.kind
    a = _fp16_matrix(rng, (case.m, case.k), kind_a)
    b = _fp16_matrix(rng, (case.k, case.n), "normal" if case.kind == "identity" else case.kind)
    return {"a": a, "b": b}


# --- references -------------------------------------------------------------------------------

def no_reference(inputs):
    return None


@cache
def _predict_reference():
    return F.x1_coords(trans=False)


def predict_reference(inputs):
    return _predict_reference()


def x1_reference(inputs):
    return F.ldmatrix([inputs["m"]])


def x4_reference(inputs):
    return F.a_fragments(inputs["m"])


def trans_reference(inputs):
    return F.b_fragments(inputs["m"])


def gemm_reference(inputs):
    return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)


def slices_reference(inputs):
    m = inputs["m"]
    return np.stack([F.a_fragments(m[:, 16 * s:16 * s + 16]) for s in range(4)])
