"""Lesson 02 (reduction): how each exercise is launched, what it must compute, and its tests.

Sizes are small in simulator mode (every CUDA thread is a Python thread there)
and include the edge cases that catch most bugs: n = 1, n smaller than one
block, n not a multiple of the block, several blocks.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import Case, Exercise, with_metric_rules
from grader.metric_rules import MetricRule
from grader.verify import expect_exact, expect_sum, expect_unchanged

LESSON = "02_reduction"
THREADS = {"sim": 32, "gpu": 256}  # threads per block for the multi-block exercises
GRIDS = {"sim": (1, 3), "gpu": (1, 7, 264)}  # grids the grid-stride exercises must handle
# Blocks of the warp-shuffle exercises in the simulator: one warp, and several warps (lane 0
# of each writes its total, another warp reads them: a missing barrier is a race there only).
SIM_SHUFFLE_BLOCKS = (32, 96)


def _launch_note(**params: int) -> str:
    """A case note naming its launch parameters, e.g. ``"grid 3, block 96"``."""
    return ", ".join(f"{name} {value}" for name, value in params.items())


def _launch_param(case_or_note, name: str, default: int) -> int:
    """A launch parameter from a case's note (see :func:`_launch_note`), else ``default``."""
    note = getattr(case_or_note, "note", case_or_note)
    for part in note.split(", "):
        key, _, value = part.partition(" ")
        if key == name:
            return int(value)
    return default


def _around_multiples(step: int, limit: int) -> tuple[int, ...]:
    """Sizes just below and above the multiples of ``step`` up to ``limit`` (and 1): where
    index arithmetic with that step goes wrong."""
    sizes = {1}
    for k in range(step, limit + 1, step):
        sizes.update((k - 1, k + 1))
    return tuple(sorted(sizes))


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
    # simulator: sizes around the multiples of the threads of one launch (grid * block),
    # from each launch's own parameters, and one size that makes every thread loop
    sim = tuple(Case(n, k, note=_launch_note(grid=g, block=b))
                for (k, g), b in zip((("integers", 1), ("uniform", 3)), SIM_SHUFFLE_BLOCKS)
                for n in (*_around_multiples(g * b, g * b), 1000))
    gpu = tuple(Case(n, k, note=_launch_note(grid=g)) for n in (1, 33, 1000, 1 << 20, 12_345_679)
                for k, g in (("integers", 1), ("uniform", 7), ("normal", 264)))
    return {"sim": sim, "gpu": gpu}


def _make_with_grid(rng, case):
    inputs = make_values(rng, case)
    inputs["grid"] = _launch_param(case, "grid", 1)
    inputs["block"] = _launch_param(case, "block", 0)  # 0: THREADS[mode]
    return inputs


def _threads(inputs, mode) -> int:
    return inputs.get("block") or THREADS[mode]


def _run_warp_shuffle(ns, inputs, mode):
    x = inputs["x"]
    out = L.output(1, 0, np.float32)
    L.launch(ns["shuffle_sum_kernel"], inputs["grid"], _threads(inputs, mode),
             L.guarded_input(x), out, x.size)
    return out.copy_to_host()[0]


def _verify_grid_stride(got, expected, inputs, mode):
    # Each thread accumulates n / (grid * block) elements in sequence before the tree.
    per_thread = L.blocks_for(inputs["x"].size, inputs["grid"] * _threads(inputs, mode))
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
    def cases(sizes, block=None):
        extra = {} if block is None else {"block": block}
        return tuple(Case(n, kind, note=_launch_note(op=op, **extra))
                     for op, kinds in GENERIC_KINDS.items() for kind in kinds for n in sizes)

    # simulator: one-warp blocks, and blocks of several warps with a size just above the
    # threads of the first launch's grid (its last thread loops once more, ending mid-warp)
    grid = GRIDS["sim"][-1]
    several = SIM_SHUFFLE_BLOCKS[-1]
    sim = cases((1, 40)) + cases((grid * several + 1,), several)
    return {"sim": sim, "gpu": cases((1, 1000, 1 << 20, 12_345_679))}


