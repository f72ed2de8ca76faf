# init + compress with the tile's pixels staged in shared memory and the pointer jumping done
# there: the lesson's init functions run on local coordinates of a padded copy of the tile.
from numba import uint8 as _u8

_TX, _TY = BLOCK
_LW = 2 * _TX + 4          # local pixel columns: x0 - 2 .. x0 + 2 * TX + 1
_LH = 2 * _TY + 2          # local pixel rows: y0 - 2 .. y0 + 2 * TY - 1
_LCOLS = _LW // 2          # local cells per row
_NPIX = _LH * _LW
_NCELLS = _LH * _LCOLS


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity):
    pixels = cuda.shared.array(_NPIX, _u8)
    parents = cuda.shared.array(_NCELLS, int32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    t = ty * _TX + tx
    x0 = 2 * _TX * cuda.blockIdx.x
    y0 = 2 * _TY * cuda.blockIdx.y
    for i in range(t, _LH * _LW, _TX * _TY):
        ly = i // _LW
        lx = i - ly * _LW
        gy = y0 + ly - 2
        gx = x0 + lx - 2
        v = 0
        if gy >= 0 and gy < height and gx >= 0 and gx < width:
            if image[gy * width + gx] != 0:
                v = 1
        pixels[i] = v
    cuda.syncthreads()
    lbx = tx + 1
    lby = ty + 1
    if connectivity == 8:
        bits = init_block_8(pixels, parents, _LH, _LW, lby, lbx, tx == 0, ty == 0,
                            tx == _TX - 1)
    else:
        bits = init_cells_4(pixels, parents, _LH, _LW, lby, lbx, tx == 0, ty == 0)
    bx = cuda.blockIdx.x * _TX + tx
    by = cuda.blockIdx.y * _TY + ty
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    if inside:
        links[by * cols + bx] = bits
    cuda.syncthreads()
    ltop = 2 * lby * _LCOLS + lbx
    lbottom = ltop + _LCOLS
    top_parent = parents[ltop]
    bottom_parent = parents[lbottom]
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
            break
    if inside:
        top = 2 * by * cols + bx
        bottom = top + cols
        base = (y0 - 2) * cols + cuda.blockIdx.x * _TX - 1  # global cell of local cell 0
        top_root = -1
        if top_parent >= 0:
            r = top_parent // _LCOLS
            top_root = base + r * cols + (top_parent - r * _LCOLS)
        roots[top] = top_root
        if top_root == top:
            forest[top] = top
        if 2 * by + 1 < height:
            bottom_root = -1
            if bottom_parent >= 0:
                r = bottom_parent // _LCOLS
                bottom_root = base + r * cols + (bottom_parent - r * _LCOLS)
            roots[bottom] = bottom_root
            if bottom_root == bottom:
                forest[bottom] = bottom
