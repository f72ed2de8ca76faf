"""Lesson 03's test cases: typed shapes, and the lists each exercise runs in each mode.

The simulator cases of the kernel exercises add boundary shapes made from each
kernel's own launch parameters (:func:`warp_boundary_cases`,
:func:`block_boundary_cases`): columns just below, at and above what one pass of a
thread group or block covers, for each pack size, and rows that end inside a warp's
tile of rows or inside a block. The dispatcher's plan is checked alone, without a launch,
on both sides of each of its decisions (:func:`plan_boundary_cases`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grader.exercise import SANITIZED_MAX_SIZE, Case
from grader.exercises.softmax.plans import (
    BLOCK_TABLES,
    SMEM_LIMIT,
    WARP_MAX_COLS,
    pack_for,
    warp_config,
)


@dataclass(frozen=True)
class Shape(Case):
    """A softmax test: shape, dtype, log or not, and how the kernel is configured/launched.

    Two kinds are no matrix: ``"block size"`` asks ``choose_block_size`` for the table
    ``resident`` (resident blocks per SM for 128, 256, 512 and 1024 threads), ``"plan"``
    asks the dispatcher's plan for the shape without launching anything."""

    rows: int = 1
    cols: int = 1
    dtype: str = "float32"
    log: bool = False
    config: tuple = ()  # exercise-specific kernel configuration
    grid: int = 0  # 0: one block per row (block kernels) or enough for every row
    block: int = 32
    exact: bool = False  # buffers of exactly the data's size (for compute-sanitizer memcheck)
    resident: tuple[int, ...] = ()  # kind "block size": the occupancy table it is given
    calls: str = ""  # the function the case runs, where not the exercise's entry

    def name(self) -> str:
        parts = [f"{self.rows}x{self.cols} {self.dtype}", self.kind]
        if self.log:
            parts.append("log")
        if self.config:
            parts.append(f"config {self.config}")
        if self.grid:
            parts.append(f"grid {self.grid}")
        if self.exact:
            parts.append("exact-size buffers")
        if self.resident:
            parts.append(f"resident blocks {self.resident}")
        if self.kind == "plan":
            parts.append("plan only, no launch")
        if self.calls:
            parts.append(self.calls)
        return ", ".join(parts)


def shape(rows, cols, dtype="float32", kind="normal", **extra) -> Shape:
    return Shape(size=rows * cols, kind=kind, rows=rows, cols=cols, dtype=dtype, **extra)


def exact_size(cases) -> tuple[Shape, ...]:
    """The cases compute-sanitizer runs (at most ``SANITIZED_MAX_SIZE`` elements), in buffers
    of exactly the data's size: memcheck then reports a read or write past the last row's
    end, which the guard rows and padding of the checks would hide from it."""
    return tuple(replace(c, exact=True) for c in cases if c.size <= SANITIZED_MAX_SIZE)


def _compile_key(case: Shape) -> tuple:
    """What a kernel is compiled for: a case with a new key costs a compilation on a GPU."""
    return (case.dtype, case.config, case.log)


def _reusing(cases, known) -> tuple[Shape, ...]:
    """The ``cases`` whose kernels ``known`` cases compile anyway."""
    keys = {_compile_key(c) for c in known}
    return tuple(c for c in cases if _compile_key(c) in keys)


# --- exercise 1: CPU ----------------------------------------------------------------------------

def cpu_cases(log=False) -> tuple[Shape, ...]:
    kinds = ("normal", "large", "masked", "-inf rows") + (("wide",) if log else ())
    cases = [shape(1, 1, log=log), shape(1, 1, kind="-inf rows", log=log)]
    for dtype in ("float32", "float16"):
        for kind in kinds:
            cases.append(shape(6, 37, dtype, kind, log=log))
    cases.extend((shape(3, 2000, log=log), shape(3, 2000, "float16", log=log)))
    return tuple(cases)


# --- exercise 2: three kernels --------------------------------------------------------------------

NAIVE_CASES = {
    "sim": (shape(1, 1), shape(3, 5, kind="large"), shape(5, 33, "float16", "masked"),
            shape(4, 17, kind="-inf rows"), shape(2, 70, "float16", "large")),
    "gpu": (shape(1, 1), shape(1000, 5, kind="large"), shape(777, 33, "float16", "masked"),
            shape(300, 100, kind="-inf rows"), shape(64, 4000, "float16", "large"),
            shape(2000, 1024)),
}


# --- exercise 3: warp softmax ---------------------------------------------------------------------

SIM_BLOCK = 64  # threads per block of the simulator's boundary cases: two warps
GPU_BLOCK = 128  # the block of most GPU cases
EDGE_KINDS = ("normal", "masked", "large", "-inf rows")


def _warp_case(rows, cols, dtype="float32", kind="normal", *, pack=None, config=None, grid=0,
               block=32, log=False):
    pack = pack_for(dtype, cols) if pack is None else pack
    per_thread, width, rows_per_thread = config or warp_config(cols, pack)
    return shape(rows, cols, dtype, kind, log=log, grid=grid, block=block,
                 config=(pack, per_thread, width, rows_per_thread))


