"""Stats variant 4: the flush's global atomics indexed unsigned."""
from numba import cuda, int32, int64, uint64  # noqa: F401


@cuda.jit
def blob_stats_packed_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
    """Exercise 10's statistics (same tiles, threads, warp step and global atomics) with the
    packed table; the statistics arrays must be reset before. The thread's PIXELS labels
    arrive in registers (row_labels), and every loop has a constant trip count, so the
    compiler unrolls them: Nsight Compute found exercise 10's loops, in numba's 64-bit index
    arithmetic, to be most of the kernel's instructions."""
    keys = cuda.shared.array(TABLE, int32)
    sums = cuda.shared.array(TABLE, int64)
    masks = cuda.shared.array(TABLE, int64)
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x  # lane t % 32 of warp t // 32
    for j in range(SLOTS_PER_THREAD):
        s = t + j * STATS_THREAD_COUNT
        keys[s] = EMPTY
        sums[s] = 0
        masks[s] = 0
    cuda.syncthreads()
    x_tile = cuda.blockIdx.x * TILE  # the tile's corner in the image
    y_tile = cuda.blockIdx.y * TILE
    row = cuda.threadIdx.y  # the thread's row and first column in the tile
    first = cuda.threadIdx.x * PIXELS
    row_bit = 1 << (32 + row)
    pixels = cuda.local.array(PIXELS, int32)  # in registers: indexed by constants only
    row_labels(labels, height, width, y_tile + row, x_tile + first, pixels)
    current = -1
    packed = mask = 0
    for j in range(PIXELS):
        k = pixels[j] - 1
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
    for j in range(SLOTS_PER_THREAD):
        s = t + j * STATS_THREAD_COUNT
        k = keys[s]
        if k != EMPTY:
            packed, mask = sums[s], masks[s]
            n = packed >> 32
            columns, rows = mask & 0xFFFFFFFF, (mask >> 32) & 0xFFFFFFFF
            u = uint64(k)
            cuda.atomic.add(area, u, int32(n))
            cuda.atomic.min(xmin, u, int32(x_tile + lowest_bit(columns)))
            cuda.atomic.max(xmax, u, int32(x_tile + highest_bit(columns)))
            cuda.atomic.min(ymin, u, int32(y_tile + lowest_bit(rows)))
            cuda.atomic.max(ymax, u, int32(y_tile + highest_bit(rows)))
            cuda.atomic.add(xsum, u, ((packed >> 16) & 0xFFFF) + n * x_tile)
            cuda.atomic.add(ysum, u, (packed & 0xFFFF) + n * y_tile)
