# init + compress with the init tabulated: the lesson's init functions run once per
# neighbourhood (10 pixels) and tile position (3 flags); the kernel reads the 10 pixels, looks
# its block up and decodes the two parents.
from numba import uint8 as _u8

_ENTRIES = 1 << 13  # 10 pixel bits, first_row, first_col, last_col


@cuda.jit
def tabulate_init_kernel(table, connectivity):
    """table[i]: the init of a block whose neighbourhood and tile flags are index i; bits 0-7
    its byte of links, bits 8-10 its top cell's parent, bits 11-13 its bottom cell's (codes:
    0 none, 1 itself, 2 the top cell, 3 P's bottom cell, 4 the cell above the top cell,
    5 R's bottom cell, 6 the top cell's left cell, 7 the bottom cell's left cell)."""
    i = cuda.grid(1)
    if i >= _ENTRIES:
        return
    image = cuda.local.array(24, _u8)  # 4 rows x 6 columns; the block at rows 2-3, columns 2-3
    forest = cuda.local.array(12, int32)  # 4 rows x 3 cells
    for j in range(24):
        image[j] = 0
    for j in range(12):
        forest[j] = -9
    for c in range(4):  # the row above: columns x - 1 .. x + 2
        image[6 + 1 + c] = (i >> c) & 1
    for c in range(3):  # the block's rows: columns x - 1 .. x + 1
        image[12 + 1 + c] = (i >> (4 + c)) & 1
        image[18 + 1 + c] = (i >> (7 + c)) & 1
    first_row = (i >> 10) & 1 == 1
    first_col = (i >> 11) & 1 == 1
    last_col = (i >> 12) & 1 == 1
    if connectivity == 8:
        bits = init_block_8(image, forest, 4, 6, 1, 1, first_col, first_row, last_col)
    else:
        bits = init_cells_4(image, forest, 4, 6, 1, 1, first_col, first_row)
    entry = bits
    for shift, value in ((8, forest[7]), (11, forest[10])):
        code = 8  # unexpected: fails the check below
        if value == -1:
            code = 0
        elif value == 7:
            code = 1 if shift == 8 else 2
        elif value == 10 and shift == 11:
            code = 1
        elif value == 3:
            code = 3
        elif value == 4:
            code = 4
        elif value == 5:
            code = 5
        elif value == 6:
            code = 6
        elif value == 9:
            code = 7
        entry |= code << shift
    table[i] = entry


@cuda.jit(device=True)
def decode_parent(code, cell, top, bottom, cols):
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
def neighbourhood(image, height, width, y, x):
    """The 10 pixels around block (y, x) as bits: the row above (x - 1 .. x + 2), then the
    block's two rows (x - 1 .. x + 1 each)."""
    mask = 0
    if y >= 1 and y + 1 < height and x >= 1 and x + 2 < width:
        above = (y - 1) * width + x - 1
        mid = above + width
        low = mid + width
        mask = ((image[above] != 0) | (image[above + 1] != 0) << 1 | (image[above + 2] != 0) << 2
                | (image[above + 3] != 0) << 3 | (image[mid] != 0) << 4
                | (image[mid + 1] != 0) << 5 | (image[mid + 2] != 0) << 6
                | (image[low] != 0) << 7 | (image[low + 1] != 0) << 8
                | (image[low + 2] != 0) << 9)
    else:
        for c in range(4):
            mask |= pixel(image, y - 1, x - 1 + c, height, width) << c
        for c in range(3):
            mask |= pixel(image, y, x - 1 + c, height, width) << (4 + c)
            mask |= pixel(image, y + 1, x - 1 + c, height, width) << (7 + c)
    return mask


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity, table):
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    top = 2 * by * cols + bx
    bottom = top + cols
    has_bottom = 2 * by + 1 < height
    top_parent = bottom_parent = -1
    if inside:
        mask = neighbourhood(image, height, width, 2 * by, 2 * bx)
        index = (mask | (cuda.threadIdx.y == 0) << 10 | (cuda.threadIdx.x == 0) << 11
                 | (cuda.threadIdx.x == cuda.blockDim.x - 1) << 12)
        entry = table[index]
        links[by * cols + bx] = entry & 0xFF
        top_parent = decode_parent((entry >> 8) & 7, top, top, bottom, cols)
        roots[top] = top_parent
        if has_bottom:
            bottom_parent = decode_parent((entry >> 11) & 7, bottom, top, bottom, cols)
            roots[bottom] = bottom_parent
    cuda.syncthreads()  # the tile's links are written: jump along them
    while True:
        top_next, bottom_next = top_parent, bottom_parent
        if top_parent >= 0:
            top_next = roots[top_parent]
        if bottom_parent >= 0:
            bottom_next = roots[bottom_parent]
        changed = top_next != top_parent or bottom_next != bottom_parent
        cuda.syncthreads()
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


_tables = {}


def init_table(connectivity):
    table = _tables.get(connectivity)
    if table is None:
        table = _tables[connectivity] = cuda.device_array(_ENTRIES, np.uint16)
        tabulate_init_kernel[(_ENTRIES + 255) // 256, 256](table, connectivity)
        assert not (table.copy_to_host() >> 14).any(), "an init outside the table's codes"
    return table


INIT_EXTRA = lambda connectivity: (init_table(connectivity),)
