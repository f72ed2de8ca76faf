"""Lesson 02's harness: the inputs of a case, how the student's kernel is launched on them,
the expected result, and the check of what came back."""

from __future__ import annotations

from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import Case
from grader.exercises.reduction.cases import GRIDS, THREADS
from grader.verify import expect_exact, expect_sum, expect_unchanged


def make_values(rng: np.random.Generator, case: Case) -> dict:
    """float32 inputs: integer-valued (sums exact), all negative/positive integers,
    uniform (0, 1), or normal; with the case's launch parameters where it has them."""
    n = case.size
    small = np.int8  # drawn as int8: a tenth of the time of int64 at n = 12 million
    if case.kind == "integers":
        x = rng.integers(-8, 9, size=n, dtype=small).astype(np.float32)
    elif case.kind == "negative":
        x = rng.integers(-9, 0, size=n, dtype=small).astype(np.float32)
    elif case.kind == "positive":
        x = rng.integers(1, 10, size=n, dtype=small).astype(np.float32)
    elif case.kind == "uniform":
        x = rng.random(n, dtype=np.float32)
    else:
        x = rng.standard_normal(n, dtype=np.float32)
    launch = {key: getattr(case, key) for key in ("grid", "block", "op") if hasattr(case, key)}
    return {"x": x, **launch}


def sum_reference(inputs: dict) -> float:
    return float(np.sum(inputs["x"], dtype=np.float64))


# --- exercises 1-3: one block, n = 2 * blockDim (a power of two) ------------------------------

def run_single_block(entry: str, read_only: bool):
    def run(ns, inputs, mode):
        x = inputs["x"]
        d_x = L.cuda().to_device(x)
        out = L.output(1, np.nan, np.float32)
        L.launch(ns[entry], 1, x.size // 2, d_x, out)
        if read_only:
            expect_unchanged(x, d_x.copy_to_host(), "input")
        return out.copy_to_host()[0]

    return run


def verify_sum(got, expected, inputs, mode):
    expect_sum(got, inputs["x"])


# --- exercises 4-5: many blocks, arbitrary n, atomics -----------------------------------------

def run_segmented(ns, inputs, mode):
    x = inputs["x"]
    tpb = THREADS[mode]
    out = L.output(1, 0, np.float32)
    grid = L.blocks_for(x.size, 2 * tpb)
    L.launch(ns["segmented_sum_kernel"], grid, tpb, L.guarded_input(x), out, x.size)
    inputs["segment"] = 2 * tpb
    return out.copy_to_host()[0]


def run_coarsened(ns, inputs, mode):
    x = inputs["x"]
    tpb = THREADS[mode]
    coarse = int(ns["COARSE_FACTOR"])
    out = L.output(1, 0, np.float32)
    grid = L.blocks_for(x.size, 2 * coarse * tpb)
    L.launch(ns["coarsened_sum_kernel"], grid, tpb, L.guarded_input(x), out, x.size)
    inputs["segment"] = 2 * coarse * tpb
    return out.copy_to_host()[0]


def verify_segments(got, expected, inputs, mode):
    """Each block sums its segment as a tree, then the blocks' totals add up in sequence."""
    segment = inputs["segment"]
    blocks = L.blocks_for(inputs["x"].size, segment)
    expect_sum(got, inputs["x"], segment=segment, sequential_terms=blocks)


# --- exercise 6: warp shuffles + grid-stride loop ---------------------------------------------

def threads(inputs, mode) -> int:
    return inputs.get("block") or THREADS[mode]


def run_warp_shuffle(ns, inputs, mode):
    x = inputs["x"]
    out = L.output(1, 0, np.float32)
    L.launch(ns["shuffle_sum_kernel"], inputs["grid"], threads(inputs, mode),
             L.guarded_input(x), out, x.size)
    return out.copy_to_host()[0]


def verify_grid_stride(got, expected, inputs, mode):
    # Each thread accumulates n / (grid * block) elements in sequence before the tree.
    per_thread = L.blocks_for(inputs["x"].size, inputs["grid"] * threads(inputs, mode))
    expect_sum(got, inputs["x"], sequential_terms=per_thread + inputs["grid"])


# --- exercise 7: a generic (op, identity) reduction, two passes -------------------------------

@cache
def combine_functions() -> dict:
    """Device functions combining two (value, index) states, one per reduction op."""
    cuda = L.cuda()

    def add(av, ai, bv, bi):
        return av + bv, ai

    def maximum(av, ai, bv, bi):
        if bv > av:
            return bv, bi
        return av, ai

    def minimum(av, ai, bv, bi):
        if bv < av:
            return bv, bi
        return av, ai

    def argmax(av, ai, bv, bi):
        if bv > av or (bv == av and bi < ai):
            return bv, bi
        return av, ai

    fns = {"sum": add, "max": maximum, "min": minimum, "argmax": argmax}
    return {name: cuda.jit(device=True)(fn) for name, fn in fns.items()}


IDENTITY = {"sum": 0.0, "max": -np.inf, "min": np.inf, "argmax": -np.inf}
NO_INDEX = np.iinfo(np.int64).max


@cache
def kernel_for(factory, op):
    return factory(combine_functions()[op])


def run_generic(ns, inputs, mode):
    x, op = inputs["x"], inputs["op"]
    kernel = kernel_for(ns["make_reduce_kernel"], op)
    tpb = threads(inputs, mode)
    grid = GRIDS[mode][-1]
    identity = np.float32(IDENTITY[op])
    part_v = L.output(grid, np.nan, np.float32, "out_values")
    part_i = L.output(grid, -1, np.int64, "out_indices")
    dummy_idx = L.output(1, 0, np.int64, "indices")
    L.launch(kernel, grid, tpb, L.guarded_input(x), dummy_idx, x.size, False, identity,
             NO_INDEX, part_v, part_i)
    out_v = L.output(1, np.nan, np.float32, "out_values")
    out_i = L.output(1, -1, np.int64, "out_indices")
    L.launch(kernel, 1, tpb, part_v, part_i, grid, True, identity, NO_INDEX, out_v, out_i)
    return out_v.copy_to_host()[0], out_i.copy_to_host()[0]


def reference_generic(inputs):
    x, op = inputs["x"], inputs["op"]
    if op == "sum":
        return float(np.sum(x, dtype=np.float64)), None
    if op == "max":
        return x.max(), None
    if op == "min":
        return x.min(), None
    return x.max(), int(np.argmax(x))


def verify_generic(got, expected, inputs, mode):
    (value, index), (want_value, want_index) = got, expected
    op = inputs["op"]
    if op == "sum":
        grid = GRIDS[mode][-1]
        per_thread = L.blocks_for(inputs["x"].size, grid * threads(inputs, mode))
        expect_sum(value, inputs["x"], sequential_terms=per_thread + grid)
        return
    expect_exact(np.float32(value), np.float32(want_value), f"{op} value")
    if want_index is not None:
        expect_exact(int(index), want_index, "argmax index (ties go to the smallest index)")
