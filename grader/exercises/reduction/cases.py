"""Lesson 02's test cases: sizes, input kinds and launch parameters.

Sizes are small in simulator mode (every CUDA thread is a Python thread there) and
include the edge cases that catch most bugs: n = 1, n smaller than one block, n not a
multiple of the block, several blocks.
"""

from __future__ import annotations

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
