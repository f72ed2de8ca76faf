"""Prototype: the statistics gathered from the union-find instead of from the labels.

init + compress also sums each tile root's pixels (shared memory, indexed by tile cell) and
stores the partial statistics at the tile root's cell; resolve adds a non-final tile root's
partials into its final root's; the write copies a final root's into stats[k]. No reset, no
statistics pass over the labels. Exec'd into the lesson's namespace."""
from numba import cuda, int32, int64  # noqa: F401

TILE_W = 2 * TILE_COLS        # noqa: F821  pixels across a tile
TILE_H = 2 * BLOCK[1]         # noqa: F821
assert 4 * BLOCK[0] * BLOCK[1] * (TILE_W - 1) < PACK_X and TILE_W <= 64 and TILE_H <= 32  # noqa


@cuda.jit(device=True)
def cell_sums(bits, r, x, y):
    """Row r of a block's pixels (x, y: the block's corner in the tile) as packed sums, a
    64-bit column mask and a row mask."""
    a = 1 if bits & (PIXEL_A << 2 * r) else 0  # noqa: F821
    b = 1 if bits & (PIXEL_B << 2 * r) else 0  # noqa: F821
    n = a + b
    packed = n * PACK_AREA + (a * x + b * (x + 1)) * PACK_X + n * (y + r)  # noqa: F821
    columns = (int64(a) << x) | (int64(b) << (x + 1))
    rows = int32(1 << (y + r)) if n else int32(0)
    return packed, columns, rows


@cuda.jit(device=True)
def lowest_bit_64(bits):
    low = bits & 0xFFFFFFFF
    if low:
        return lowest_bit(low)  # noqa: F821
    return 32 + lowest_bit((bits >> 32) & 0xFFFFFFFF)  # noqa: F821


@cuda.jit(device=True)
def highest_bit_64(bits):
    high = (bits >> 32) & 0xFFFFFFFF
    if high:
        return 32 + highest_bit(high)  # noqa: F821
    return highest_bit(bits & 0xFFFFFFFF)  # noqa: F821


@cuda.jit(device=True)
def add_sums(sums, columns, rows, root, packed, mask, row_mask):
    cuda.atomic.add(sums, root, packed)
    cuda.atomic.or_(columns, root, mask)
    cuda.atomic.or_(rows, root, row_mask)


@cuda.jit(device=True)
def store_partial(cell, key, sums, columns, rows, x0, y0, area, xmin, xmax, ymin, ymax, xsum,
                  ysum):
    packed = sums[cell]
    n = packed >> 32
    mask = columns[cell]
    row_mask = rows[cell]
    area[key] = int32(n)
    xmin[key] = int32(x0 + lowest_bit_64(mask))
    xmax[key] = int32(x0 + highest_bit_64(mask))
    ymin[key] = int32(y0 + lowest_bit(row_mask))  # noqa: F821
    ymax[key] = int32(y0 + highest_bit(row_mask))  # noqa: F821
    xsum[key] = ((packed >> 16) & 0xFFFF) + n * x0
    ysum[key] = (packed & 0xFFFF) + n * y0


