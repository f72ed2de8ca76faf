# The tile of block_init_compress_kernel in shared memory: its 2x2 blocks with a margin of one
# block above, one on the left and one on the right (the pixels the init reads around them)
TILE_ROWS = 2 * (BLOCK[1] + 1)   # pixel rows of the tile's image: a block row above the tile
TILE_WIDTH = 2 * (BLOCK[0] + 2)  # pixel columns: a block column each side
TILE_COLS = BLOCK[0] + 2         # cells per row of the tile's forest
TILE_PIXELS = TILE_ROWS * TILE_WIDTH
TILE_CELLS = TILE_ROWS * TILE_COLS


@cuda.jit(device=True)
def tile_root(forest, k):
    """find_root_atomic on a forest in shared memory: atomic reads, since other threads of
    the block link roots meanwhile (load_relaxed reads global memory only)."""
    parent = cuda.atomic.or_(forest, k, 0)
    while parent != k:
        k = parent
        parent = cuda.atomic.or_(forest, k, 0)
    return k


@cuda.jit(device=True)
def tile_union(forest, a, b):
    """Exercise 6's union on a forest in shared memory."""
    a = tile_root(forest, a)
    b = tile_root(forest, b)
    while a != b:
        if a < b:
            a, b = b, a
        old = cuda.atomic.min(forest, a, b)
        if old == a:
            return
        a = old


@cuda.jit(device=True)
def tile_unions(image, forest, bits, top, connectivity, first_col, first_row, last_col):
    """The unions of ``bits`` whose two blocks are both in the tile, made in the tile's
    forest (block_merge_kernel's joins with local keys); returns the bits left for the
    merge: the unions with a block of another tile."""
    cols = TILE_COLS
    inside = 0
    if connectivity == 8:
        if not first_row:
            inside |= UNION_Q
            if not first_col:
                inside |= UNION_P
            if not last_col:
                inside |= UNION_R
        if not first_col:
            inside |= UNION_S
        todo = bits & inside
        if todo:
            node = top if bits & (PIXEL_A | PIXEL_B) else top + cols
            if todo & UNION_P:
                tile_union(forest, node, top - cols - 1)
            if todo & UNION_Q:
                tile_union(forest, node, top - cols)
            if todo & UNION_R:
                tile_union(forest, node, top - cols + 1)
            if todo & UNION_S:
                # S's top cell if it has a pixel (read from the image: its entry may be a
                # root that other threads are linking), else its bottom cell
                y, x = top // cols, 2 * (top % cols)  # its pixel a in the tile's image
                left_top = pixel(image, y, x - 2, TILE_ROWS, TILE_WIDTH) | \
                    pixel(image, y, x - 1, TILE_ROWS, TILE_WIDTH)
                tile_union(forest, node, top - 1 if left_top else top + cols - 1)
    else:
        if not first_row:
            inside |= UNION_UP
        if not first_col:
            inside |= UNION_LEFT_TOP | UNION_LEFT_BOTTOM
        todo = bits & inside
        if todo & UNION_UP:
            tile_union(forest, top, top - cols)
        if todo & UNION_LEFT_TOP:
            tile_union(forest, top, top - 1)
        if todo & UNION_LEFT_BOTTOM:
            tile_union(forest, top + cols, top + cols - 1)
    return bits & ~inside


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity):
    """block_init_kernel, the unions inside the tile and uf_compress_kernel in one launch, in
    shared memory. The thread block copies its tile of the image (and the pixels around it)
    into shared memory, runs your init there with keys of the tile's own forest, makes the
    unions whose two blocks lie in the tile, walks each cell to its root in the tile and
    stores it in ``roots`` with its key in the image. Only the tile's roots are written to
    ``forest``: the merge and the resolve read no other entry of it. ``links`` keeps the
    unions with other tiles only."""
    tile_image = cuda.shared.array(TILE_PIXELS, np.uint8)
    tile_forest = cuda.shared.array(TILE_CELLS, int32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    # the image's pixel at the tile image's (0, 0): a block up and a block left of the tile
    y0 = 2 * (cuda.blockIdx.y * BLOCK[1] - 1)
    x0 = 2 * (cuda.blockIdx.x * BLOCK[0] - 1)
    for s in range(ty * BLOCK[0] + tx, TILE_PIXELS, THREADS):
        y = y0 + s // TILE_WIDTH
        x = x0 + s % TILE_WIDTH
        tile_image[s] = pixel(image, y, x, height, width)  # 0 outside the image
    cuda.syncthreads()  # the tile's pixels are in: run the init on them
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    first_col, first_row, last_col = tx == 0, ty == 0, tx == BLOCK[0] - 1
    top = 2 * (ty + 1) * TILE_COLS + tx + 1  # the block's top cell in the tile's forest
    bits = 0
    if inside:
        if connectivity == 8:
            bits = init_block_8(tile_image, tile_forest, TILE_ROWS, TILE_WIDTH, ty + 1, tx + 1,
                                first_col, first_row, last_col)
        else:
            bits = init_cells_4(tile_image, tile_forest, TILE_ROWS, TILE_WIDTH, ty + 1, tx + 1,
                                first_col, first_row)
    cuda.syncthreads()  # the tile's links are in: join what they leave apart in the tile
    if inside:
        bits = tile_unions(tile_image, tile_forest, bits, top, connectivity, first_col,
                           first_row, last_col)
        links[by * cols + bx] = bits
    cuda.syncthreads()  # the tile's forest is final: walk it
    if inside:
        for r in range(2):
            k = top + r * TILE_COLS
            y = 2 * by + r
            if y < height:
                key = y * cols + bx
                root = -1
                if tile_forest[k] >= 0:
                    local = find_root(tile_forest, k)
                    root = (y0 + local // TILE_COLS) * cols + bx - tx - 1 + local % TILE_COLS
                roots[key] = root
                if root == key:
                    forest[key] = key


