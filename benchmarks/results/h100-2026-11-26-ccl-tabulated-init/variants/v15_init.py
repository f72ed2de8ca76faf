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


_UNIONS = True
_TX, _TY = BLOCK
_CELLS = 2 * _TX * _TY


@cuda.jit(device=True)
def _jump(parents, ltop, lbottom, top_parent, bottom_parent):
    while True:
        top_next, bottom_next = top_parent, bottom_parent
        if top_parent >= 0:
            top_next = parents[top_parent]
        if bottom_parent >= 0:
            bottom_next = parents[bottom_parent]
        changed = top_next != top_parent or bottom_next != bottom_parent
        cuda.syncthreads()
        parents[ltop] = top_next
        parents[lbottom] = bottom_next
        top_parent, bottom_parent = top_next, bottom_next
        if not cuda.syncthreads_or(1 if changed else 0):
            return top_parent, bottom_parent


@cuda.jit(device=True)
def in_tile_unions(bits, connectivity, tx, ty):
    """The union bits of a block's byte whose other cell lies inside the tile."""
    inner = 0
    if connectivity == 8:
        if tx > 0 and ty > 0:
            inner |= UNION_P
        if ty > 0:
            inner |= UNION_Q
        if ty > 0 and tx < _TX - 1:
            inner |= UNION_R
        if tx > 0:
            inner |= UNION_S
    else:
        if ty > 0:
            inner |= UNION_UP
        if tx > 0:
            inner |= UNION_LEFT_TOP | UNION_LEFT_BOTTOM
    return bits & inner


@cuda.jit(device=True)
def union_cells(j, bits, connectivity, parents, ltop, lbottom):
    """The two local cells of union bit UNION_P << j of a block's byte."""
    if connectivity == 8:
        node = ltop if bits & 3 else lbottom
        if j == 0:
            return node, ltop - _TX - 1
        if j == 1:
            return node, ltop - _TX
        if j == 2:
            return node, ltop - _TX + 1
        return node, (ltop - 1 if parents[ltop - 1] >= 0 else lbottom - 1)
    if j == 0:
        return ltop, ltop - _TX
    if j == 1:
        return ltop, ltop - 1
    return lbottom, lbottom - 1


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity, table):
    parents = cuda.shared.array(_CELLS, int32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    has_bottom = 2 * by + 1 < height
    ltop = 2 * ty * _TX + tx
    lbottom = ltop + _TX
    top_parent = bottom_parent = -1
    bits = 0
    if inside:
        mask = neighbourhood(image, height, width, 2 * by, 2 * bx)
        entry = int32(table[mask | (ty == 0) << 10 | (tx == 0) << 11 | (tx == _TX - 1) << 12])
        bits = entry & 0xFF
        top_parent = decode_parent((entry >> 8) & 7, ltop, ltop, lbottom, _TX)
        if has_bottom:
            bottom_parent = decode_parent((entry >> 11) & 7, lbottom, ltop, lbottom, _TX)
    parents[ltop] = top_parent
    parents[lbottom] = bottom_parent
    cuda.syncthreads()
    top_parent, bottom_parent = _jump(parents, ltop, lbottom, top_parent, bottom_parent)
    if _UNIONS:
        inner = in_tile_unions(bits, connectivity, tx, ty)  # the union bits inside the tile
        bits &= ~inner
        while True:
            high = low = -1  # the first union still joining two trees: its two roots
            for j in range(4):
                if high < 0 and inner & (UNION_P << j):
                    a, b = union_cells(j, bits | inner, connectivity, parents, ltop, lbottom)
                    ra, rb = parents[a], parents[b]
                    if ra != rb:
                        high, low = max(ra, rb), min(ra, rb)
            if not cuda.syncthreads_or(1 if high >= 0 else 0):
                break
            if high >= 0:
                cuda.atomic.min(parents, high, low)
            cuda.syncthreads()
            top_parent, bottom_parent = _jump(parents, ltop, lbottom, parents[ltop],
                                              parents[lbottom])
    if inside:
        links[by * cols + bx] = bits
        top = 2 * by * cols + bx
        base = 2 * cuda.blockIdx.y * _TY * cols + cuda.blockIdx.x * _TX  # local cell 0
        top_root = -1
        if top_parent >= 0:
            top_root = base + (top_parent // _TX) * cols + top_parent % _TX
        roots[top] = top_root
        if top_root == top:
            forest[top] = top
        if has_bottom:
            bottom = top + cols
            bottom_root = -1
            if bottom_parent >= 0:
                bottom_root = base + (bottom_parent // _TX) * cols + bottom_parent % _TX
            roots[bottom] = bottom_root
            if bottom_root == bottom:
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


block_init_compress_kernel = cuda.jit(max_registers=40)(block_init_compress_kernel.py_func)
