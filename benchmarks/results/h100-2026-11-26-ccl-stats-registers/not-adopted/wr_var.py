"""Prototype: the statistics reset by the write (each final root resets its blob's entries),
so run() launches no reset kernel. Exec'd into the lesson's namespace."""
from numba import cuda  # noqa: F401


@cuda.jit
def block_write_reset_kernel(links, roots, offsets, labels, height, width, connectivity, area,
                             xmin, xmax, ymin, ymax, xsum, ysum):
    bx, by = cuda.grid(2)
    cols = (width + 1) // 2
    if bx < cols and 2 * by < height:
        block_labels(links, roots, offsets, labels, height, width, connectivity, bx, by)  # noqa
        top = 2 * by * cols + bx
        for r in range(2):
            if 2 * by + r < height:
                cell = top + r * cols
                value = roots[cell]
                if value < -1:  # a final root: its blob's entries
                    k = offsets[cell // SCAN_TILE] - 2 - value  # noqa: F821
                    if k < area.size:
                        area[k] = 0
                        xmin[k] = BIG  # noqa: F821
                        xmax[k] = -1
                        ymin[k] = BIG  # noqa: F821
                        ymax[k] = -1
                        xsum[k] = 0
                        ysum[k] = 0


class BlobAnalysis(BlobAnalysis):  # noqa: F821
    def run(self, d_image, connectivity, kernel=None):
        self.label(d_image, connectivity)
        self.count()
        stream = cuda.default_stream()
        self.total.copy_to_host(self.total_host, stream=stream)
        self.counted.record(stream)
        self.launch("write reset", block_write_reset_kernel, self.grid, BLOCK, self.links,  # noqa
                    self.roots, self.levels[0][1], self.labels, self.height, self.width,
                    self.connectivity, *self.fields)
        capacity = self.fields[0].size
        self.count_blobs(blob_stats_packed_kernel)  # noqa: F821
        self.counted.synchronize()
        count = int(self.total_host[0])
        if count > capacity:
            self.statistics(count)
        return count
