@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity):
    """block_init_kernel and uf_compress_kernel in one launch. The init's forest is kept in
    ``roots``; after a barrier every thread walks its cells to their roots (inside its tile,
    where the init's links stay), after a second one it stores them. Only the init's roots
    are written to ``forest``: the merge and the resolve read no other entry of it."""
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    top = 2 * by * cols + bx
    bottom = top + cols
    has_bottom = 2 * by + 1 < height
    if inside:
        first_col = cuda.threadIdx.x == 0
        first_row = cuda.threadIdx.y == 0
        last_col = cuda.threadIdx.x == cuda.blockDim.x - 1
        if connectivity == 8:
            bits = init_block_8(image, roots, height, width, by, bx, first_col, first_row,
                                last_col)
        else:
            bits = init_cells_4(image, roots, height, width, by, bx, first_col, first_row)
        links[by * cols + bx] = bits
    cuda.syncthreads()  # the tile's links are written: jump along them
    top_parent = bottom_parent = -1
    if inside:
        top_parent = roots[top]
        if has_bottom:
            bottom_parent = roots[bottom]
    # pointer jumping: each round replaces every parent by its parent's parent, so a chain
    # of n links is followed in log2(n) rounds, all threads in step
    while True:
        top_next, bottom_next = top_parent, bottom_parent
        if top_parent >= 0:
            top_next = roots[top_parent]
        if bottom_parent >= 0:
            bottom_next = roots[bottom_parent]
        changed = top_next != top_parent or bottom_next != bottom_parent
        cuda.syncthreads()  # every read of this round is done
        if inside:
            roots[top] = top_next
            if has_bottom:
                roots[bottom] = bottom_next
        top_parent, bottom_parent = top_next, bottom_next
        if not cuda.syncthreads_or(1 if changed else 0):
            break
    if inside:
        if top_parent == top:
            forest[top] = top
        if has_bottom and bottom_parent == bottom:
            forest[bottom] = bottom