@cuda.jit
def block_init_compress_kernel(image, roots, forest, links, height, width, connectivity,
                               table, area, xmin, xmax, ymin, ymax, xsum, ysum):
    parents = cuda.shared.array(TILE_CELLS, int32)  # noqa: F821
    sums = cuda.shared.array(TILE_CELLS, int64)  # noqa: F821
    columns = cuda.shared.array(TILE_CELLS, int64)  # noqa: F821
    rows = cuda.shared.array(TILE_CELLS, int32)  # noqa: F821
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    inside = bx < cols and 2 * by < height
    has_bottom = 2 * by + 1 < height
    top = 2 * ty * TILE_COLS + tx  # noqa: F821
    bottom = top + TILE_COLS  # noqa: F821
    top_parent = bottom_parent = -1
    bits = 0
    if inside:
        flags = (ty == 0) << 10 | (tx == 0) << 11 | (tx == TILE_COLS - 1) << 12  # noqa: F821
        entry = int32(table[neighbourhood(image, height, width, 2 * by, 2 * bx) | flags])  # noqa
        bits = entry & 0xFF
        top_parent = decode_parent((entry >> 8) & 7, top, top, bottom, TILE_COLS)  # noqa: F821
        if has_bottom:
            bottom_parent = decode_parent((entry >> 11) & 7, bottom, top, bottom, TILE_COLS)  # noqa
    parents[top] = top_parent
    parents[bottom] = bottom_parent
    sums[top] = sums[bottom] = 0
    columns[top] = columns[bottom] = 0
    rows[top] = rows[bottom] = 0
    cuda.syncthreads()
    top_parent, bottom_parent = jump_to_roots(parents, top, bottom, top_parent, bottom_parent)  # noqa
    pixels = bits & 0xF
    joins = in_tile_unions(bits, connectivity, tx, ty)  # noqa: F821
    bits &= ~joins
    while True:
        high = low = -1
        for j in range(4):
            if high < 0 and joins & (UNION_P << j):  # noqa: F821
                a, b = union_cells(j, bits | joins, connectivity, parents, top, bottom)  # noqa
                if parents[a] != parents[b]:
                    high, low = max(parents[a], parents[b]), min(parents[a], parents[b])
        if not cuda.syncthreads_or(1 if high >= 0 else 0):
            break
        if high >= 0:
            cuda.atomic.min(parents, high, low)
        cuda.syncthreads()
        top_parent, bottom_parent = jump_to_roots(parents, top, bottom, parents[top],  # noqa
                                                  parents[bottom])
    # the statistics of the tile's trees: each cell's pixels added at its tile root
    x, y = 2 * tx, 2 * ty
    top_root = top_parent if pixels & (PIXEL_A | PIXEL_B) else -1  # noqa: F821
    bottom_root = -1
    if pixels & (PIXEL_C | PIXEL_D):  # noqa: F821
        bottom_root = top_root if connectivity == 8 and top_root >= 0 else bottom_parent
    p_top, c_top, r_top = cell_sums(pixels, 0, x, y)
    p_bottom, c_bottom, r_bottom = cell_sums(pixels, 1, x, y)
    if bottom_root == top_root:
        p_top += p_bottom
        c_top |= c_bottom
        r_top |= r_bottom
        bottom_root = -1
        p_bottom = 0
        c_bottom = 0
        r_bottom = 0
    blob = max(top_root, bottom_root)
    for offset in (16, 8, 4, 2, 1):
        blob = max(blob, cuda.shfl_xor_sync(FULL_MASK, blob, offset))  # noqa: F821
    one_blob = cuda.all_sync(FULL_MASK, (top_root < 0 or top_root == blob)  # noqa: F821
                             and (bottom_root < 0 or bottom_root == blob))
    if one_blob and blob >= 0:
        packed = p_top + p_bottom
        mask = c_top | c_bottom
        row_mask = r_top | r_bottom
        for offset in (16, 8, 4, 2, 1):
            packed += cuda.shfl_xor_sync(FULL_MASK, packed, offset)  # noqa: F821
            mask |= cuda.shfl_xor_sync(FULL_MASK, mask, offset)  # noqa: F821
            row_mask |= cuda.shfl_xor_sync(FULL_MASK, row_mask, offset)  # noqa: F821
        if (ty * cuda.blockDim.x + tx) % 32 == 0:
            add_sums(sums, columns, rows, blob, packed, mask, row_mask)
    else:
        if top_root >= 0:
            add_sums(sums, columns, rows, top_root, p_top, c_top, r_top)
        if bottom_root >= 0:
            add_sums(sums, columns, rows, bottom_root, p_bottom, c_bottom, r_bottom)
    cuda.syncthreads()
    if inside:
        links[by * cols + bx] = bits
        corner = 2 * cuda.blockIdx.y * BLOCK[1] * cols + cuda.blockIdx.x * TILE_COLS  # noqa
        top_cell = 2 * by * cols + bx
        x0 = cuda.blockIdx.x * TILE_W
        y0 = cuda.blockIdx.y * TILE_H
        store_root(roots, forest, top_cell, top_parent, corner, cols)  # noqa: F821
        if top_parent == top:
            store_partial(top, top_cell, sums, columns, rows, x0, y0, area, xmin, xmax, ymin,
                          ymax, xsum, ysum)
        if has_bottom:
            store_root(roots, forest, top_cell + cols, bottom_parent, corner, cols)  # noqa
            if bottom_parent == bottom:
                store_partial(bottom, top_cell + cols, sums, columns, rows, x0, y0, area, xmin,
                              xmax, ymin, ymax, xsum, ysum)


