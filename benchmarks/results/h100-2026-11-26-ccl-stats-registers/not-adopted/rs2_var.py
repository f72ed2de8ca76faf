"""Prototype: resolve_rank_kernel compressing the paths it walks (each node of a tile root's
path pointed at the final root with atomic.min; the walks read with load_relaxed)."""
from numba import cuda, int32  # noqa: F401
from workbook.atomics import load_relaxed


@cuda.jit(device=True)
def find_root_compressing(forest, k):
    root = k
    parent = load_relaxed(forest, root)
    while parent != root:
        root = parent
        parent = load_relaxed(forest, root)
    i = k
    while i != root:
        following = load_relaxed(forest, i)
        cuda.atomic.min(forest, i, root)
        i = following
    return root


@cuda.jit
def resolve_rank_kernel(forest, roots, tile_sums, n):
    warp_totals = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    base = cuda.blockIdx.x * SCAN_TILE + t * SCAN_ITEMS  # noqa: F821
    found = 0
    total = 0
    for j in range(SCAN_ITEMS):  # noqa: F821
        k = base + j
        if k < n and roots[k] == k:
            root = find_root_compressing(forest, k)
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
