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
    cuda.syncthreads()  # the tile's links are written: walk them
    top_root = bottom_root = -1
    if inside:
        if roots[top] >= 0:
            top_root = find_root(roots, top)
        if has_bottom and roots[bottom] >= 0:
            bottom_root = find_root(roots, bottom)
    cuda.syncthreads()  # every walk is done: the links can be overwritten by the roots
    if inside:
        roots[top] = top_root
        if top_root == top:
            forest[top] = top
        if has_bottom:
            roots[bottom] = bottom_root
            if bottom_root == bottom:
                forest[bottom] = bottom




block_init_compress_kernel = cuda.jit(launch_bounds=(256, 6))(block_init_compress_kernel.py_func)