@cuda.jit(device=True)
def add_partials(area, xmin, xmax, ymin, ymax, xsum, ysum, k, n, x_lo, x_hi, y_lo, y_hi, s_x,
                 s_y):
    cuda.atomic.add(area, k, n)
    cuda.atomic.min(xmin, k, x_lo)
    cuda.atomic.max(xmax, k, x_hi)
    cuda.atomic.min(ymin, k, y_lo)
    cuda.atomic.max(ymax, k, y_hi)
    cuda.atomic.add(xsum, k, s_x)
    cuda.atomic.add(ysum, k, s_y)


@cuda.jit
def resolve_rank_kernel(forest, roots, tile_sums, n, area, xmin, xmax, ymin, ymax, xsum,
                        ysum):
    warp_totals = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    base = cuda.blockIdx.x * SCAN_TILE + t * SCAN_ITEMS  # noqa: F821
    found = 0
    total = 0
    mine = -1  # the final root of the thread's tile roots that are not final roots
    n_ = x_lo = x_hi = y_lo = y_hi = 0
    s_x = s_y = int64(0)
    for j in range(SCAN_ITEMS):  # noqa: F821
        k = base + j
        if k < n and roots[k] == k:
            root = find_root(forest, k)  # noqa: F821
            if root == k:
                found |= 1 << j
                total += 1
            else:
                roots[k] = root
                if mine >= 0 and root != mine:  # a second final root: straight to it
                    add_partials(area, xmin, xmax, ymin, ymax, xsum, ysum, root, area[k],
                                 xmin[k], xmax[k], ymin[k], ymax[k], xsum[k], ysum[k])
                elif mine < 0:
                    mine = root
                    n_, x_lo, x_hi, y_lo, y_hi = area[k], xmin[k], xmax[k], ymin[k], ymax[k]
                    s_x, s_y = xsum[k], ysum[k]
                else:
                    n_ += area[k]
                    x_lo = min(x_lo, xmin[k])
                    x_hi = max(x_hi, xmax[k])
                    y_lo = min(y_lo, ymin[k])
                    y_hi = max(y_hi, ymax[k])
                    s_x += xsum[k]
                    s_y += ysum[k]
    blob = mine
    for offset in (16, 8, 4, 2, 1):
        blob = max(blob, cuda.shfl_xor_sync(FULL_MASK, blob, offset))  # noqa: F821
    if cuda.all_sync(FULL_MASK, mine < 0 or mine == blob) and blob >= 0:  # noqa: F821
        if mine < 0:
            n_, x_lo, x_hi, y_lo, y_hi, s_x, s_y = 0, BIG, -1, BIG, -1, 0, 0  # noqa: F821
        for offset in (16, 8, 4, 2, 1):
            n_ += cuda.shfl_xor_sync(FULL_MASK, n_, offset)  # noqa: F821
            x_lo = min(x_lo, cuda.shfl_xor_sync(FULL_MASK, x_lo, offset))  # noqa: F821
            x_hi = max(x_hi, cuda.shfl_xor_sync(FULL_MASK, x_hi, offset))  # noqa: F821
            y_lo = min(y_lo, cuda.shfl_xor_sync(FULL_MASK, y_lo, offset))  # noqa: F821
            y_hi = max(y_hi, cuda.shfl_xor_sync(FULL_MASK, y_hi, offset))  # noqa: F821
            s_x += cuda.shfl_xor_sync(FULL_MASK, s_x, offset)  # noqa: F821
            s_y += cuda.shfl_xor_sync(FULL_MASK, s_y, offset)  # noqa: F821
        if lane == 0:
            add_partials(area, xmin, xmax, ymin, ymax, xsum, ysum, blob, n_, x_lo, x_hi, y_lo,
                         y_hi, s_x, s_y)
    elif mine >= 0:
        add_partials(area, xmin, xmax, ymin, ymax, xsum, ysum, mine, n_, x_lo, x_hi, y_lo,
                     y_hi, s_x, s_y)
    inclusive = warp_inclusive_scan(total, lane)  # noqa: F821
    if lane == 31:
        warp_totals[warp] = inclusive
    cuda.syncthreads()
    if warp == 0:
        warp_total = warp_totals[lane] if lane < cuda.blockDim.x // 32 else 0
        warp_totals[lane] = warp_inclusive_scan(warp_total, lane)  # noqa: F821
    cuda.syncthreads()
    rank = inclusive - total
    if warp > 0:
        rank += warp_totals[warp - 1]
    for j in range(SCAN_ITEMS):  # noqa: F821
        if found & (1 << j):
            roots[base + j] = -2 - rank
            rank += 1
    if t == cuda.blockDim.x - 1:
        tile_sums[cuda.blockIdx.x] = rank


