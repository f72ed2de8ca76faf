"""Variant 19: block_init_compress_kernel with unsigned indices on its hot paths (the
neighbourhood's loads, the shared forest's reads and writes): numba adds no negative-index
wraparound for an unsigned index."""
import numpy as np
from numba import cuda, int32, uint64  # noqa: F401

U1, U2, U3 = np.uint64(1), np.uint64(2), np.uint64(3)


@cuda.jit(device=True)
def neighbourhood(image, height, width, y, x):
    """The 10 pixels around the block at (y, x) as bits, in the table's order."""
    if y >= 1 and y + 1 < height and x >= 1 and x + 2 < width:  # no pixel outside the image
        above = uint64((y - 1) * width + x - 1)  # unsigned: no negative-index wraparound
        row = above + uint64(width)
        below = row + uint64(width)
        return ((image[above] != 0) | (image[above + U1] != 0) << 1
                | (image[above + U2] != 0) << 2 | (image[above + U3] != 0) << 3
                | (image[row] != 0) << 4 | (image[row + U1] != 0) << 5
                | (image[row + U2] != 0) << 6 | (image[below] != 0) << 7
                | (image[below + U1] != 0) << 8 | (image[below + U2] != 0) << 9)
    bits = 0
    for c in range(4):
        bits |= pixel(image, y - 1, x - 1 + c, height, width) << c
    for c in range(3):
        bits |= pixel(image, y, x - 1 + c, height, width) << (4 + c)
        bits |= pixel(image, y + 1, x - 1 + c, height, width) << (7 + c)
    return bits


@cuda.jit(device=True)
def decode_parent(code, cell, top, bottom, cols):
    """A parent code of the table as a cell index (rows of ``cols`` cells)."""
    if code == 0:
        return -1
    if code == 1:
        return cell
    if code == 2:
        return top
    if code == 6:
        return top - 1
    if code == 7:
        return bottom - 1
    if code == 3:
        return top - cols - 1
    if code == 4:
        return top - cols
    return top - cols + 1


@cuda.jit(device=True)
def jump_to_roots(parents, top, bottom, top_parent, bottom_parent):
    """Pointer jumping in shared memory: each round replaces the parents of the thread's two
    cells by their parents' parents, a barrier between the reads and the writes, until no
    parent of the thread block changes; returns the two roots."""
    while True:
        top_next, bottom_next = top_parent, bottom_parent
        if top_parent >= 0:
            top_next = parents[uint64(top_parent)]
        if bottom_parent >= 0:
            bottom_next = parents[uint64(bottom_parent)]
        changed = top_next != top_parent or bottom_next != bottom_parent
        cuda.syncthreads()  # every read of this round is done: the writes may start
        parents[uint64(top)] = top_next
        parents[uint64(bottom)] = bottom_next
        top_parent, bottom_parent = top_next, bottom_next
        if not cuda.syncthreads_or(1 if changed else 0):  # (an int: a bool does not compile)
            return top_parent, bottom_parent


@cuda.jit(device=True)
def in_tile_unions(bits, connectivity, tx, ty):
    """The union bits of a block's byte whose neighbour lies in the block's own tile."""
    inside = 0
    if connectivity == 8:
        if tx > 0 and ty > 0:
            inside |= UNION_P
        if ty > 0:
            inside |= UNION_Q
        if ty > 0 and tx < TILE_COLS - 1:
            inside |= UNION_R
        if tx > 0:
            inside |= UNION_S
    else:
        if ty > 0:
            inside |= UNION_UP
        if tx > 0:
            inside |= UNION_LEFT_TOP | UNION_LEFT_BOTTOM
    return bits & inside


@cuda.jit(device=True)
def union_cells(j, bits, connectivity, parents, top, bottom):
    """The two tile cells that union bit ``UNION_P << j`` of a block's byte joins (the
    4-connected bits are 16, 32, 64 as well)."""
    if connectivity == 8:
        node = top if bits & (PIXEL_A | PIXEL_B) else bottom
        if j == 0:
            return node, top - TILE_COLS - 1
        if j == 1:
            return node, top - TILE_COLS
        if j == 2:
            return node, top - TILE_COLS + 1
        return node, (top - 1 if parents[top - 1] >= 0 else bottom - 1)
    if j == 0:
        return top, top - TILE_COLS
    if j == 1:
        return top, top - 1
    return bottom, bottom - 1


@cuda.jit(device=True)
def store_root(roots, forest, cell, root, corner, cols):
    """``roots[cell]``: the tile root ``root`` (a tile index, or -1) as an image key, for a
    tile whose first cell is ``corner`` in rows of ``cols`` cells; a root keeps its own key in
    ``forest`` too."""
    if root >= 0:
        root = corner + (root // TILE_COLS) * cols + root % TILE_COLS
    roots[cell] = root
    if root == cell:
        forest[cell] = cell


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
        entry = int32(table[neighbourhood(image, height, width, 2 * by, 2 * bx) | flags])
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
        links[by * cols + bx] = bits
        corner = 2 * cuda.blockIdx.y * BLOCK[1] * cols + cuda.blockIdx.x * TILE_COLS
        top_cell = 2 * by * cols + bx
        store_root(roots, forest, top_cell, top_parent, corner, cols)
        if has_bottom:
            store_root(roots, forest, top_cell + cols, bottom_parent, corner, cols)


