"""Write variant 2: block_labels and cell_label with unsigned indices."""
import numpy as np
from numba import cuda, uint64  # noqa: F401

U1 = np.uint64(1)


@cuda.jit(device=True)
def cell_label(roots, offsets, k):
    """Cell k's blob number, 1..K (0: background), once resolve_rank_kernel has run and
    ``offsets`` holds the scanned tile sums: at most two steps to the final root."""
    value = roots[uint64(k)]
    if value == -1:
        return 0
    root = k
    while value >= 0:  # a cell -> its tile root -> that root's final root
        root = value
        value = roots[uint64(root)]
    return offsets[uint64(root // SCAN_TILE)] - 1 - value  # its tile's offset + rank (-2 - value) + 1


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


