"""Stats variant 6: 4 pixels per thread (8 threads per row of a 32 x 32 tile, 256 per block):
more threads to hide the table's atomics where blobs are many. Exec'd into the lesson's namespace;
st_run.py also swaps STATS_THREADS, which BlobAnalysis.statistics launches with."""
from numba import cuda, int32, int64  # noqa: F401
from workbook.vector import load4_int32  # noqa: F401

PIXELS = 4  # noqa: F821
STATS_THREADS = (TILE // PIXELS, TILE)  # noqa: F821


STATS_THREAD_COUNT = STATS_THREADS[0] * STATS_THREADS[1]
SLOTS_PER_THREAD = TABLE // STATS_THREAD_COUNT  # the table's slots that each thread resets
assert SLOTS_PER_THREAD * STATS_THREAD_COUNT == TABLE and PIXELS % 4 == 0


@cuda.jit(device=True)
def row_labels(labels, height, width, y, x, out):
    """labels[y, x:x + PIXELS] into ``out`` (0 outside the image), with 128-bit loads
    (``load4_int32``) where the pixels lie inside the image and rows start 16-byte aligned
    (width a multiple of 4)."""
    if y < height and x + PIXELS <= width and width % 4 == 0:
        i = y * width + x
        for j in range(0, PIXELS, 4):
            out[j], out[j + 1], out[j + 2], out[j + 3] = load4_int32(labels, i + j)
    else:
        for j in range(PIXELS):
            out[j] = labels[y * width + x + j] if y < height and x + j < width else 0


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
            cuda.atomic.add(area, k, int32(n))
            cuda.atomic.min(xmin, k, int32(x_tile + lowest_bit(columns)))
            cuda.atomic.max(xmax, k, int32(x_tile + highest_bit(columns)))
            cuda.atomic.min(ymin, k, int32(y_tile + lowest_bit(rows)))
            cuda.atomic.max(ymax, k, int32(y_tile + highest_bit(rows)))
            cuda.atomic.add(xsum, k, ((packed >> 16) & 0xFFFF) + n * x_tile)
            cuda.atomic.add(ysum, k, (packed & 0xFFFF) + n * y_tile)
