"""Prototype: blob_stats_packed_kernel with fewer instructions: the thread's 8 labels read by
two 128-bit loads into registers, the loops over the pixels and the table's slots unrolled
(constant trip counts). Exec'd into the lesson's namespace."""
from numba import cuda, int32  # noqa: F401
from workbook.vector import load4_int32

STATS_THREAD_COUNT = STATS_THREADS[0] * STATS_THREADS[1]  # noqa: F821
SLOTS_PER_THREAD = TABLE // STATS_THREAD_COUNT  # noqa: F821
assert SLOTS_PER_THREAD * STATS_THREAD_COUNT == TABLE and PIXELS % 4 == 0  # noqa: F821


@cuda.jit(device=True)
def row_labels(labels, height, width, y, x, out):
    """labels[y, x:x + PIXELS] into ``out`` (0 outside the image): 128-bit loads where the
    pixels lie inside the image and width is a multiple of 4."""
    if y < height and x + PIXELS <= width and width % 4 == 0:  # noqa: F821
        i = y * width + x
        for j in range(0, PIXELS, 4):  # noqa: F821
            out[j], out[j + 1], out[j + 2], out[j + 3] = load4_int32(labels, i + j)
    else:
        for j in range(PIXELS):  # noqa: F821
            out[j] = labels[y * width + x + j] if y < height and x + j < width else 0


@cuda.jit
def blob_stats_packed_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
    keys = cuda.shared.array(TABLE, int32)  # noqa: F821
    sums = cuda.shared.array(TABLE, int64)  # noqa: F821
    masks = cuda.shared.array(TABLE, int64)  # noqa: F821
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    for j in range(SLOTS_PER_THREAD):
        s = t + j * STATS_THREAD_COUNT
        keys[s] = EMPTY  # noqa: F821
        sums[s] = 0
        masks[s] = 0
    cuda.syncthreads()
    x_tile = cuda.blockIdx.x * TILE  # noqa: F821
    y_tile = cuda.blockIdx.y * TILE  # noqa: F821
    row = cuda.threadIdx.y
    first = cuda.threadIdx.x * PIXELS  # noqa: F821
    row_bit = 1 << (32 + row)
    run = cuda.local.array(PIXELS, int32)  # noqa: F821
    row_labels(labels, height, width, y_tile + row, x_tile + first, run)
    current = -1
    packed = mask = 0
    for j in range(PIXELS):  # noqa: F821
        k = run[j] - 1
        if k >= 0:
            if k != current:
                if current >= 0:
                    packed_add(keys, sums, masks, current, packed, mask | row_bit)  # noqa: F821
                current, packed, mask = k, 0, 0
            packed += PACK_AREA + (first + j) * PACK_X + row  # noqa: F821
            mask |= 1 << (first + j)
    mask |= row_bit
    one_blob = cuda.all_sync(FULL_MASK, current == cuda.shfl_sync(FULL_MASK, current, 0))  # noqa
    if one_blob and current >= 0:
        for offset in (16, 8, 4, 2, 1):
            packed += cuda.shfl_xor_sync(FULL_MASK, packed, offset)  # noqa: F821
            mask |= cuda.shfl_xor_sync(FULL_MASK, mask, offset)  # noqa: F821
        if t % 32 == 0:
            packed_add(keys, sums, masks, current, packed, mask)  # noqa: F821
    elif current >= 0:
        packed_add(keys, sums, masks, current, packed, mask)  # noqa: F821
    cuda.syncthreads()
    for j in range(SLOTS_PER_THREAD):
        s = t + j * STATS_THREAD_COUNT
        k = keys[s]
        if k != EMPTY:  # noqa: F821
            packed, mask = sums[s], masks[s]
            n = packed >> 32
            columns, rows = mask & 0xFFFFFFFF, (mask >> 32) & 0xFFFFFFFF
            cuda.atomic.add(area, k, int32(n))
            cuda.atomic.min(xmin, k, int32(x_tile + lowest_bit(columns)))  # noqa: F821
            cuda.atomic.max(xmax, k, int32(x_tile + highest_bit(columns)))  # noqa: F821
            cuda.atomic.min(ymin, k, int32(y_tile + lowest_bit(rows)))  # noqa: F821
            cuda.atomic.max(ymax, k, int32(y_tile + highest_bit(rows)))  # noqa: F821
            cuda.atomic.add(xsum, k, ((packed >> 16) & 0xFFFF) + n * x_tile)
            cuda.atomic.add(ysum, k, (packed & 0xFFFF) + n * y_tile)
