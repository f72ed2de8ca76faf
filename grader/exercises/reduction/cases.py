"""Lesson 02's test cases: sizes, input kinds and launch parameters.

Sizes are small in simulator mode (every CUDA thread is a Python thread there) and
include the edge cases that catch most bugs: n = 1, n smaller than one block, n not a
multiple of the block, several blocks.

The gpu-mode simulator pass (:func:`simulator_pass`) runs some of the simulator cases again
after the GPU check, for the bugs only the simulator sees: races in shared or global memory
(within a block or between blocks), reads of memory nobody wrote, barriers that not every
thread reaches. These depend on the launch, not on the sizes and values the GPU check has
covered: the pass keeps one case per launch shape.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from grader.exercise import Case

THREADS = {"sim": 32, "gpu": 256}  # threads per block for the multi-block exercises
GRIDS = {"sim": (1, 3), "gpu": (1, 7, 264)}  # grids the grid-stride exercises must handle
# Blocks of the warp-shuffle exercises in the simulator: one warp, and several warps (lane 0
# of each writes its total, another warp reads them: a missing barrier is a race there only).
SIM_SHUFFLE_BLOCKS = (32, 96)
OPS = ("sum", "max", "min", "argmax")


@dataclass(frozen=True)
class LaunchCase(Case):
    """A reduction test with its launch: ``grid`` blocks of ``block`` threads (0: the
    exercise's default) and, for the generic kernel, the reduction ``op``."""

    grid: int = 0
    block: int = 0
    op: str = ""

    def name(self) -> str:
        launch = [f"op {self.op}"] if self.op else []
        launch += [f"{key} {value}" for key, value in (("grid", self.grid),
                                                       ("block", self.block)) if value]
        return ", ".join([f"n={self.size}, {self.kind}", *launch])


def around_multiples(step: int, limit: int) -> tuple[int, ...]:
    """Sizes just below and above the multiples of ``step`` up to ``limit`` (and 1): where
    index arithmetic with that step goes wrong."""
    sizes = {1}
    for k in range(step, limit + 1, step):
        sizes.update((k - 1, k + 1))
    return tuple(sorted(sizes))


def single_block_cases() -> dict:
    """Exercises 1-3: one block, n = 2 * blockDim (a power of two)."""
    kinds = ("integers", "normal")
    return {"sim": tuple(Case(n, kind) for n in (2, 8, 64) for kind in kinds),
            "gpu": tuple(Case(n, kind) for n in (2, 64, 512, 2048) for kind in kinds)}


def multi_block_cases(per_block_sim: int, per_block_gpu: int) -> dict:
    """Exercises 4-5: many blocks, arbitrary n, around the elements one block reduces."""
    def sizes(per_block):
        return (1, 5, per_block // 2, per_block, per_block + 1, 3 * per_block + 7)

    return {
        "sim": tuple(Case(n, k) for n in sizes(per_block_sim) for k in ("integers", "uniform")),
        "gpu": tuple(Case(n, k) for n in (*sizes(per_block_gpu), 1 << 20, 12_345_679)
                     for k in ("integers", "uniform")),
    }


def grid_stride_cases() -> dict:
    """Exercise 6. Simulator: sizes around the multiples of the threads of one launch
    (grid * block), from each launch's own parameters, and one size that makes every
    thread loop."""
    sim = tuple(LaunchCase(n, k, grid=g, block=b)
                for (k, g), b in zip((("integers", 1), ("uniform", 3)), SIM_SHUFFLE_BLOCKS)
                for n in (*around_multiples(g * b, g * b), 1000))
    gpu = tuple(LaunchCase(n, k, grid=g) for n in (1, 33, 1000, 1 << 20, 12_345_679)
                for k, g in (("integers", 1), ("uniform", 7), ("normal", 264)))
    return {"sim": sim, "gpu": gpu}


GENERIC_KINDS = {
    "sum": ("uniform",),
    "max": ("integers", "negative"),   # all-negative data exposes a 0 used as identity
    "min": ("integers", "positive"),
    "argmax": ("integers", "negative"),
}
IDENTITY_KINDS = ("negative", "positive")  # the kinds that expose a wrong identity
# the kinds whose wrong sums cannot cancel by chance: integers from -8 to 8 that a bug counts
# twice and integers that it skips add up to the same sum now and then (about one seed in a
# hundred for a segment stride one block too short), real numbers practically never
CONTINUOUS_KINDS = ("uniform", "normal")


def generic_cases() -> dict:
    """Exercise 7: every op. Simulator: one-warp blocks, and blocks of several warps with a
    size just above the threads of the first launch's grid (its last thread loops once
    more, ending mid-warp)."""
    def cases(sizes, block=0):
        return tuple(LaunchCase(n, kind, op=op, block=block)
                     for op, kinds in GENERIC_KINDS.items() for kind in kinds for n in sizes)

    grid = GRIDS["sim"][-1]
    several = SIM_SHUFFLE_BLOCKS[-1]
    sim = cases((1, 40)) + cases((grid * several + 1,), several)
    return {"sim": sim, "gpu": cases((1, 1000, 1 << 20, 12_345_679))}


# --- the gpu-mode simulator pass --------------------------------------------------------------

def one_block_of_half(case: Case) -> int:
    """The launch shape of exercises 1-3: one block of n // 2 threads."""
    return case.size // 2


def launch_of(case: LaunchCase) -> tuple:
    """The launch shape of a :class:`LaunchCase`: its op (each builds a kernel of its own),
    grid and block."""
    return case.op, case.grid, case.block


def simulator_pass(cases: dict, shape: Callable[[Case], Hashable] | None = None
                   ) -> Sequence[Case]:
    """The simulator cases of ``cases`` that the gpu-mode simulator pass runs: for each launch
    shape (``shape(case)``; None: one shape, a fixed block whose grid grows with n), the
    largest case, which has the most blocks, a partial last block and threads that loop where
    the kernel strides over the grid; of equal sizes, one of IDENTITY_KINDS if any, else one
    of CONTINUOUS_KINDS."""
    def rank(case: Case) -> tuple:
        return case.size, case.kind in IDENTITY_KINDS, case.kind in CONTINUOUS_KINDS

    chosen: dict[Hashable, Case] = {}
    for case in cases["sim"]:
        key = shape(case) if shape else None
        best = chosen.get(key)
        if best is None or rank(case) > rank(best):
            chosen[key] = case
    return tuple(chosen.values())
