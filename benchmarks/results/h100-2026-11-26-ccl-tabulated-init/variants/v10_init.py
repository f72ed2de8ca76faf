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
    # in-tile unions in shared memory: hook the larger root under the smaller, jump, repeat
    node = ltop
    if connectivity == 8 and not (bits & 3):
        node = lbottom
    ua0 = ub0 = ua1 = ub1 = ua2 = ub2 = ua3 = ub3 = -1
    if connectivity == 8:
        if bits & UNION_P and tx > 0 and ty > 0:
            ua0, ub0 = node, ltop - _LCOLS - 1
            bits &= ~UNION_P
        if bits & UNION_Q and ty > 0:
            ua1, ub1 = node, ltop - _LCOLS
            bits &= ~UNION_Q
        if bits & UNION_R and ty > 0 and tx < _TX - 1:
            ua2, ub2 = node, ltop - _LCOLS + 1
            bits &= ~UNION_R
        if bits & UNION_S and tx > 0:
            ua3 = node
            ub3 = ltop - 1 if parents[ltop - 1] >= 0 else lbottom - 1
            bits &= ~UNION_S
    else:
        if bits & UNION_LEFT_TOP and tx > 0:
            ua0, ub0 = ltop, ltop - 1
            bits &= ~UNION_LEFT_TOP
        if bits & UNION_LEFT_BOTTOM and tx > 0:
            ua1, ub1 = lbottom, lbottom - 1
            bits &= ~UNION_LEFT_BOTTOM
    if inside:
        links[by * cols + bx] = bits
    while True:
        ra0 = rb0 = ra1 = rb1 = ra2 = rb2 = ra3 = rb3 = -1
        if ua0 >= 0:
            ra0, rb0 = parents[ua0], parents[ub0]
        if ua1 >= 0:
            ra1, rb1 = parents[ua1], parents[ub1]
        if ua2 >= 0:
            ra2, rb2 = parents[ua2], parents[ub2]
        if ua3 >= 0:
            ra3, rb3 = parents[ua3], parents[ub3]
        pending = ra0 != rb0 or ra1 != rb1 or ra2 != rb2 or ra3 != rb3
        if not cuda.syncthreads_or(1 if pending else 0):
            break
        if ra0 != rb0:
            cuda.atomic.min(parents, max(ra0, rb0), min(ra0, rb0))
        if ra1 != rb1:
            cuda.atomic.min(parents, max(ra1, rb1), min(ra1, rb1))
        if ra2 != rb2:
            cuda.atomic.min(parents, max(ra2, rb2), min(ra2, rb2))
        if ra3 != rb3:
            cuda.atomic.min(parents, max(ra3, rb3), min(ra3, rb3))
        cuda.syncthreads()
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
