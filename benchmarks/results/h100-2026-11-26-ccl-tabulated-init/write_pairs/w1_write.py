# block_write_kernel with each row's two labels stored as one 64-bit number (even widths)
@cuda.jit
def block_write_pairs_kernel(links, roots, offsets, pairs, height, width, connectivity):
    bx, by = cuda.grid(2)
    cols = width // 2
    if bx >= cols or 2 * by >= height:
        return
    bits = links[by * cols + bx]
    top = 2 * by * cols + bx
    top_label = bottom_label = 0
    if bits & (PIXEL_A | PIXEL_B):
        top_label = cell_label(roots, offsets, top)
    if bits & (PIXEL_C | PIXEL_D):
        if connectivity == 8 and top_label > 0:
            bottom_label = top_label
        else:
            bottom_label = cell_label(roots, offsets, top + cols)
    low = top_label if bits & PIXEL_A else 0
    high = top_label if bits & PIXEL_B else 0
    pairs[top] = int64(high) << 32 | int64(low)
    if 2 * by + 1 < height:
        low = bottom_label if bits & PIXEL_C else 0
        high = bottom_label if bits & PIXEL_D else 0
        pairs[top + cols] = int64(high) << 32 | int64(low)
