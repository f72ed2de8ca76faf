"""BlobAnalysis variant: the packed statistics as lesson 05 had them before their table took
32-bit words: one 64-bit sum and one 64-bit mask per slot, whose shared-memory atomics
compile to compare-and-swap loops on Hopper (ATOMS.CAST.SPIN.64). The code below is the
lesson's cell as of commit e4eb15e (a record of what ran), in the three thread shapes, picked
by blobs per pixel as the lesson picks its own. Exec'd into a copy of the lesson's namespace
by ../h200-2026-11-28-ccl-readback-last/run_times.py."""
# ruff: noqa: F821

# Exercise 10's table with its fields packed. A run adds its area and its coordinate sums,
# relative to the tile's corner, as one 64-bit number (area from bit 32, x sum from bit 16, y
# sum from bit 0), and ORs its columns (bits 0-31) and its row (bit 32 + row) into one 64-bit
# mask, whose lowest and highest bits give the bounding box: two shared-memory atomics per
# run, after the slot's claim, instead of seven.
PACK_AREA = 1 << 32
PACK_X = 1 << 16
assert TILE * TILE * (TILE - 1) < PACK_X and TILE <= 32  # a tile's sums and masks fit


@cuda.jit(device=True)
def packed_add(keys, sums, masks, k, packed, mask):
    """table_add for the packed table: claim blob k's slot as exercise 10 does, then add the
    packed sums and OR the mask in."""
    s = k % TABLE
    while True:
        old = cuda.atomic.cas(keys, s, EMPTY, k)
        if old == EMPTY or old == k:
            break
        s = (s + 1) % TABLE
    cuda.atomic.add(sums, s, packed)
    cuda.atomic.or_(masks, s, mask)


def make_packed_stats_kernel(pixels):
    """blob_stats_packed_kernel for ``pixels`` consecutive pixels of a row per thread (a
    compile-time constant: each count is a kernel of its own; TILE // pixels threads per
    row of the tile)."""
    threads = (TILE // pixels) * TILE
    slots = TABLE // threads  # the table's slots that each thread resets and flushes
    assert slots * threads == TABLE and threads % 32 == 0

    @cuda.jit(device=True)
    def row_labels(labels, height, width, y, x, out):
        """labels[y, x:x + pixels] into ``out`` (0 outside the image), with 128-bit loads
        (``load4_int32``) where the pixels lie inside the image and rows start 16-byte
        aligned (width a multiple of 4)."""
        if pixels % 4 == 0 and y < height and x + pixels <= width and width % 4 == 0:
            i = y * width + x
            for j in range(0, pixels, 4):
                out[j], out[j + 1], out[j + 2], out[j + 3] = load4_int32(labels, i + j)
        else:
            for j in range(pixels):
                out[j] = labels[y * width + x + j] if y < height and x + j < width else 0

    @cuda.jit
    def blob_stats_packed_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum,
                                 ysum):
        """Exercise 10's statistics (its tiles, warp step and global atomics) with the packed
        table; the statistics arrays must be reset before. The thread's labels arrive in
        registers (row_labels), and every loop has a constant trip count, so the compiler
        unrolls them: Nsight Compute found exercise 10's loops, in numba's 64-bit index
        arithmetic, to be most of the kernel's instructions."""
        keys = cuda.shared.array(TABLE, int32)
        sums = cuda.shared.array(TABLE, int64)
        masks = cuda.shared.array(TABLE, int64)
        t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x  # lane t % 32 of warp t // 32
        for j in range(slots):
            s = t + j * threads
            keys[s] = EMPTY
            sums[s] = 0
            masks[s] = 0
        cuda.syncthreads()
        x_tile = cuda.blockIdx.x * TILE  # the tile's corner in the image
        y_tile = cuda.blockIdx.y * TILE
        row = cuda.threadIdx.y  # the thread's row and first column in the tile
        first = cuda.threadIdx.x * pixels
        row_bit = 1 << (32 + row)
        found = cuda.local.array(pixels, int32)  # in registers: indexed by constants only
        row_labels(labels, height, width, y_tile + row, x_tile + first, found)
        current = -1
        packed = mask = 0
        for j in range(pixels):
            k = found[j] - 1
            if k >= 0:
                if k != current:
                    if current >= 0:  # a run that ends inside the thread's pixels
                        packed_add(keys, sums, masks, current, packed, mask | row_bit)
                    current, packed, mask = k, 0, 0
                packed += PACK_AREA + (first + j) * PACK_X + row
                mask |= 1 << (first + j)
        mask |= row_bit
        one_blob = cuda.all_sync(FULL_MASK, current == cuda.shfl_sync(FULL_MASK, current, 0))
        if one_blob and current >= 0:  # the warp's runs are one blob's: sum and OR them first
            for offset in (16, 8, 4, 2, 1):
                packed += cuda.shfl_xor_sync(FULL_MASK, packed, offset)
                mask |= cuda.shfl_xor_sync(FULL_MASK, mask, offset)
            if t % 32 == 0:
                packed_add(keys, sums, masks, current, packed, mask)
        elif current >= 0:
            packed_add(keys, sums, masks, current, packed, mask)
        cuda.syncthreads()
        for j in range(slots):
            s = t + j * threads
            k = keys[s]
            if k != EMPTY:
                packed, mask = sums[s], masks[s]
                n = packed >> 32
                columns, rows = mask & 0xFFFFFFFF, (mask >> 32) & 0xFFFFFFFF
                cuda.atomic.add(area, k, int32(n))
                cuda.atomic.min(xmin, k, int32(x_tile + lowest_bit(columns)))
                cuda.atomic.max(xmax, k, int32(x_tile + highest_bit(columns)))
                cuda.atomic.min(ymin, k, int32(y_tile + lowest_bit(rows)))
                cuda.atomic.max(ymax, k, int32(y_tile + highest_bit(rows)))
                cuda.atomic.add(xsum, k, ((packed >> 16) & 0xFFFF) + n * x_tile)
                cuda.atomic.add(ysum, k, (packed & 0xFFFF) + n * y_tile)

    return blob_stats_packed_kernel


_OLD = {pixels: make_packed_stats_kernel(pixels) for pixels in (PIXELS // 2, PIXELS, PIXELS * 2)}
for _pixels, _kernel in _OLD.items():  # the lesson's dict: BlobAnalysis.statistics reads it
    PACKED_STATS_THREADS[_kernel] = (TILE // _pixels, TILE)


_OLD_FOR = dict(zip(PACKED_STATS.values(), _OLD.values()))  # the lesson's kernel -> the old one


def _old_packed_for(blobs, pixels):
    """packed_stats_for's choice, among the old kernels."""
    return _OLD_FOR[packed_stats_for(blobs, pixels)]


class BlobAnalysis(BlobAnalysis):
    def statistics(self, count, kernel=None):
        if kernel is None and count:
            kernel = _old_packed_for(count, self.height * self.width)
        return super().statistics(count, kernel)