def _make_generic(rng, case):
    inputs = make_values(rng, case)
    inputs["op"] = case.note.split(", ")[0].split()[-1]
    inputs["block"] = _launch_param(case, "block", 0)  # 0: THREADS[mode]
    return inputs


@cache
def _kernel_for(factory, op):
    return factory(combine_functions()[op])


def _run_generic(ns, inputs, mode):
    x, op = inputs["x"], inputs["op"]
    kernel = _kernel_for(ns["make_reduce_kernel"], op)
    tpb = _threads(inputs, mode)
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
        per_thread = L.blocks_for(inputs["x"].size, grid * _threads(inputs, mode))
        expect_sum(value, inputs["x"], sequential_terms=per_thread + grid)
        return
    expect_exact(np.float32(value), np.float32(want_value), f"{op} value")
    if want_index is not None:
        expect_exact(int(index), want_index, "argmax index (ties go to the smallest index)")


def _exercise(id_, title, entry, run, verify, cases, make=make_values,
              reference=_sum_reference, needs=(), points=1.0):
    return Exercise(
        id=f"reduction.{id_}", lesson=LESSON, title=title, entry=entry, make_inputs=make,
        run=run, reference=reference, verify=verify, cases=cases, needs=needs, points=points,
    )


EXERCISES = (
    _exercise("simple", "simple interleaved tree reduce (one block, in place)",
              "simple_sum_kernel", _run_single_block("simple_sum_kernel", read_only=False),
              _verify_single_block, SINGLE_BLOCK_CASES, points=1),
    _exercise("convergent", "divergence-free (convergent) reduce", "convergent_sum_kernel",
              _run_single_block("convergent_sum_kernel", read_only=False),
              _verify_single_block, SINGLE_BLOCK_CASES, points=1),
    _exercise("shared", "shared-memory reduce (input read once, never written)",
              "shared_sum_kernel", _run_single_block("shared_sum_kernel", read_only=True),
              _verify_single_block, SINGLE_BLOCK_CASES, points=1),
    _exercise("segmented", "segmented multi-block reduce with atomicAdd",
              "segmented_sum_kernel", _run_segmented, _verify_segmented,
              _multi_block_cases(2 * THREADS["sim"], 2 * THREADS["gpu"]), points=1),
    _exercise("coarsened", "thread-coarsened reduce", "coarsened_sum_kernel", _run_coarsened,
              _verify_coarsened, _multi_block_cases(8 * THREADS["sim"], 8 * THREADS["gpu"]),
              needs=("COARSE_FACTOR",), points=1),
    _exercise("shuffle", "warp-shuffle reduce with a grid-stride loop", "shuffle_sum_kernel",
              _run_warp_shuffle, _verify_grid_stride, _grid_stride_cases(), make=_make_with_grid,
              needs=("warp_sum",), points=2),
    _exercise("generic", "generic reduce: sum, max, min, argmax from one kernel",
              "make_reduce_kernel", _run_generic, _verify_generic, _generic_cases(),
              make=_make_generic, reference=_reference_generic, points=2),
)


# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---

# Bounds set from the runs of benchmarks/metric_rules.py on an NVIDIA H200 (2026-11-22) and
# an NVIDIA H100 80GB HBM3 (2026-11-25, benchmarks/results/h100-2026-11-25-metric-rules/),
# each at least 15 % clear of the worst correct variant measured.
TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22; NVIDIA H100, 2026-11-25"
PROFILE_N = 1 << 25  # 128 MiB: long enough for stable DRAM metrics


def _sms() -> int:
    return L.cuda().get_current_device().MULTIPROCESSOR_COUNT


def _profile_single_block(entry: str):
    def profile(ns):
        x = np.random.default_rng(0).random(2048, dtype=np.float32)
        out = L.output(1, 0, np.float32)
        L.launch(ns[entry], 1, 32, L.cuda().to_device(x[:64]), out)  # compiles: not profiled
        L.launch(ns[entry], 1, 1024, L.cuda().to_device(x), out)

    return profile


