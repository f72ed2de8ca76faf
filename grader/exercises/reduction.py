"""Lesson 02 (reduction): how each exercise is launched, what it must compute, and its tests.

Sizes are small in simulator mode (every CUDA thread is a Python thread there)
and include the edge cases that catch most bugs: n = 1, n smaller than one
block, n not a multiple of the block, several blocks.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import Case, Exercise
from grader.verify import expect_exact, expect_sum, expect_unchanged

LESSON = "02_reduction"
THREADS = {"sim": 32, "gpu": 256}  # threads per block for the multi-block exercises
GRIDS = {"sim": (1, 3), "gpu": (1, 7, 264)}  # grids the grid-stride exercises must handle


def make_values(rng: np.random.Generator, case: Case) -> dict:
    """float32 inputs: integer-valued (sums exact), all negative/positive integers,
    uniform (0, 1), or normal."""
    n = case.size
    if case.kind == "integers":
        x = rng.integers(-8, 9, size=n).astype(np.float32)
    elif case.kind == "negative":
        x = rng.integers(-9, 0, size=n).astype(np.float32)
    elif case.kind == "positive":
        x = rng.integers(1, 10, size=n).astype(np.float32)
    elif case.kind == "uniform":
        x = rng.random(n, dtype=np.float32)
    else:
        x = rng.standard_normal(n, dtype=np.float32)
    return {"x": x}


def _sum_reference(inputs: dict) -> float:
    return float(np.sum(inputs["x"], dtype=np.float64))


# --- exercises 1-3: one block, n = 2 * blockDim (a power of two) ------------------------------

def _single_block_cases(sim_sizes, gpu_sizes):
    kinds = ("integers", "normal")
    return {
        "sim": tuple(Case(n, kind) for n in sim_sizes for kind in kinds),
        "gpu": tuple(Case(n, kind) for n in gpu_sizes for kind in kinds),
    }


SINGLE_BLOCK_CASES = _single_block_cases((2, 8, 64), (2, 64, 512, 2048))


def _run_single_block(entry: str, read_only: bool):
    def run(ns, inputs, mode):
        x = inputs["x"]
        d_x = L.cuda().to_device(x)
        out = L.output(1, np.nan, np.float32)
        L.launch(ns[entry], 1, x.size // 2, d_x, out)
        if read_only:
            expect_unchanged(x, d_x.copy_to_host(), "input")
        return out.copy_to_host()[0]

    return run


def _verify_single_block(got, expected, inputs, mode):
    expect_sum(got, inputs["x"])


# --- exercises 4-5: many blocks, arbitrary n, atomics -----------------------------------------

def _multi_block_cases(per_block_sim: int, per_block_gpu: int):
    def sizes(per_block):
        return (1, 5, per_block // 2, per_block, per_block + 1, 3 * per_block + 7)

    return {
        "sim": tuple(Case(n, k) for n in sizes(per_block_sim) for k in ("integers", "uniform")),
        "gpu": tuple(Case(n, k) for n in (*sizes(per_block_gpu), 1 << 20, 12_345_679)
                     for k in ("integers", "uniform")),
    }


def _run_segmented(ns, inputs, mode):
    x = inputs["x"]
    tpb = THREADS[mode]
    out = L.output(1, 0, np.float32)
    grid = L.blocks_for(x.size, 2 * tpb)
    L.launch(ns["segmented_sum_kernel"], grid, tpb, L.guarded_input(x), out, x.size)
    return out.copy_to_host()[0]


def _verify_segmented(got, expected, inputs, mode):
    per_block = 2 * THREADS[mode]
    blocks = L.blocks_for(inputs["x"].size, per_block)
    expect_sum(got, inputs["x"], segment=per_block, sequential_terms=blocks)


def _run_coarsened(ns, inputs, mode):
    x = inputs["x"]
    tpb = THREADS[mode]
    coarse = int(ns["COARSE_FACTOR"])
    out = L.output(1, 0, np.float32)
    grid = L.blocks_for(x.size, 2 * coarse * tpb)
    L.launch(ns["coarsened_sum_kernel"], grid, tpb, L.guarded_input(x), out, x.size)
    inputs["segment"] = 2 * coarse * tpb
    return out.copy_to_host()[0]


def _verify_coarsened(got, expected, inputs, mode):
    segment = inputs["segment"]
    blocks = L.blocks_for(inputs["x"].size, segment)
    expect_sum(got, inputs["x"], segment=segment, sequential_terms=blocks)


# --- exercise 6: warp shuffles + grid-stride loop ---------------------------------------------

def _grid_stride_cases():
    sim = tuple(Case(n, k, note=f"grid {g}") for n in (1, 33, 100, 1000)
                for k, g in (("integers", 1), ("uniform", 3)))
    gpu = tuple(Case(n, k, note=f"grid {g}") for n in (1, 33, 1000, 1 << 20, 12_345_679)
                for k, g in (("integers", 1), ("uniform", 7), ("normal", 264)))
    return {"sim": sim, "gpu": gpu}


def _make_with_grid(rng, case):
    inputs = make_values(rng, case)
    inputs["grid"] = int(case.note.split()[-1])
    return inputs


def _run_warp_shuffle(ns, inputs, mode):
    x = inputs["x"]
    out = L.output(1, 0, np.float32)
    L.launch(ns["shuffle_sum_kernel"], inputs["grid"], THREADS[mode], L.guarded_input(x), out,
             x.size)
    return out.copy_to_host()[0]


def _verify_grid_stride(got, expected, inputs, mode):
    # Each thread accumulates n / (grid * block) elements in sequence before the tree.
    per_thread = L.blocks_for(inputs["x"].size, inputs["grid"] * THREADS[mode])
    expect_sum(got, inputs["x"], sequential_terms=per_thread + inputs["grid"])


# --- exercise 7: a generic (op, identity) reduction, two passes -------------------------------

OPS = ("sum", "max", "min", "argmax")


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


GENERIC_KINDS = {
    "sum": ("uniform",),
    "max": ("integers", "negative"),   # all-negative data exposes a 0 used as identity
    "min": ("integers", "positive"),
    "argmax": ("integers", "negative"),
}


def _generic_cases():
    def cases(sizes):
        return tuple(Case(n, kind, note=f"op {op}")
                     for op, kinds in GENERIC_KINDS.items() for kind in kinds for n in sizes)

    return {"sim": cases((1, 40, 300)), "gpu": cases((1, 1000, 1 << 20, 12_345_679))}


def _make_generic(rng, case):
    inputs = make_values(rng, case)
    inputs["op"] = case.note.split()[-1]
    return inputs


@cache
def _kernel_for(factory, op):
    return factory(combine_functions()[op])


def _run_generic(ns, inputs, mode):
    x, op = inputs["x"], inputs["op"]
    kernel = _kernel_for(ns["make_reduce_kernel"], op)
    tpb = THREADS[mode]
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


def _reference_generic(inputs):
    x, op = inputs["x"], inputs["op"]
    if op == "sum":
        return float(np.sum(x, dtype=np.float64)), None
    if op == "max":
        return x.max(), None
    if op == "min":
        return x.min(), None
    return x.max(), int(np.argmax(x))


def _verify_generic(got, expected, inputs, mode):
    (value, index), (want_value, want_index) = got, expected
    op = inputs["op"]
    if op == "sum":
        grid = GRIDS[mode][-1]
        per_thread = L.blocks_for(inputs["x"].size, grid * THREADS[mode])
        expect_sum(value, inputs["x"], sequential_terms=per_thread + grid)
        return
    expect_exact(np.float32(value), np.float32(want_value), f"{op} value")
    if want_index is not None:
        expect_exact(int(index), want_index, "argmax index (ties go to the smallest index)")


def _exercise(id_, title, entry, run, verify, cases, make=make_values,
              reference=_sum_reference, needs=()):
    return Exercise(
        id=f"reduction.{id_}", lesson=LESSON, title=title, entry=entry, make_inputs=make,
        run=run, reference=reference, verify=verify, cases=cases, needs=needs,
    )


EXERCISES = (
    _exercise("simple", "simple interleaved tree reduce (one block, in place)",
              "simple_sum_kernel", _run_single_block("simple_sum_kernel", read_only=False),
              _verify_single_block, SINGLE_BLOCK_CASES),
    _exercise("convergent", "divergence-free (convergent) reduce", "convergent_sum_kernel",
              _run_single_block("convergent_sum_kernel", read_only=False),
              _verify_single_block, SINGLE_BLOCK_CASES),
    _exercise("shared", "shared-memory reduce (input read once, never written)",
              "shared_sum_kernel", _run_single_block("shared_sum_kernel", read_only=True),
              _verify_single_block, SINGLE_BLOCK_CASES),
    _exercise("segmented", "segmented multi-block reduce with atomicAdd",
              "segmented_sum_kernel", _run_segmented, _verify_segmented,
              _multi_block_cases(2 * THREADS["sim"], 2 * THREADS["gpu"])),
    _exercise("coarsened", "thread-coarsened reduce", "coarsened_sum_kernel", _run_coarsened,
              _verify_coarsened, _multi_block_cases(8 * THREADS["sim"], 8 * THREADS["gpu"]),
              needs=("COARSE_FACTOR",)),
    _exercise("shuffle", "warp-shuffle reduce with a grid-stride loop", "shuffle_sum_kernel",
              _run_warp_shuffle, _verify_grid_stride, _grid_stride_cases(), make=_make_with_grid,
              needs=("warp_sum",)),
    _exercise("generic", "generic reduce: sum, max, min, argmax from one kernel",
              "make_reduce_kernel", _run_generic, _verify_generic, _generic_cases(),
              make=_make_generic, reference=_reference_generic),
)
