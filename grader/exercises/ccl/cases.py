"""Lesson 05's test cases: typed image cases (shape and connectivity) and the scan's sizes.

Simulator sizes stay tiny because every CUDA thread is a Python thread there; images sit one
pixel around the edges of thread blocks and tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grader.exercise import Case

BLOCK = {"sim": (8, 4), "gpu": (32, 8)}  # threads per block (x, y) unless the notebook says


@dataclass(frozen=True)
class ImageCase(Case):
    """A test image: ``kind`` (see :func:`make_image`), its shape and the connectivity."""

    height: int = 1
    width: int = 1
    connectivity: int = 4

    @property
    def shape(self) -> tuple[int, int]:
        return (self.height, self.width)

    def name(self) -> str:
        return (f"n={self.size}, {self.kind}, {self.height}x{self.width}, "
                f"{self.connectivity}-connectivity")


def image_cases(specs: Sequence[tuple[str, tuple[int, int], int]]) -> tuple[ImageCase, ...]:
    """One case per ``(kind, (height, width), connectivity)``."""
    return tuple(ImageCase(h * w, kind, height=h, width=w, connectivity=conn)
                 for kind, (h, w), conn in specs)


def _both(kind, shape):
    return [(kind, shape, 4), (kind, shape, 8)]


# The lesson's tile of the per-block statistics (TILE; its threads cover TILE // PIXELS
# runs of PIXELS pixels in each of TILE rows, so that a warp covers 8 whole rows) in each mode.
STATS_TILE = {"sim": 16, "gpu": 32}


def edge_images(block: tuple[int, int]) -> list[tuple[str, tuple[int, int], int]]:
    """Two images at the edges of a 2-D launch whose blocks (or tiles) cover ``block`` =
    (x, y) pixels: one pixel row past one block row and one pixel short of two block
    columns (the last block's last thread column has no pixel; a bound ``x <= width``
    reads the next row's first pixel), and the transpose of that."""
    bx, by = block
    return [("random 0.5", (by + 1, 2 * bx - 1), 8), ("frame", (2 * by - 1, bx + 1), 4)]


# around one thread block, and around two blocks stacked (8 x 8 pixels)
SIM_EDGES = edge_images(BLOCK["sim"]) + edge_images((BLOCK["sim"][0], 2 * BLOCK["sim"][1]))

SIM_IMAGES = [
    ("random 0.3", (16, 16), 4), ("random 0.3", (12, 16), 8), ("random 0.41", (16, 16), 8),
    ("random 0.59", (16, 16), 4), ("random 0.59", (13, 11), 8), ("spiral", (12, 12), 4),
    ("maze", (13, 13), 8), *_both("checker", (8, 9)), ("comb", (9, 10), 4),
    ("frame", (12, 13), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8),
    ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8), ("full", (1, 1), 4),
    *SIM_EDGES,
]
# fewer images where every case launches several scans or uses many barriers
SIM_FEW = [
    ("random 0.3", (16, 16), 4), ("random 0.59", (13, 11), 8), ("spiral", (12, 12), 4),
    ("checker", (8, 9), 8), ("frame", (12, 13), 4), ("empty", (5, 7), 4),
    ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8), ("full", (1, 1), 4),
    *SIM_EDGES,
]
# the per-block statistics: tiles of STATS_TILE pixels, images one pixel around their edges,
# and warps (8 rows of a tile) whose 32 lanes all hold foreground: of one blob (full, the
# warp's combined update) or each of another blob (a 4-connected checkerboard)
SIM_STATS_BLOCK = [
    *(case for case in SIM_FEW if case not in SIM_EDGES), *edge_images(BLOCK["sim"]),
    *edge_images((STATS_TILE["sim"],) * 2), ("full", (18, 33), 8), ("checker", (16, 18), 4),
    ("random 0.9", (16, 32), 4),
]
GPU_IMAGES = [
    *_both("random 0.3", (1024, 1024)), ("random 0.41", (1024, 1024), 8),
    ("random 0.5", (777, 1023), 4), ("random 0.59", (2048, 2048), 4),
    ("random 0.59", (1001, 999), 8), ("random 0.75", (1024, 1000), 4),
    *_both("spiral", (255, 255)), ("maze", (511, 511), 4), ("maze", (300, 401), 8),
    *_both("checker", (1000, 1001)), *_both("comb", (300, 301)), ("frame", (777, 555), 4),
    ("frame", (512, 512), 8), ("empty", (100, 100), 4), ("full", (1024, 1024), 8),
    ("random 0.6", (1, 100_000), 4), ("random 0.6", (100_000, 1), 8), ("full", (1, 1), 4),
]
# label propagation needs one sweep per pixel of the longest path through a blob
SIM_PROPAGATION = [
    ("random 0.3", (12, 12), 4), ("random 0.41", (10, 10), 8), ("random 0.59", (8, 9), 4),
    ("spiral", (6, 6), 4), ("maze", (7, 7), 8), *_both("checker", (6, 7)), ("comb", (5, 6), 4),
    ("frame", (7, 8), 8), ("empty", (3, 4), 4), ("random 0.6", (1, 12), 4),
    ("random 0.6", (12, 1), 8), ("full", (1, 1), 4), *edge_images(BLOCK["sim"]),
]
GPU_PROPAGATION = [
    *_both("random 0.3", (512, 512)), ("random 0.41", (512, 512), 8),
    ("random 0.59", (256, 256), 4), ("spiral", (63, 63), 4), ("maze", (127, 127), 8),
    *_both("checker", (300, 301)), ("comb", (100, 101), 4), ("frame", (300, 200), 8),
    ("empty", (100, 100), 4), ("random 0.6", (1, 10_000), 4), ("random 0.6", (10_000, 1), 8),
    ("full", (1, 1), 4),
]
# under compute-sanitizer every sweep is slow: the small images, and long single rows/columns
SANITIZER_PROPAGATION = [*SIM_PROPAGATION, ("random 0.6", (1, 10_000), 4),
                         ("random 0.6", (10_000, 1), 8)]
