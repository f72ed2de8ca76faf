"""Variant 20: the fused init's global stores and table lookup indexed unsigned too."""
from numba import cuda, int32, uint64  # noqa: F401


@cuda.jit(device=True)
def store_root(roots, forest, cell, root, corner, cols):
    """``roots[cell]``: the tile root ``root`` (a tile index, or -1) as an image key, for a
    tile whose first cell is ``corner`` in rows of ``cols`` cells; a root keeps its own key in
    ``forest`` too."""
    if root >= 0:
        root = corner + (root // TILE_COLS) * cols + root % TILE_COLS
    roots[uint64(cell)] = root
    if root == cell:
        forest[uint64(cell)] = cell


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity,
                               table):
    """Your init, then the tile's trees joined and compressed, in one launch: the init is
    looked up in ``table`` (init_table), the tile's forest lives in shared memory, the
    pointer jumping makes every parent a root, and the unions whose two cells lie in the
    tile are made there (each hooks the larger root under the smaller with atomic.min,
    then the tile jumps again, until no union joins two trees). ``roots`` gets every cell's
    tile root, ``links`` keeps the unions that cross tiles, and ``forest`` is written at the
    tile roots only: the merge and the resolve read no other entry of it."""
    parents = cuda.shared.array(TILE_CELLS, int32)  # the tile's forest, in tile indices
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    has_bottom = 2 * by + 1 < height
    top = 2 * ty * TILE_COLS + tx  # the block's two cells in the tile
    bottom = top + TILE_COLS
    top_parent = bottom_parent = -1
    bits = 0
    if inside:
        flags = (ty == 0) << 10 | (tx == 0) << 11 | (tx == TILE_COLS - 1) << 12
        entry = int32(table[uint64(neighbourhood(image, height, width, 2 * by, 2 * bx) | flags)])
        bits = entry & 0xFF
        top_parent = decode_parent((entry >> 8) & 7, top, top, bottom, TILE_COLS)
        if has_bottom:
            bottom_parent = decode_parent((entry >> 11) & 7, bottom, top, bottom, TILE_COLS)
    parents[uint64(top)] = top_parent
    parents[uint64(bottom)] = bottom_parent
    cuda.syncthreads()
    top_parent, bottom_parent = jump_to_roots(parents, top, bottom, top_parent, bottom_parent)
    joins = in_tile_unions(bits, connectivity, tx, ty)
    bits &= ~joins  # the merge makes the others
    while True:
        high = low = -1  # the roots of the thread's first union that still joins two trees
        for j in range(4):
            if high < 0 and joins & (UNION_P << j):
                a, b = union_cells(j, bits | joins, connectivity, parents, top, bottom)
                root_a, root_b = parents[uint64(a)], parents[uint64(b)]
                if root_a != root_b:
                    high, low = max(root_a, root_b), min(root_a, root_b)
        if not cuda.syncthreads_or(1 if high >= 0 else 0):  # every read of the round done
            break
        if high >= 0:
            cuda.atomic.min(parents, high, low)  # a root: only atomics write it this round
        cuda.syncthreads()
        top_parent, bottom_parent = jump_to_roots(parents, top, bottom, parents[uint64(top)],
                                                  parents[uint64(bottom)])
    if inside:
        links[uint64(by * cols + bx)] = bits
        corner = 2 * cuda.blockIdx.y * BLOCK[1] * cols + cuda.blockIdx.x * TILE_COLS
        top_cell = 2 * by * cols + bx
        store_root(roots, forest, top_cell, top_parent, corner, cols)
        if has_bottom:
            store_root(roots, forest, top_cell + cols, bottom_parent, corner, cols)


