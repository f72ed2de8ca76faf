@cuda.jit(device=True)
def pixel(image, y, x, height, width):
    """1 if pixel (y, x) lies inside the image and is foreground, else 0."""
    inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
    value = image[y * width + x if inside else 0]
    return 1 if inside & (value != 0) else 0


@cuda.jit(device=True)
def init_cells_4(image, forest, height, width, by, bx, first_col, first_row):
    """4-connectivity: each cell of block (by, bx) links to the cell above, or to the one
    on its left, or is a root; returns the block's byte of pixel and union bits."""
    cols = (width + 1) // 2
    x = 2 * bx
    bits = 0
    for r in range(2):  # the top cell, then the bottom one
        y = 2 * by + r
        if y < height:
            k = y * cols + bx
            a = pixel(image, y, x, height, width)
            b = pixel(image, y, x + 1, height, width)
            parent = -1
            if a | b:
                up = (a & pixel(image, y - 1, x, height, width)) | \
                    (b & pixel(image, y - 1, x + 1, height, width))
                left = a & pixel(image, y, x - 1, height, width)
                # the 2x2 square up-left of a is full: the cell above and the cell on the
                # left are joined through the cell up-left of both
                square = pixel(image, y - 1, x - 1, height, width) & \
                    pixel(image, y - 1, x, height, width)
                up_inside = r == 1 or not first_row  # the top cell's row above: the tile's?
                parent = k
                if up and up_inside:
                    parent = k - cols
                elif left and not first_col:
                    parent = k - 1
                if up and parent != k - cols and not (left and square and parent == k - 1):
                    bits |= UNION_UP
                if left and parent != k - 1 and not (up and square):
                    bits |= UNION_LEFT_TOP if r == 0 else UNION_LEFT_BOTTOM
                bits |= (a | b << 1) << (2 * r)
            forest[k] = parent
    return bits


@cuda.jit(device=True)
def init_block_8(image, forest, height, width, by, bx, first_col, first_row, last_col):
    """8-connectivity: block (by, bx) is one node, its first non-empty cell, linked to its
    first touching neighbour inside the tile; returns its byte of pixel and union bits."""
    cols = (width + 1) // 2
    y, x = 2 * by, 2 * bx
    top = y * cols + bx   # the block's top cell
    bottom = top + cols   # its bottom cell, if y + 1 < height
    ### BEGIN SOLUTION
    a = pixel(image, y, x, height, width)
    b = pixel(image, y, x + 1, height, width)
    c = pixel(image, y + 1, x, height, width)
    d = pixel(image, y + 1, x + 1, height, width)
    if a | b | c | d == 0:
        forest[top] = -1
        if y + 1 < height:
            forest[bottom] = -1
        return 0
    node = top if a | b else bottom
    # the pixels of the neighbour blocks that can touch this block
    pd = pixel(image, y - 1, x - 1, height, width)  # P's bottom-right
    qc = pixel(image, y - 1, x, height, width)      # Q's bottom row
    qd = pixel(image, y - 1, x + 1, height, width)
    rc = pixel(image, y - 1, x + 2, height, width)  # R's bottom-left
    sb = pixel(image, y, x - 1, height, width)      # S's right column
    sd = pixel(image, y + 1, x - 1, height, width)
    to_p = a & pd
    to_q = (a | b) & (qc | qd)
    to_r = b & rc
    to_s = (a | c) & (sb | sd)
    # 1. link to the first touching neighbour inside the tile: a plain store, no atomics
    parent = node
    done_p = done_q = done_r = done_s = False
    if to_p and not first_row and not first_col:
        parent, done_p = top - cols - 1, True
    elif to_q and not first_row:
        parent, done_q = top - cols, True
    elif to_r and not first_row and not last_col:
        parent, done_r = top - cols + 1, True
    elif to_s and not first_col and (sb or node == bottom):
        parent, done_s = (top - 1 if sb else bottom - 1), True
    # 2. a union for each other touching neighbour, unless it touches one already joined
    bits = a | b << 1 | c << 2 | d << 3
    if to_p and not done_p:
        if not ((done_q and qc) or (done_s and sb)):
            bits |= UNION_P
        done_p = True
    if to_q and not done_q:
        if not ((done_p and qc) or (done_r and qd) or (done_s and qc and sb)):
            bits |= UNION_Q
        done_q = True
    if to_r and not done_r:
        if not (done_q and qd):
            bits |= UNION_R
    if to_s and not done_s:
        if not ((done_p and sb) or (done_q and qc and sb)):
            bits |= UNION_S
    forest[node] = parent
    if node == top:
        if y + 1 < height:
            forest[bottom] = top if c | d else -1
    else:
        forest[top] = -1
    return bits
    ### END SOLUTION




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
