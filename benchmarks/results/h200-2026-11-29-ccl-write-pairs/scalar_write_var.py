"""BlobAnalysis variant: the write of the labels as lesson 05 had it before store2_int32, two
32-bit stores per row of a block (block_labels and block_write_kernel as of commit c347d80,
a record of what ran). Exec'd into a copy of the lesson's namespace by
../h200-2026-11-28-ccl-readback-last/run_times.py."""
# ruff: noqa: F821

@cuda.jit(device=True)
def block_labels(links, roots, offsets, labels, height, width, connectivity, bx, by):
    """Writes the labels of block (by, bx)'s pixels; returns its byte of bits and the labels
    of its top and bottom cells. Under 8-connectivity the block is one blob."""
    cols = (width + 1) // 2
    bits = links[uint64(by * cols + bx)]
    top = 2 * by * cols + bx
    top_label = bottom_label = 0
    if bits & (PIXEL_A | PIXEL_B):
        top_label = cell_label(roots, offsets, top)
    if bits & (PIXEL_C | PIXEL_D):
        if connectivity == 8 and top_label > 0:
            bottom_label = top_label
        else:
            bottom_label = cell_label(roots, offsets, top + cols)
    x = 2 * bx
    for r in range(2):
        y = 2 * by + r
        if y < height:
            label = top_label if r == 0 else bottom_label
            at = uint64(y * width + x)
            labels[at] = label if bits & (PIXEL_A << 2 * r) else 0
            if x + 1 < width:
                labels[at + U1] = label if bits & (PIXEL_B << 2 * r) else 0
    return bits, top_label, bottom_label


@cuda.jit
def block_write_kernel(links, roots, offsets, labels, height, width, connectivity):
    """block_final_kernel for the fused pipeline: the labels only."""
    bx, by = cuda.grid(2)
    if bx < (width + 1) // 2 and 2 * by < height:
        block_labels(links, roots, offsets, labels, height, width, connectivity, bx, by)


_scalar_write = block_write_kernel


class BlobAnalysis(BlobAnalysis):
    def write_labels(self):
        if self.labelling != "blocks":
            return super().write_labels()
        self.launch(("write", "scalar"), _scalar_write, self.grid, BLOCK, self.links,
                    self.roots, self.levels[0][1], self.labels, self.height, self.width,
                    self.connectivity)
