"""BlobAnalysis variant: the packed statistics flush a blob that lies wholly inside its tile
(no pixel on a tile edge that has a neighbour tile) with plain stores, not global atomics:
no other tile holds any of its pixels, so no other thread writes its entry. Blobs that touch
such an edge keep the seven atomics. Exec'd into the lesson's namespace by run_times.py."""


def make_interior_stats_kernel(pixels):
    threads = (TILE // pixels) * TILE
    slots = TABLE // threads
    edge_bits = 1 | (1 << (TILE - 1))  # a tile's first and last column (or row)

    @cuda.jit(device=True)
    def row_labels(labels, height, width, y, x, out):
        if pixels % 4 == 0 and y < height and x + pixels <= width and width % 4 == 0:
            i = y * width + x
            for j in range(0, pixels, 4):
                out[j], out[j + 1], out[j + 2], out[j + 3] = load4_int32(labels, i + j)
        else:
            for j in range(pixels):
                out[j] = labels[y * width + x + j] if y < height and x + j < width else 0

    @cuda.jit
    def kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
        keys = cuda.shared.array(TABLE, int32)
        sums = cuda.shared.array(TABLE, int64)
        masks = cuda.shared.array(TABLE, int64)
        t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        for j in range(slots):
            s = t + j * threads
            keys[s] = EMPTY
            sums[s] = 0
            masks[s] = 0
        cuda.syncthreads()
        x_tile = cuda.blockIdx.x * TILE
        y_tile = cuda.blockIdx.y * TILE
        row = cuda.threadIdx.y
        first = cuda.threadIdx.x * pixels
        row_bit = 1 << (32 + row)
        found = cuda.local.array(pixels, int32)
        row_labels(labels, height, width, y_tile + row, x_tile + first, found)
        current = -1
        packed = mask = 0
        for j in range(pixels):
            k = found[j] - 1
            if k >= 0:
                if k != current:
                    if current >= 0:
                        packed_add(keys, sums, masks, current, packed, mask | row_bit)
                    current, packed, mask = k, 0, 0
                packed += PACK_AREA + (first + j) * PACK_X + row
                mask |= 1 << (first + j)
        mask |= row_bit
        one_blob = cuda.all_sync(FULL_MASK, current == cuda.shfl_sync(FULL_MASK, current, 0))
        if one_blob and current >= 0:
            for offset in (16, 8, 4, 2, 1):
                packed += cuda.shfl_xor_sync(FULL_MASK, packed, offset)
                mask |= cuda.shfl_xor_sync(FULL_MASK, mask, offset)
            if t % 32 == 0:
                packed_add(keys, sums, masks, current, packed, mask)
        elif current >= 0:
            packed_add(keys, sums, masks, current, packed, mask)
        cuda.syncthreads()
        # the tile's edges that another tile lies beyond
        cross_cols = (1 if x_tile > 0 else 0) | ((1 << (TILE - 1)) if x_tile + TILE < width
                                                  else 0)
        cross_rows = (1 if y_tile > 0 else 0) | ((1 << (TILE - 1)) if y_tile + TILE < height
                                                  else 0)
        for j in range(slots):
            s = t + j * threads
            k = keys[s]
            if k != EMPTY:
                packed, mask = sums[s], masks[s]
                n = packed >> 32
                columns, rows = mask & 0xFFFFFFFF, (mask >> 32) & 0xFFFFFFFF
                x_lo = int32(x_tile + lowest_bit(columns))
                x_hi = int32(x_tile + highest_bit(columns))
                y_lo = int32(y_tile + lowest_bit(rows))
                y_hi = int32(y_tile + highest_bit(rows))
                xs = ((packed >> 16) & 0xFFFF) + n * x_tile
                ys = (packed & 0xFFFF) + n * y_tile
                if (columns & cross_cols) == 0 and (rows & cross_rows) == 0:
                    area[k] = int32(n)  # the blob's only tile: plain stores
                    xmin[k] = x_lo
                    xmax[k] = x_hi
                    ymin[k] = y_lo
                    ymax[k] = y_hi
                    xsum[k] = xs
                    ysum[k] = ys
                else:
                    cuda.atomic.add(area, k, int32(n))
                    cuda.atomic.min(xmin, k, x_lo)
                    cuda.atomic.max(xmax, k, x_hi)
                    cuda.atomic.min(ymin, k, y_lo)
                    cuda.atomic.max(ymax, k, y_hi)
                    cuda.atomic.add(xsum, k, xs)
                    cuda.atomic.add(ysum, k, ys)

    assert edge_bits  # (documents the edges' bits)
    return kernel


INTERIOR_STATS = {lesson_kernel: make_interior_stats_kernel(pixels)
                  for pixels, lesson_kernel in PACKED_STATS.items()}


class BlobAnalysis(BlobAnalysis):  # noqa: F821  (the lesson's, in the namespace)
    def statistics(self, count, kernel=None):
        self.reset(count)
        if count == 0:
            return self.stats
        h, w = self.height, self.width
        chosen = packed_stats_for(count, h * w)
        tiles = ((w + TILE - 1) // TILE, (h + TILE - 1) // TILE)
        self.launch(("interior stats", chosen), INTERIOR_STATS[chosen], tiles,
                    PACKED_STATS_THREADS[chosen], self.labels, h, w, *self.fields)
        return self.stats