def _profile_multi_block(entry: str, per_block):
    def profile(ns):
        x = np.random.default_rng(0).random(PROFILE_N, dtype=np.float32)
        out = L.output(1, 0, np.float32)
        kernel, tpb = ns[entry], THREADS["gpu"]
        L.launch(kernel, 1, tpb, L.cuda().to_device(x[:1000]), out, 1000)  # compiles
        grid = L.blocks_for(x.size, per_block(ns, tpb)) if per_block else 8 * _sms()
        L.launch(kernel, grid, tpb, L.cuda().to_device(x), out, x.size)

    return profile


def _profile_generic(ns):
    kernel = _kernel_for(ns["make_reduce_kernel"], "sum")
    x = np.random.default_rng(0).random(PROFILE_N, dtype=np.float32)
    grid, tpb = 8 * _sms(), THREADS["gpu"]
    part_v, part_i = L.output(grid, 0, np.float32), L.output(grid, 0, np.int64)
    for data in (x[:1000], x):  # the first launch compiles and is not profiled
        L.launch(kernel, grid, tpb, L.cuda().to_device(data), part_i, data.size, False,
                 np.float32(0), NO_INDEX, part_v, part_i)


def _rule(metric, label, why, **bound):
    return MetricRule(metric=metric, label=label, why=why, tuned_on=TUNED_ON, **bound)


DURATION = "gpu__time_duration.sum"
INSTRUCTIONS = "smsp__inst_executed.sum"
GLOBAL_LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"

METRICS = {
    "convergent": dict(
        rules=(_rule(INSTRUCTIONS, "instructions executed", "whole warps retire early in the "
                     "convergent tree, so far fewer warp instructions are issued; correct trees "
                     "measured up to 1.29x (the mirrored tree), the interleaved one 2.43x",
                     max_ratio=1.5),
               _rule(DURATION, "duration", "fewer instructions, shorter kernel",
                     max_ratio=1.3)),
        profile=_profile_single_block("convergent_sum_kernel")),
    "shared": dict(
        rules=(_rule(GLOBAL_LOADS, "global load requests", "each input element is read from "
                     "global memory once; the tree runs in shared memory (thread 0 reading "
                     "everything: 32x)", max_ratio=1.5),
               _rule(DURATION, "duration", "shared memory is much faster than global",
                     max_ratio=1.3)),
        profile=_profile_single_block("shared_sum_kernel")),
    "segmented": dict(
        rules=(_rule(DURATION, "duration", "all blocks work in parallel; a block's tree "
                     "takes log2(blockDim) steps, and each block adds its total with ONE "
                     "atomic: atomics on one address are serialised, so one per warp (8x "
                     "as many) measured 6.9x the reference", max_ratio=1.3),),
        profile=_profile_multi_block("segmented_sum_kernel", lambda ns, tpb: 2 * tpb)),
    "coarsened": dict(
        rules=(_rule(DURATION, "duration", "each thread adds 2 * COARSE_FACTOR elements before "
                     "the tree: less barrier overhead per element", max_ratio=1.3),
               _rule(DRAM_PCT, "DRAM throughput (% of peak)", "a memory-bound kernel should "
                     "keep DRAM busy", min_ratio=0.75)),
        profile=_profile_multi_block(
            "coarsened_sum_kernel", lambda ns, tpb: 2 * int(ns["COARSE_FACTOR"]) * tpb)),
    # Bounds between the groups measured on an H100 (2026-11-25, recorded in
    # benchmarks/results/h100-2026-11-25-metric-rules/): correct but different kernels up to
    # 1.22x duration / down to 0.82x DRAM (one atomic per warp), the chunked-loads slow
    # variant 1.92x / 0.68x. The first bounds (1.25x, 0.8x) rejected correct kernels.
    "shuffle": dict(
        rules=(_rule(DURATION, "duration", "one pass over the data at DRAM speed; correct "
                     "kernels written differently measured up to 1.31x, uncoalesced ones 2x",
                     max_ratio=1.6),
               _rule(DRAM_PCT, "DRAM throughput (% of peak)", "coalesced grid-stride loads "
                     "keep DRAM busy (correct kernels measured down to 0.82x, contiguous "
                     "chunks per thread 0.68x on an H100)", min_ratio=0.7)),
        profile=_profile_multi_block("shuffle_sum_kernel", None)),
    "generic": dict(
        rules=(_rule(DURATION, "duration (sum, first pass)", "the generic kernel should cost "
                     "no more than a specialised one", max_ratio=1.3),),
        profile=_profile_generic, kernels=("reduce_kernel",)),
}

