"""Write variant 3: a block row's two labels in one 64-bit store (store2_int32) where the
width is even."""
from numba import cuda, uint64  # noqa: F401
from workbook.vector import store2_int32  # noqa: F401


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
            left = label if bits & (PIXEL_A << 2 * r) else 0
            if x + 1 < width:
                right = label if bits & (PIXEL_B << 2 * r) else 0
                if width % 2 == 0:  # the pair starts 8-byte aligned: one 64-bit store
                    store2_int32(labels, at, left, right)
                else:
                    labels[at] = left
                    labels[at + U1] = right
            else:
                labels[at] = left
    return bits, top_label, bottom_label


@cuda.jit
def block_write_kernel(links, roots, offsets, labels, height, width, connectivity):
    """block_final_kernel for the fused pipeline: the labels only."""
    bx, by = cuda.grid(2)
    if bx < (width + 1) // 2 and 2 * by < height:
        block_labels(links, roots, offsets, labels, height, width, connectivity, bx, by)