# the block labelling: a thread per 2x2 block, tiles of BLOCK blocks (16 x 8 pixels in the
# simulator, 64 x 16 on a GPU): images one pixel around a tile's edges, staircases and
# diagonals across tile corners, every density, a single pixel
TILE_PIXELS = {mode: (2 * bx, 2 * by) for mode, (bx, by) in BLOCK.items()}
SIM_BLOCKS = [
    ("random 0.1", (16, 16), 8), ("random 0.3", (17, 16), 4), ("random 0.41", (16, 17), 8),
    ("random 0.5", (13, 11), 4), ("random 0.59", (16, 16), 4), ("random 0.59", (15, 13), 8),
    ("random 0.9", (12, 17), 8), ("random 0.9", (11, 12), 4), *_both("staircase", (17, 33)),
    *_both("diagonals", (13, 18)), ("spiral", (12, 12), 4), ("spiral", (13, 14), 8),
    ("maze", (13, 13), 8), *_both("checker", (8, 9)), ("comb", (9, 10), 4),
    ("frame", (12, 13), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8), ("full", (9, 34), 4),
    ("dot", (7, 7), 8), ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8),
    ("full", (1, 1), 4), ("full", (1, 1), 8), ("random 0.7", (1, 33), 8),
    ("random 0.7", (2, 3), 8), *_both("elbows", (17, 33)), *edge_images(TILE_PIXELS["sim"]),
]
GPU_BLOCKS = [
    ("random 0.1", (1024, 1024), 8), ("random 0.3", (1024, 1024), 4),
    ("random 0.41", (1024, 1024), 8), ("random 0.5", (777, 1023), 4),
    ("random 0.59", (2048, 2048), 4), ("random 0.59", (1001, 999), 8),
    *_both("random 0.9", (1023, 1025)), *_both("staircase", (513, 1029)),
    *_both("diagonals", (700, 333)), ("spiral", (255, 255), 4), ("maze", (300, 401), 8),
    *_both("checker", (1000, 1001)), ("comb", (300, 301), 4), ("frame", (777, 555), 8),
    ("empty", (100, 100), 4), ("full", (1024, 1024), 8), ("dot", (99, 77), 8),
    ("random 0.6", (1, 100_000), 4), ("random 0.6", (100_000, 1), 8), ("full", (1, 1), 4),
    ("full", (1, 1), 8), *_both("elbows", (100, 300)), *edge_images(TILE_PIXELS["gpu"]),
]
# pure-Python exercises: the same moderate sizes in both modes
CPU_IMAGES = [
    *_both("random 0.3", (24, 24)), ("random 0.41", (20, 21), 8), ("random 0.59", (32, 32), 4),
    ("random 0.59", (17, 19), 8), *_both("spiral", (15, 15)), ("maze", (21, 21), 4),
    ("maze", (18, 17), 8), *_both("checker", (9, 10)), *_both("comb", (10, 11)),
    ("frame", (12, 13), 4), ("frame", (11, 16), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8),
    ("random 0.6", (1, 40), 4), ("random 0.6", (40, 1), 8), ("full", (1, 1), 4),
]



def _scan_cases(sizes):
    kinds = ("flags", "small integers")
    return tuple(Case(n, kinds[k % 2]) for k, n in enumerate(sizes))


def _modes(sim, gpu) -> dict[str, tuple[ImageCase, ...]]:
    return {"sim": image_cases(sim), "gpu": image_cases(gpu)}


# the cases of each exercise, by mode
CPU_CASES = _modes(CPU_IMAGES, CPU_IMAGES)
PROPAGATION_CASES = _modes(SIM_PROPAGATION, GPU_PROPAGATION)
SANITIZER_PROPAGATION_CASES = image_cases(SANITIZER_PROPAGATION)
IMAGE_CASES = _modes(SIM_IMAGES, GPU_IMAGES)
FEW_IMAGE_CASES = _modes(SIM_FEW, GPU_IMAGES)
STATS_BLOCK_CASES = _modes(SIM_STATS_BLOCK, GPU_IMAGES)
BLOCK_CASES = _modes(SIM_BLOCKS, GPU_BLOCKS)
# exercise 7: arrays of 0/1 flags and of small integers, alternately
SCAN_CASES = {
    "sim": _scan_cases((1, 5, 255, 256, 257, 1100)),
    "gpu": _scan_cases((1, 5, 1000, 4096, 4097, 100_000, 1 << 24, 64 * 1024 * 1024 + 3)),
}