NO_METRIC_RULE = {  # exercises without a metric rule, and why
    "simple": "the lesson's starting point, divergent by design (an interleaved tree, in "
              "place): the rules of the exercises after it measure what each one fixes",
}

EXERCISES = with_metric_rules(EXERCISES, METRICS, NO_METRIC_RULE)

# The warp-shuffle reduction's pieces that its variants below share.
_DOWN_WARP_SUM = '''
@cuda.jit(device=True)
def warp_sum(value):
    for offset in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
    return value
'''

_SHUFFLE_TAIL = '''
    acc = warp_sum(acc)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    if lane == 0:
        warp_totals[warp] = acc
    cuda.syncthreads()
    if warp == 0:
        warps = (cuda.blockDim.x + 31) // 32
        acc = warp_totals[lane] if lane < warps else float32(0.0)
        acc = warp_sum(acc)
        if lane == 0:
            cuda.atomic.add(output, 0, acc)
'''

# Slow but correct submissions, each (description, text in the solution cell, replacement):
# with no text, the replacement is the whole cell. Each must fail every metric rule of its
# exercise on a GPU (benchmarks/metric_rules.py checks this and records the ncu reports that
# tests/test_metric_rules.py replays).
SLOW_VARIANTS = {
    "reduction.convergent": ("the interleaved tree of exercise 1", None, '''
@cuda.jit
def convergent_sum_kernel(input, output):
    t = cuda.threadIdx.x
    stride = 1
    while stride <= cuda.blockDim.x:
        if t % stride == 0:
            input[2 * t] += input[2 * t + stride]
        cuda.syncthreads()
        stride *= 2
    if t == 0:
        output[0] = input[0]
'''),
    "reduction.shared": ("thread 0 sums everything from global memory", None, '''
@cuda.jit
def shared_sum_kernel(input, output):
    if cuda.threadIdx.x == 0:
        total = float32(0.0)
        for i in range(2 * cuda.blockDim.x):
            total += input[i]
        output[0] = total
'''),
    # Correct, and the natural next step after warp shuffles, but eight atomics per block of
    # 256 on one address: measured 6.9x the reference's duration on an H100 (2026-11-25).
    "reduction.segmented": ("warp shuffles, one atomic per warp", None, '''
@cuda.jit
def segmented_sum_kernel(input, output, n):
    i = 2 * cuda.blockDim.x * cuda.blockIdx.x + cuda.threadIdx.x
    value = float32(0.0)
    if i < n:
        value = input[i]
    if i + cuda.blockDim.x < n:
        value += input[i + cuda.blockDim.x]
    for offset in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
    if cuda.threadIdx.x % 32 == 0:
        cuda.atomic.add(output, 0, value)
'''),
    "reduction.coarsened": ("COARSE_FACTOR = 1 (no coarsening)", "COARSE_FACTOR = 4",
                            "COARSE_FACTOR = 1"),
    "reduction.shuffle": ("each thread sums a contiguous chunk (uncoalesced loads)", None,
                          _DOWN_WARP_SUM + '''

@cuda.jit
def shuffle_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    chunk = (n + cuda.gridsize(1) - 1) // cuda.gridsize(1)
    start = cuda.grid(1) * chunk
    acc = float32(0.0)
    for i in range(start, min(start + chunk, n)):
        acc += input[i]''' + _SHUFFLE_TAIL),
    "reduction.generic": ("each thread folds a contiguous chunk (uncoalesced loads)", None, '''
def make_reduce_kernel(combine):
    @cuda.jit
    def reduce_kernel(values, indices, n, use_indices, init_value, init_index,
                      out_values, out_indices):
        block_values = cuda.shared.array(1024, float32)
        block_indices = cuda.shared.array(1024, int64)
        chunk = (n + cuda.gridsize(1) - 1) // cuda.gridsize(1)
        start = cuda.grid(1) * chunk
        value, index = init_value, init_index
        for i in range(start, min(start + chunk, n)):
            j = indices[i] if use_indices else int64(i)
            value, index = combine(value, index, values[i], j)
        t = cuda.threadIdx.x
        block_values[t] = value
        block_indices[t] = index
        cuda.syncthreads()
        if t == 0:
            for k in range(1, cuda.blockDim.x):
                value, index = combine(value, index, block_values[k], block_indices[k])
            out_values[cuda.blockIdx.x] = value
            out_indices[cuda.blockIdx.x] = index

    return reduce_kernel
'''),
}

