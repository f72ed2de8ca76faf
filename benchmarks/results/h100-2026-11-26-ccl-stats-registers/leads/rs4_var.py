"""Resolve variant 4: the thread's four entries of roots in one 128-bit load."""
from numba import cuda, int32, uint64  # noqa: F401
from workbook.vector import load4_int32  # noqa: F401

assert SCAN_ITEMS == 4  # noqa: F821


@cuda.jit
def resolve_rank_kernel(forest, roots, tile_sums, n):
    """resolve_roots_kernel, the flags and block_scan_kernel in one pass over the cells, one
    block per scan tile: a tile root that is not a final root takes its final root; a final
    root's entry becomes -2 - its rank among the final roots of its tile; the tile's count
    of final roots goes to ``tile_sums``. Other entries keep their tile root (or -1)."""
    warp_totals = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    base = cuda.blockIdx.x * SCAN_TILE + t * SCAN_ITEMS
    values = cuda.local.array(SCAN_ITEMS, int32)  # the thread's entries of roots
    if base + SCAN_ITEMS <= n:
        values[0], values[1], values[2], values[3] = load4_int32(roots, base)
    else:
        for j in range(SCAN_ITEMS):
            values[j] = roots[base + j] if base + j < n else -1
    found = 0  # bit j: cell base + j is a final root
    total = 0
    for j in range(SCAN_ITEMS):
        k = base + j
        if values[j] == k:
            root = find_root(forest, k)
            if root == k:
                found |= 1 << j
                total += 1
            else:
                roots[uint64(k)] = root
    inclusive = warp_inclusive_scan(total, lane)
    if lane == 31:
        warp_totals[warp] = inclusive
    cuda.syncthreads()
    if warp == 0:
        warp_total = warp_totals[lane] if lane < cuda.blockDim.x // 32 else 0
        warp_totals[lane] = warp_inclusive_scan(warp_total, lane)
    cuda.syncthreads()
    rank = inclusive - total
    if warp > 0:
        rank += warp_totals[warp - 1]
    for j in range(SCAN_ITEMS):
        if found & (1 << j):
            roots[uint64(base + j)] = -2 - rank
            rank += 1
    if t == cuda.blockDim.x - 1:
        tile_sums[cuda.blockIdx.x] = rank


