"""Lesson 04's test cases: typed cases and, for each exercise, its cases in each mode.

Sizes are odd on purpose (a row length that is not a multiple of the thread group, a row
count that leaves thread groups or blocks without a row); the boundary cases come from the
kernels' own launch parameters, so that every path of the reference's loops is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grader.exercise import SANITIZED_MAX_SIZE, Case


@dataclass(frozen=True)
class VarianceCase(Case):
    """A CPU variance test: ``size`` columns in ``rows`` rows of ``data``, for the function
    that ``kind`` names ("two-pass", "naive", "welford" or "combine")."""

    rows: int = 1
    data: str = "normal"  # "normal", "large-mean" or "zero-mean" (see inputs.make_rows)

    def name(self) -> str:
        if self.kind == "combine":  # each row split in two at a random point
            data = f"{'random' if self.data == 'normal' else self.data} splits"
        else:
            data = self.data
        return f"n={self.size}, {self.kind}, {self.rows} rows, {data}"


@dataclass(frozen=True)
class NormCase(Case):
    """A LayerNorm test: ``size`` is the number of columns."""

    rows: int = 1
    dtype: str = "float32"
    affine: bool = True
    eps: float = 1e-5
    config: tuple = ()  # warp kernel: (cols_per_thread, width, rows_per_access)
    block: int = 32
    grid: int = 1
    exact: bool = False  # buffers of exactly the data's size (for compute-sanitizer memcheck)
    plan: str = ""  # dispatcher: the plan it must choose ("warp", "smem", "uncached"), no launch

    def name(self) -> str:
        parts = [f"{self.rows}x{self.size} {self.dtype}", self.kind,
                 "affine" if self.affine else "no affine", f"eps {self.eps:g}"]
        if self.config:
            cpt, width, rpa = self.config
            parts.append(f"cols_per_thread {cpt}, width {width}, rows_per_access {rpa}")
        if self.grid:
            parts.append(f"grid {self.grid} x {self.block}")
        if self.exact:
            parts.append("exact-size buffers")
        if self.plan:
            parts.append(f"plan {self.plan}")
        return ", ".join(parts)


# --- exercise 1: variances on the CPU ---------------------------------------------------------

def variance_cases():
    def case(kind, rows, cols, data):
        return VarianceCase(cols, kind, rows=rows, data=data)

    return {mode: (case("two-pass", 8, 50, "normal"), case("two-pass", 16, 300, "large-mean"),
                   case("naive", 8, 200, "zero-mean"), case("welford", 8, 77, "normal"),
                   case("welford", 16, 500, "large-mean"), case("welford", 8, 1, "normal"),
                   case("combine", 64, 60, "normal"),
                   case("combine", 64, 60, "large-mean"))
            for mode in ("sim", "gpu")}


# --- exercises 2-4: the kernels -----------------------------------------------------------------

SIM_BLOCK = 64  # threads per block of the simulator's boundary cases: two warps
GPU_BLOCK = 128  # the block of most GPU cases
UNROLL = 4  # the lesson's UNROLL: elements each thread of a block kernel loads at once


def _rows_ending_mid_tile(rows_per_warp: int, rows_per_block: int) -> int:
    """A row count whose last row falls inside a warp's rows in the second block, one row
    into a thread group's rows (or, with one row per warp, inside the second block)."""
    return rows_per_block + (rows_per_warp // 2 | 1)


def warp_boundary_cases(block: int = SIM_BLOCK) -> tuple[NormCase, ...]:
    """Boundary shapes of the warp kernel, from its launch parameters: for each
    configuration ``(cols_per_thread, width, rows_per_access)``, a row one element short of
    what the group covers (``col == cols`` falls on the last lane) and a row whose last
    pass has one element; rows that end one row into a group's rows inside a warp of the
    second block (a grid of two blocks), or on the grid-stride loop's second pass (one)."""
    configs = ((1, 8, 2), (1, 16, 2), (1, 32, 1), (2, 32, 1), (3, 32, 2))
    cases = []
    for per_thread, width, per_access in configs:
        for cols in (per_thread * width - 1, (per_thread - 1) * width + width // 2 + 1):
            rows_per_warp = 32 // width * per_access
            grid = 2 - len(cases) % 2
            rows = _rows_ending_mid_tile(rows_per_warp, block // width * per_access)
            kind = ("normal", "eps")[len(cases) % 2]
            cases.append(NormCase(cols, kind, rows=rows, config=(per_thread, width, per_access),
                                  affine=len(cases) % 3 != 1, block=block, grid=grid))
    return tuple(cases)


def block_boundary_cases(blocks=(32, SIM_BLOCK)) -> tuple[NormCase, ...]:
    """Boundary shapes of the block kernels, from their launch parameters: row lengths one
    element short of and one over what a block covers in one pass (``block``) and in one
    unrolled pass (``UNROLL * block``), one past a block beyond that (where the thread
    whose next element would be ``col == cols`` is in its second unrolled pass), and, for
    the first block size, one short of two unrolled passes (every thread but the last loads
    all UNROLL elements of its second pass; the last one's last element is past the row);
    float32 rows of ordinary values, where the statistics' tolerance is tight; three rows
    for a grid of two blocks. tests/test_case_coverage.py says which shapes reach which
    path of the kernels' loops."""
    cases = []
    for block in blocks:
        span = UNROLL * block
        sizes = (block - 1, block + 1, span - 1, span + 1, span + block + 1)
        if block == blocks[0]:
            sizes += (2 * span - 1,)
        for cols in sizes if block == blocks[0] else sizes[1::2]:
            cases.append(NormCase(cols, "normal", rows=3, affine=len(cases) % 3 != 1,
                                  block=block, grid=2))
    return tuple(cases)


def warp_cases():
    def c(rows, cols, config, kind, affine=True, eps=1e-5, block=64, grid=1, dtype="float32"):
        return NormCase(cols, kind, rows=rows, config=config, affine=affine, eps=eps,
                        block=block, grid=grid, dtype=dtype)

    sim = (
        c(7, 1, (1, 1, 2), "eps", eps=1e-3),
        c(9, 3, (1, 4, 2), "normal"),
        c(37, 8, (1, 8, 2), "large-mean", affine=False),
        c(5, 32, (1, 32, 1), "large-mean"),
        c(6, 45, (2, 32, 1), "normal", affine=False, grid=2),
        c(4, 100, (4, 32, 1), "eps", eps=1e-5),
        c(7, 70, (4, 32, 2), "large-mean"),
        c(3, 13, (1, 16, 2), "eps", eps=0.1, affine=False),
        *warp_boundary_cases(),
    )
    gpu = (
        c(1001, 1, (1, 1, 2), "eps", eps=1e-3, block=128, grid=3),
        c(999, 3, (1, 4, 2), "normal", block=128, grid=7),
        c(4099, 8, (1, 8, 2), "large-mean", affine=False, block=128, grid=5),
        c(2000, 32, (1, 32, 1), "large-mean", block=128, grid=100),
        c(1000, 45, (2, 32, 1), "normal", affine=False, block=256, grid=9),
        c(777, 100, (4, 32, 1), "eps", block=128, grid=13),
        c(1003, 300, (10, 32, 2), "large-mean", block=128, grid=64),
        c(513, 1024, (32, 32, 1), "large-mean", block=128, grid=40),
        c(300, 1000, (32, 32, 1), "eps", eps=1e-5, affine=False, block=128, grid=1000),
    )
    # the boundary shapes of GPU launches whose kernels the cases above compile anyway
    configs = {case.config for case in gpu}
    gpu += tuple(case for case in warp_boundary_cases(GPU_BLOCK) if case.config in configs)
    return {"sim": sim, "gpu": gpu}


def block_cases():
    def c(rows, cols, kind, affine=True, eps=1e-5, block=32, grid=2):
        return NormCase(cols, kind, rows=rows, affine=affine, eps=eps, block=block, grid=grid)

    sim = (
        c(3, 1, "eps", eps=1e-3),
        c(5, 200, "large-mean"),
        c(4, 129, "eps", affine=False),
        c(3, 300, "normal", block=64),
        c(2, 37, "large-mean", eps=0.1, affine=False, block=64, grid=1),
        *block_boundary_cases(),
    )
    gpu = (
        c(100, 1, "eps", eps=1e-3, block=128, grid=7),
        c(1000, 1025, "large-mean", block=128, grid=100),
        c(333, 4096, "eps", affine=False, block=256, grid=64),
        c(257, 12345, "normal", block=512, grid=129),
        c(64, 32768, "large-mean", block=512, grid=64),
        c(500, 2000, "large-mean", eps=0.1, affine=False, block=512, grid=2000),
        *block_boundary_cases((GPU_BLOCK,)),
    )
    return {"sim": sim, "gpu": gpu}


def exact_size(cases) -> tuple[NormCase, ...]:
    """The cases compute-sanitizer runs (at most ``SANITIZED_MAX_SIZE`` elements), in buffers
    of exactly the data's size: memcheck then reports a read or write past the last row's
    end, which the padding of the checks would hide from it."""
    return tuple(replace(c, exact=True) for c in cases if c.size * c.rows <= SANITIZED_MAX_SIZE)


# --- exercise 5: the dispatcher ---------------------------------------------------------------

WARP_MAX_COLS = 1024  # the lesson's: the warp kernel up to here, then the block kernels
SMEM_PER_BLOCK = 232448  # bytes of shared memory one block can have on an H100 (opt-in)


def dispatch_cases():
    def c(rows, cols, kind, dtype="float32", affine=True, eps=1e-5, plan=""):
        return NormCase(cols, kind, rows=rows, dtype=dtype, affine=affine, eps=eps, grid=0,
                        plan=plan)

    sim = (
        c(5, 1, "eps", "float16", eps=1e-3),
        c(9, 31, "large-mean", "float16", affine=False),
        c(4, 100, "normal"),
        c(3, 1024, "large-mean", "float16"),
        c(3, 1100, "eps", affine=False),
        c(2, 2500, "large-mean", "float16"),
        c(4, 64, "normal", plan="warp"),
        c(16, 3000, "normal", plan="smem"),
        c(2, 70000, "normal", plan="uncached"),
        *plan_boundary_cases(),
    )
    gpu = (
        c(4099, 1, "eps", "float16", eps=1e-3),
        c(1000, 31, "large-mean", "float16", affine=False),
        c(49152, 128, "normal", "float16"),
        c(2000, 1000, "large-mean"),
        c(1000, 1024, "large-mean", "float16"),
        c(999, 1025, "eps", affine=False),
        c(1000, 8192, "large-mean", "float16"),
        c(128, 32768, "normal"),
        c(8, 70000, "large-mean"),
        c(4, 64, "normal", plan="warp"),
        c(16, 3000, "normal", plan="smem"),
        c(2, 70000, "normal", plan="uncached"),
        *plan_boundary_cases(gpu=True),
    )
    # the plans first: a wrong choice is named before a launch fails on it (on a GPU, shared
    # memory that does not fit is a launch error)
    return {"sim": _plans_first(sim), "gpu": _plans_first(gpu)}


def plan_boundary_cases(gpu: bool = False) -> tuple[NormCase, ...]:
    """Plans (no launch) on each side of each decision: the warp kernel up to WARP_MAX_COLS
    columns, then the shared-memory kernel while the row's 4-byte values fit in a block's
    shared memory, then the uncached one. In the simulator, whose occupancy estimate counts
    the dynamic shared memory only, the last decision falls between SMEM_PER_BLOCK / 4 columns
    and one more; on a GPU the kernel's own static shared memory (the student's block
    all-reduce) moves it down a little, so a row of 50000 columns stands for the smem side."""
    fits = 50000 if gpu else SMEM_PER_BLOCK // 4
    return tuple(NormCase(cols, "normal", rows=2, grid=0, plan=kind)
                 for cols, kind in ((WARP_MAX_COLS, "warp"), (WARP_MAX_COLS + 1, "smem"),
                                    (fits, "smem"), (SMEM_PER_BLOCK // 4 + 1, "uncached")))


def _plans_first(cases):
    return tuple(sorted(cases, key=lambda case: not case.plan))
