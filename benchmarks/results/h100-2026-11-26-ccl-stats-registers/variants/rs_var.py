"""Prototype: resolve_rank_kernel reading its four cells of roots with one 128-bit load."""
from numba import cuda, int32  # noqa: F401
from workbook.vector import load4_int32

assert SCAN_ITEMS == 4  # noqa: F821


@cuda.jit
def resolve_rank_kernel(forest, roots, tile_sums, n):
    warp_totals = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    base = cuda.blockIdx.x * SCAN_TILE + t * SCAN_ITEMS  # noqa: F821
    values = cuda.local.array(SCAN_ITEMS, int32)  # noqa: F821
    if base + SCAN_ITEMS <= n:  # noqa: F821
        values[0], values[1], values[2], values[3] = load4_int32(roots, base)
    else:
        for j in range(SCAN_ITEMS):  # noqa: F821
            values[j] = roots[base + j] if base + j < n else -1
    found = 0
    total = 0
    for j in range(SCAN_ITEMS):  # noqa: F821
        k = base + j
        if values[j] == k:
            root = find_root(forest, k)  # noqa: F821
            if root == k:
                found |= 1 << j
                total += 1
            else:
                roots[k] = root
    inclusive = warp_inclusive_scan(total, lane)  # noqa: F821
    if lane == 31:
        warp_totals[warp] = inclusive
    cuda.syncthreads()
    if warp == 0:
        warp_total = warp_totals[lane] if lane < cuda.blockDim.x // 32 else 0
        warp_totals[lane] = warp_inclusive_scan(warp_total, lane)  # noqa: F821
    cuda.syncthreads()
    rank = inclusive - total
    if warp > 0:
        rank += warp_totals[warp - 1]
    for j in range(SCAN_ITEMS):  # noqa: F821
        if found & (1 << j):
            roots[base + j] = -2 - rank
            rank += 1
    if t == cuda.blockDim.x - 1:
        tile_sums[cuda.blockIdx.x] = rank