@cuda.jit(device=True)
def copy_stats(roots, offsets, cell, p_area, p_xmin, p_xmax, p_ymin, p_ymax, p_xsum, p_ysum,
               area, xmin, xmax, ymin, ymax, xsum, ysum):
    value = roots[cell]
    if value < -1:  # a final root: its blob's statistics, complete
        k = offsets[cell // SCAN_TILE] - 2 - value  # noqa: F821
        if k < area.size:
            area[k] = p_area[cell]
            xmin[k] = p_xmin[cell]
            xmax[k] = p_xmax[cell]
            ymin[k] = p_ymin[cell]
            ymax[k] = p_ymax[cell]
            xsum[k] = p_xsum[cell]
            ysum[k] = p_ysum[cell]


@cuda.jit
def block_write_kernel(links, roots, offsets, labels, height, width, connectivity, p_area,
                       p_xmin, p_xmax, p_ymin, p_ymax, p_xsum, p_ysum, area, xmin, xmax, ymin,
                       ymax, xsum, ysum):
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    if bx < cols and 2 * by < height:
        bits, top_label, bottom_label = block_labels(links, roots, offsets, labels, height,  # noqa
                                                     width, connectivity, bx, by)
        top = 2 * by * cols + bx
        if top_label > 0:
            copy_stats(roots, offsets, top, p_area, p_xmin, p_xmax, p_ymin, p_ymax, p_xsum,
                       p_ysum, area, xmin, xmax, ymin, ymax, xsum, ysum)
        if bottom_label > 0 and (bottom_label != top_label or connectivity == 4):
            copy_stats(roots, offsets, top + cols, p_area, p_xmin, p_xmax, p_ymin, p_ymax,
                       p_xsum, p_ysum, area, xmin, xmax, ymin, ymax, xsum, ysum)


class ForestStats(BlobAnalysis):  # noqa: F821
    def __init__(self, height, width):
        super().__init__(height, width)
        self.partials = [cuda.device_array(self.size, np.int64 if "sum" in name else np.int32)  # noqa
                         for name in STAT_FIELDS]  # noqa: F821

    def label_launches(self, d_image, connectivity):
        h, w, n, grid = self.height, self.width, self.size, self.grid
        forest, roots = self.forest, self.roots
        self.connectivity = connectivity
        tile_sums = self.levels[0][0]
        return [
            lambda: self.launch("init", block_init_compress_kernel, grid, BLOCK, d_image,  # noqa
                                roots, forest, self.links, h, w, connectivity,
                                self.tables[connectivity], *self.partials),
            lambda: self.launch("merge", block_merge_kernel, grid, BLOCK, self.links, roots,  # noqa
                                forest, h, w, connectivity),
            lambda: self.launch("resolve", resolve_rank_kernel, tile_sums.size,
                                SCAN_THREADS, forest, roots, tile_sums, n, *self.partials),  # noqa
        ]

    def write_labels(self):
        self.launch("write", block_write_kernel, self.grid, BLOCK, self.links, self.roots,  # noqa
                    self.levels[0][1], self.labels, self.height, self.width,
                    self.connectivity, *self.partials, *self.fields)

    def run(self, d_image, connectivity, kernel=None):
        self.label(d_image, connectivity)
        self.count()
        stream = cuda.default_stream()
        self.total.copy_to_host(self.total_host, stream=stream)
        self.counted.record(stream)
        self.write_labels()
        self.counted.synchronize()
        count = int(self.total_host[0])
        if count > self.fields[0].size:
            self.reserve(count)
            self.write_labels()
        return count
