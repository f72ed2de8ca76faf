"""Statistics variant: the packed statistics' warp step for warps whose lanes end in several
blobs. Today such a warp makes one shared-memory claim (atomic CAS) and two atomics per lane,
and lanes of one blob hit the same slot one after another. Here the lanes find the blob that
most of them end in (match_any_sync, then a warp max of lanes x 32 + lane), sum and OR that
blob's runs with shuffles, and one lane adds them; the others add their own as before.
Used for the thread shapes of images with fewer, larger blobs (8 and 16 pixels per thread);
the many-blob shape (4 pixels) keeps the lesson's kernel."""
import numpy as np  # noqa: F401
from numba import cuda, int32  # noqa: F401


def make_dominant_stats_kernel(pixels):
    """The lesson's blob_stats_packed_kernel for ``pixels`` pixels per thread, with the warp
    step above."""
    threads = (TILE // pixels) * TILE  # noqa: F821
    slots = TABLE // threads  # noqa: F821
    assert slots * threads == TABLE and threads % 32 == 0  # noqa: F821
    row_labels = ROW_LABELS[pixels]

    @cuda.jit
    def blob_stats_dominant_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum,
                                   ysum):
        keys = cuda.shared.array(TABLE, int32)  # noqa: F821
        sums = cuda.shared.array(TABLE, int64)  # noqa: F821
        masks = cuda.shared.array(TABLE, int64)  # noqa: F821
        t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        for j in range(slots):
            s = t + j * threads
            keys[s] = EMPTY  # noqa: F821
            sums[s] = 0
            masks[s] = 0
        cuda.syncthreads()
        x_tile = cuda.blockIdx.x * TILE  # noqa: F821
        y_tile = cuda.blockIdx.y * TILE  # noqa: F821
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
                        packed_add(keys, sums, masks, current, packed, mask | row_bit)  # noqa: F821
                    current, packed, mask = k, 0, 0
                packed += PACK_AREA + (first + j) * PACK_X + row  # noqa: F821
                mask |= 1 << (first + j)
        mask |= row_bit
        lane = t % 32
        one_blob = cuda.all_sync(FULL_MASK, current == cuda.shfl_sync(FULL_MASK, current, 0))  # noqa: F821,E501
        if one_blob:
            if current >= 0:
                for offset in (16, 8, 4, 2, 1):
                    packed += cuda.shfl_xor_sync(FULL_MASK, packed, offset)  # noqa: F821
                    mask |= cuda.shfl_xor_sync(FULL_MASK, mask, offset)  # noqa: F821
                if lane == 0:
                    packed_add(keys, sums, masks, current, packed, mask)  # noqa: F821
        else:
            peers = cuda.match_any_sync(FULL_MASK, current)  # noqa: F821
            votes = cuda.popc(peers) if current >= 0 else 0
            best = (votes << 5) | lane
            for offset in (16, 8, 4, 2, 1):
                best = max(best, cuda.shfl_xor_sync(FULL_MASK, best, offset))  # noqa: F821
            chosen = cuda.shfl_sync(FULL_MASK, current, best & 31)  # noqa: F821
            if best >> 5 > 1:  # two lanes or more end in one blob: they add once
                mine = current == chosen
                part, part_mask = (packed, mask) if mine else (0, 0)
                for offset in (16, 8, 4, 2, 1):
                    part += cuda.shfl_xor_sync(FULL_MASK, part, offset)  # noqa: F821
                    part_mask |= cuda.shfl_xor_sync(FULL_MASK, part_mask, offset)  # noqa: F821
                if mine:
                    if lane == best & 31:
                        packed_add(keys, sums, masks, current, part, part_mask)  # noqa: F821
                elif current >= 0:
                    packed_add(keys, sums, masks, current, packed, mask)  # noqa: F821
            elif current >= 0:
                packed_add(keys, sums, masks, current, packed, mask)  # noqa: F821
        cuda.syncthreads()
        for j in range(slots):
            s = t + j * threads
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

    return blob_stats_dominant_kernel


def _row_labels_of(kernel):
    """The lesson kernel's row_labels device function (a closure of make_packed_stats_kernel)."""
    def name(value):
        return getattr(getattr(value, "py_func", value), "__name__", "")

    return next(cell.cell_contents for cell in kernel.py_func.__closure__
                if name(cell.cell_contents) == "row_labels")


ROW_LABELS = {pixels: _row_labels_of(kernel) for pixels, kernel in PACKED_STATS.items()}  # noqa: F821,E501
DOMINANT = {pixels: make_dominant_stats_kernel(pixels)
            for pixels in (PIXELS, PIXELS * 2)}  # noqa: F821


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def statistics(self, count, kernel=None):
        if kernel is None:
            chosen = packed_stats_for(count, self.height * self.width)  # noqa: F821
            pixels = next(p for p, k in PACKED_STATS.items() if k is chosen)  # noqa: F821
            if pixels in DOMINANT:
                self.reset(count)
                if count == 0:
                    return self.stats
                h, w = self.height, self.width
                tiles = ((w + TILE - 1) // TILE, (h + TILE - 1) // TILE)  # noqa: F821
                self.launch(("stats dominant", pixels), DOMINANT[pixels], tiles,
                            (TILE // pixels, TILE), self.labels, h, w, *self.fields)  # noqa: F821
                return self.stats
        return super().statistics(count, kernel)