# Correct submissions written differently from the reference solution, each (description,
# text in the solution cell, replacement) as above. Each must be graded correct on its
# output and pass every metric rule of its exercise on a GPU: benchmarks/metric_rules.py
# profiles them beside the slow variants and records both groups' ratios, the evidence the
# rules' thresholds are set from.
_XOR_WARP_SUM = '''
@cuda.jit(device=True)
def warp_sum(value):
    for offset in (16, 8, 4, 2, 1):  # butterfly: every lane ends with the total
        value += cuda.shfl_xor_sync(FULL_MASK, value, offset)
    return value
'''


CORRECT_VARIANTS = {
    "reduction.convergent": (
        ("the pair added through locals, the stride halved with a shift", None, '''
@cuda.jit
def convergent_sum_kernel(input, output):
    t = cuda.threadIdx.x
    stride = cuda.blockDim.x
    while stride > 0:
        if t < stride:
            a = input[t]
            b = input[t + stride]
            input[t] = a + b
        cuda.syncthreads()
        stride >>= 1
    if t == 0:
        output[0] = input[0]
'''),
        ("the mirrored tree: the sums gather at the end of the array", None, '''
@cuda.jit
def convergent_sum_kernel(input, output):
    t = cuda.threadIdx.x
    last = 2 * cuda.blockDim.x - 1
    stride = cuda.blockDim.x
    while stride >= 1:
        if t < stride:
            input[last - t] += input[last - t - stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        output[0] = input[last]
'''),
    ),
    "reduction.shared": (
        ("each thread loads two neighbouring elements", None, '''
@cuda.jit
def shared_sum_kernel(input, output):
    partial = cuda.shared.array(MAX_TPB, float32)
    t = cuda.threadIdx.x
    partial[t] = input[2 * t] + input[2 * t + 1]
    stride = cuda.blockDim.x // 2
    while stride >= 1:
        cuda.syncthreads()
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        output[0] = partial[0]
'''),
        ("the tree in shared memory down to one warp, then shuffles", None, '''
@cuda.jit
def shared_sum_kernel(input, output):
    partial = cuda.shared.array(MAX_TPB, float32)
    t = cuda.threadIdx.x
    partial[t] = input[t] + input[t + cuda.blockDim.x]
    stride = cuda.blockDim.x // 2
    while stride >= 32:
        cuda.syncthreads()
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    cuda.syncthreads()
    if t < 32:
        lanes = min(cuda.blockDim.x, 32)  # a block under 32 threads is a partial warp
        mask = FULL_MASK if lanes == 32 else (1 << lanes) - 1
        value = partial[t]
        for offset in (16, 8, 4, 2, 1):
            other = cuda.shfl_down_sync(mask, value, offset)
            if t + offset < lanes:  # a lane past the block does not exist
                value += other
        if t == 0:
            output[0] = value
'''),
    ),
    "reduction.segmented": (
        ("the block's tree written inline, the stride halved with a shift", None, '''
@cuda.jit
def segmented_sum_kernel(input, output, n):
    partial = cuda.shared.array(MAX_TPB, float32)
    t = cuda.threadIdx.x
    i = 2 * cuda.blockDim.x * cuda.blockIdx.x + t
    a = input[i] if i < n else float32(0.0)
    b = input[i + cuda.blockDim.x] if i + cuda.blockDim.x < n else float32(0.0)
    partial[t] = a + b
    stride = cuda.blockDim.x >> 1
    while stride > 0:
        cuda.syncthreads()
        if t < stride:
            partial[t] += partial[t + stride]
        stride >>= 1
    if t == 0:
        cuda.atomic.add(output, 0, partial[0])
'''),
        ("warp shuffles, the warp totals summed by warp 0", None, '''
@cuda.jit(device=True)
def warp_total(value):
    for offset in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
    return value


@cuda.jit
def segmented_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    i = 2 * cuda.blockDim.x * cuda.blockIdx.x + t
    value = float32(0.0)
    if i < n:
        value = input[i]
    if i + cuda.blockDim.x < n:
        value += input[i + cuda.blockDim.x]
    value = warp_total(value)
    if t % 32 == 0:
        warp_totals[t // 32] = value
    cuda.syncthreads()
    if t < 32:
        value = warp_totals[t] if t < (cuda.blockDim.x + 31) // 32 else float32(0.0)
        value = warp_total(value)
        if t == 0:
            cuda.atomic.add(output, 0, value)
'''),
    ),
    "reduction.coarsened": (
        ("COARSE_FACTOR = 8", "COARSE_FACTOR = 4", "COARSE_FACTOR = 8"),
        ("the block total with warp shuffles instead of the shared-memory tree", None, '''
COARSE_FACTOR = 4


@cuda.jit
def coarsened_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    start = 2 * COARSE_FACTOR * cuda.blockDim.x * cuda.blockIdx.x + t
    value = float32(0.0)
    for k in range(2 * COARSE_FACTOR):
        i = start + k * cuda.blockDim.x
        if i < n:
            value += input[i]
    for offset in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
    if t % 32 == 0:
        warp_totals[t // 32] = value
    cuda.syncthreads()
    if t < 32:
        value = warp_totals[t] if t < (cuda.blockDim.x + 31) // 32 else float32(0.0)
        for offset in (16, 8, 4, 2, 1):
            value += cuda.shfl_down_sync(FULL_MASK, value, offset)
        if t == 0:
            cuda.atomic.add(output, 0, value)
'''),
    ),
    "reduction.shuffle": (
        ("xor butterfly, grid-stride loop written as range(cuda.grid(1), n, cuda.gridsize(1))",
         None, _XOR_WARP_SUM + '''

@cuda.jit
def shuffle_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    acc = float32(0.0)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += input[i]
''' + _SHUFFLE_TAIL),
        ("one atomic per warp instead of per block", None, _DOWN_WARP_SUM + '''

@cuda.jit
def shuffle_sum_kernel(input, output, n):
    acc = float32(0.0)
    i = cuda.grid(1)
    while i < n:
        acc += input[i]
        i += cuda.gridsize(1)
    acc = warp_sum(acc)
    if cuda.threadIdx.x % 32 == 0:
        cuda.atomic.add(output, 0, acc)
'''),
        ("xor butterfly, the reference's while loop", None, _XOR_WARP_SUM + '''

@cuda.jit
def shuffle_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    acc = float32(0.0)
    i = cuda.grid(1)
    while i < n:
        acc += input[i]
        i += cuda.gridsize(1)
''' + _SHUFFLE_TAIL),
        ("the reference's shfl_down, the grid-stride loop as a range", None, _DOWN_WARP_SUM + '''

@cuda.jit
def shuffle_sum_kernel(input, output, n):
    warp_totals = cuda.shared.array(32, float32)
    acc = float32(0.0)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += input[i]
''' + _SHUFFLE_TAIL),
    ),
    "reduction.generic": (
        ("xor butterfly in the warp combine", "other_value = cuda.shfl_down_sync(FULL_MASK, "
         "value, offset)\n            other_index = cuda.shfl_down_sync(FULL_MASK, index, "
         "offset)", "other_value = cuda.shfl_xor_sync(FULL_MASK, value, offset)\n"
         "            other_index = cuda.shfl_xor_sync(FULL_MASK, index, offset)"),
        ("the grid-stride loop as a range", "        i = cuda.grid(1)\n        while i < n:\n"
         "            j = indices[i] if use_indices else int64(i)\n"
         "            value, index = combine(value, index, values[i], j)\n"
         "            i += cuda.gridsize(1)\n",
         "        for i in range(cuda.grid(1), n, cuda.gridsize(1)):\n"
         "            j = indices[i] if use_indices else int64(i)\n"
         "            value, index = combine(value, index, values[i], j)\n"),
    ),
}