def _edge_columns(width: int, pack: int) -> tuple[int, ...]:
    """Row lengths at the edge of what ``width`` lanes moving ``pack`` elements each cover
    in one pass: one pack short (the last lane's pack starts at ``cols``: a bound
    ``col <= cols`` reads past the row) and one pack over (a last pass with one pack)."""
    return (width * pack - pack, width * pack + pack)


def _rows_ending_mid_tile(rows_per_warp: int, rows_per_block: int) -> int:
    """A row count whose last row falls inside a warp's tile of rows in the second block,
    one row into a thread's rows (or, with one row per warp, inside the second block)."""
    return rows_per_block + (rows_per_warp // 2 | 1)


def warp_boundary_cases(block: int = SIM_BLOCK) -> tuple[Shape, ...]:
    """Boundary shapes of the warp kernel, from its launch parameters: for each pack size
    (16 bytes of float32 or float16, and 1 where a row is not a multiple of 16 bytes), row
    lengths at the edges of a narrow group's pass (``4 * pack``), of a warp's pass
    (``32 * pack``) and of a lane's second pack (``64 * pack``), in blocks of ``block``
    threads; the rows end inside a warp's tile of rows (even with a grid of one block,
    whose grid-stride loop ends there on its second pass)."""
    cases = []
    for dtype, pack in (("float32", 4), ("float32", 1), ("float16", 8)):
        for width in (4, 32, 64):
            for cols in _edge_columns(width, pack):
                if pack_for(dtype, cols) != pack:
                    continue
                per_thread, group, rows_per_thread = warp_config(cols, pack)
                per_warp = 32 // group * rows_per_thread
                rows = _rows_ending_mid_tile(per_warp, block // group * rows_per_thread)
                k = len(cases)
                cases.append(_warp_case(rows, cols, dtype, EDGE_KINDS[k % 4], block=block,
                                        grid=k % 2, log=k % 3 == 2))
    return tuple(cases)


WARP_CASES = {
    "sim": (
        _warp_case(5, 1, grid=1),
        _warp_case(13, 7, kind="masked", grid=1),
        _warp_case(11, 32, kind="large", grid=1, block=64),
        _warp_case(9, 40, "float16", grid=2),
        _warp_case(5, 100, kind="-inf rows", grid=1),
        _warp_case(4, 33, kind="large", grid=1),
        _warp_case(3, 300, "float16", "masked", grid=2, log=True),
        _warp_case(3, 64, pack=2, config=(2, 32, 1), kind="large", log=True),
        _warp_case(6, 64, config=(4, 16, 2), kind="-inf rows", grid=1, log=True),
        *warp_boundary_cases(),
    ),
    "gpu": (
        _warp_case(1000, 1, block=128),
        _warp_case(4099, 7, kind="masked", block=128),
        _warp_case(3001, 32, kind="large", grid=7, block=128),
        _warp_case(2000, 32, "float16", block=128),
        _warp_case(999, 100, kind="-inf rows", block=128),
        _warp_case(513, 129, kind="large", grid=3, block=128),
        _warp_case(1000, 300, "float16", "masked", block=128, log=True),
        _warp_case(4096, 512, "float16", block=128),
        _warp_case(2000, 1024, kind="large", block=128),
        _warp_case(1500, 1024, "float16", "-inf rows", grid=11, block=128, log=True),
        _warp_case(800, 1000, block=256, log=True),
    ),
}
# On a GPU: the boundary shapes of its launches whose kernels the cases compile anyway (the
# simulator pass of gpu mode runs all of the simulator's).
WARP_CASES["gpu"] += _reusing(warp_boundary_cases(GPU_BLOCK), WARP_CASES["gpu"])


# --- exercises 4 and 5: block kernels -------------------------------------------------------------

def _block_case(rows, cols, dtype="float32", kind="normal", *, pack=None, grid=0, block=32,
                log=False):
    pack = pack_for(dtype, cols) if pack is None else pack
    return shape(rows, cols, dtype, kind, log=log, grid=grid, block=block, config=(pack,))


def block_boundary_cases(blocks=(32, SIM_BLOCK)) -> tuple[Shape, ...]:
    """Boundary shapes of the block kernels, from their launch parameters: for blocks of
    each size in ``blocks`` and each pack size (float16 packs in the first size only),
    rows one pack short of and one pack over what the block's threads cover in one pass
    (``block * pack``); a grid of two blocks whose loop over the rows ends after the first
    block's second row."""
    cases = []
    for block in blocks:
        packs = (("float32", 4), ("float32", 1)) + ((("float16", 8),) if block == blocks[0]
                                                   else ())
        for dtype, pack in packs:
            for cols in _edge_columns(block, pack):
                if pack_for(dtype, cols) != pack:
                    continue
                k = len(cases)
                cases.append(_block_case(3, cols, dtype, EDGE_KINDS[k % 4], grid=2, block=block,
                                         log=k % 3 == 2))
    return tuple(cases)


BLOCK_CASES = {
    "sim": (
        _block_case(2, 1),
        _block_case(3, 7, kind="masked", grid=1),
        _block_case(3, 33, kind="large", block=64),
        _block_case(4, 64, grid=2),
        _block_case(3, 96, "float16", "-inf rows", grid=1),
        _block_case(2, 100, "float16", "large", log=True),
        _block_case(3, 200, kind="masked", grid=1, log=True),
        _block_case(2, 256, pack=2, block=64),
        *block_boundary_cases(),
    ),
    "gpu": (
        _block_case(100, 1, block=128),
        _block_case(300, 7, kind="masked", grid=1, block=128),
        _block_case(500, 1025, kind="large", block=128),
        _block_case(64, 2048, "float16", "-inf rows", grid=5, block=256),
        _block_case(257, 4096, block=512, log=True),
        _block_case(33, 8192, "float16", "masked", block=1024),
        _block_case(20, 16384, kind="large", block=1024),
        _block_case(40, 3000, "float16", block=128, log=True),
    ),
}

UNCACHED_EXTRA = {
    "sim": (_block_case(1, 700, "float16", "masked", block=64),),
    "gpu": (_block_case(8, 70000, "float16", "masked", block=1024),
            _block_case(4, 65536, kind="large", block=512, log=True)),
}

BLOCK_CASES["gpu"] += _reusing(block_boundary_cases((GPU_BLOCK, 2 * GPU_BLOCK)),
                               BLOCK_CASES["gpu"])
UNCACHED_CASES = {m: BLOCK_CASES[m] + UNCACHED_EXTRA[m] for m in ("sim", "gpu")}


# --- exercise 6: dispatcher -------------------------------------------------------------------

def plan_boundary_cases() -> tuple[Shape, ...]:
    """The plan alone (no launch) on each side of each of its decisions: the warp kernel up
    to WARP_MAX_COLS columns (float32 and float16), then float16 uncached, float32 in shared
    memory up to SMEM_LIMIT - 16 KiB bytes of row, uncached past SMEM_LIMIT (in between,
    either)."""
    smem_only = (SMEM_LIMIT - 16 * 1024) // 4
    columns = [(WARP_MAX_COLS, "float32"), (WARP_MAX_COLS + 1, "float32"),
               (WARP_MAX_COLS, "float16"), (WARP_MAX_COLS + 1, "float16"),
               (smem_only, "float32"), (SMEM_LIMIT // 4 + 1, "float32"),
               (SMEM_LIMIT // 4 + 1, "float16")]
    return tuple(shape(2, cols, dtype, kind="plan") for cols, dtype in columns)


def dispatch_cases(log=False) -> dict[str, tuple[Shape, ...]]:
    sim = [shape(3, 1, log=log), shape(5, 7, kind="masked", log=log),
           shape(9, 32, "float16", "large", log=log), shape(2, 100, kind="-inf rows", log=log),
           shape(2, 1030, kind="large", log=log), shape(1, 2048, "float16", "masked", log=log),
           shape(2, 2100, kind="large", log=log), shape(1, 2056, "float16", "masked", log=log)]
    gpu = [shape(1, 1, log=log), shape(1000, 7, kind="masked", log=log),
           shape(3000, 32, "float16", "large", log=log), shape(513, 1000, log=log),
           shape(300, 1024, "float16", "-inf rows", log=log), shape(200, 1025, log=log),
           shape(100, 2048, kind="large", log=log), shape(50, 2050, "float16", log=log),
           shape(64, 4096, "float16", "masked", log=log), shape(32, 16384, kind="large", log=log),
           shape(8, 60000, log=log), shape(4, 100000, "float16", "masked", log=log)]
    if not log:
        sim.append(shape(1, SMEM_LIMIT // 4 + 88, kind="masked"))
        choose = tuple(shape(1, 1, kind="block size", resident=table)
                       for table, _ in BLOCK_TABLES)
        sim = list(choose) + list(plan_boundary_cases()) + sim
        gpu = list(choose) + list(plan_boundary_cases()) + gpu
    return {"sim": tuple(sim), "gpu": tuple(gpu)}


# --- exercise 7: log-softmax --------------------------------------------------------------------

def log_cases() -> dict[str, tuple[Shape, ...]]:
    """log_softmax_cpu's cases, then softmax_gpu(log=True)'s (``calls="softmax_gpu"``)."""
    gpu_part = dispatch_cases(log=True)
    cpu = cpu_cases(log=True)
    wide = (shape(4, 64, "float16", "wide", log=True, calls="softmax_gpu"),)
    return {mode: cpu + wide + tuple(replace(c, calls="softmax_gpu") for c in gpu_part[mode])
            for mode in ("sim", "gpu")}
