"""What lesson 03's dispatcher picks, as the grader expects it: the warp kernel's
configuration for a row length, the kernel for a row, the block size for an occupancy."""

from __future__ import annotations

import numpy as np

VECTOR = {"float32": 4, "float16": 8}  # elements in 16 bytes
SMEM_LIMIT = 232448  # bytes one block can use on an H100/H200 (the simulator's estimate)
WARP_MAX_COLS = 2048  # the warp kernel up to here; then float16 goes uncached (measured)
BLOCK_TABLES = (  # resident blocks per SM for 128, 256, 512, 1024 threads -> expected choice
    ((16, 8, 4, 2), 128),
    ((2, 2, 2, 2), 1024),
    ((4, 4, 2, 1), 256),
    ((3, 3, 3, 1), 512),
    ((0, 0, 0, 0), 0),
    ((1, 1, 1, 1), 1024),
)


def warp_config(cols: int, pack: int) -> tuple[int, int, int]:
    """(cols_per_thread, group_width, rows_per_thread), as the lesson's dispatcher picks it."""
    if cols <= 32 * pack:
        width = 1
        while width * pack < cols:
            width *= 2
        return pack, width, 2
    packs = -(-cols // (32 * pack))
    return packs * pack, 32, 1


def pack_for(dtype: str, cols: int) -> int:
    return VECTOR[dtype] if cols % VECTOR[dtype] == 0 else 1


def expected_variant(cols: int, dtype: str) -> tuple[str, ...]:
    """The kernel(s) the dispatcher may pick (near the shared-memory limit, either one)."""
    if cols <= WARP_MAX_COLS:
        return ("warp",)
    if np.dtype(dtype) == np.float16:
        return ("block_uncached",)
    if cols * 4 <= SMEM_LIMIT - 16 * 1024:
        return ("block_smem",)
    if cols * 4 > SMEM_LIMIT:
        return ("block_uncached",)
    return ("block_smem", "block_uncached")
