"""Where matrix elements live in a warp's registers: ldmatrix, stmatrix and mma fragments.

Reference maps written from the PTX ISA tables, used by the lesson's checks, by
the simulator's emulation of these instructions (:mod:`workbook.sim.foreign`)
and for the pictures.

Conventions: matrices hold 16-bit elements (``uint16``, the bits of float16
values) in row-major order. A 32-bit register holds two of them: the *low*
half (bits 0-15) is the element with the smaller column (or, transposed, row)
index. ``regs[lane, i]`` is register ``i`` of ``lane``.

ldmatrix ``.m8n8.x1/.x2/.x4``
    Matrix ``i`` is read from the 8 row addresses given by lanes ``8i .. 8i+7``
    (lane ``8i + r`` points at row ``r``, 16 contiguous bytes). Lane ``l``
    receives, in register ``i``, row ``l // 4``, columns ``2 (l % 4)`` and
    ``2 (l % 4) + 1`` of matrix ``i``; with ``.trans`` it receives column
    ``l // 4``, rows ``2 (l % 4)`` and ``2 (l % 4) + 1`` instead.
stmatrix
    The inverse: the same map, from registers to memory.
mma ``.m16n8k16`` (float16 inputs, float32 accumulators)
    With ``g = lane // 4`` and ``t = lane % 4``: A (16x16) registers a0..a3 hold
    rows ``g, g+8, g, g+8`` and columns ``2t, 2t+1`` (+8 for a2, a3); B (16x8,
    "col") registers b0, b1 hold rows (k) ``2t, 2t+1`` (+8 for b1) of column
    ``g``; C/D (16x8) registers c0..c3 hold row ``g`` (c0, c1) or ``g+8`` (c2, c3),
    columns ``2t`` and ``2t+1``.
"""

from __future__ import annotations

import numpy as np

WARP = 32
LANES = np.arange(WARP)


def pack(lo, hi) -> np.ndarray:
    """32-bit registers from their low and high 16-bit halves."""
    return np.asarray(lo, np.uint32) | (np.asarray(hi, np.uint32) << np.uint32(16))


def unpack(regs) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) 16-bit halves of 32-bit registers, as uint16."""
    regs = np.asarray(regs, np.uint32)
    return (regs & 0xFFFF).astype(np.uint16), (regs >> 16).astype(np.uint16)


def x1_coords(trans: bool = False) -> np.ndarray:
    """``coords[lane, half] = (row, col)``: the element of an 8x8 matrix that ldmatrix
    puts in ``half`` (0 = low, 1 = high) of ``lane``'s register."""
    coords = np.zeros((WARP, 2, 2), dtype=np.int64)
    for half in (0, 1):
        a, b = LANES // 4, 2 * (LANES % 4) + half
        coords[:, half] = np.stack([b, a] if trans else [a, b], axis=1)
    return coords


def ldmatrix(matrices, trans: bool = False) -> np.ndarray:
    """Registers (32, n) that ldmatrix ``.x{n}`` loads from ``n`` 8x8 uint16 matrices."""
    matrices = [np.asarray(m, np.uint16).reshape(8, 8) for m in matrices]
    c = x1_coords(trans)
    out = np.zeros((WARP, len(matrices)), dtype=np.uint32)
    for i, m in enumerate(matrices):
        out[:, i] = pack(m[c[:, 0, 0], c[:, 0, 1]], m[c[:, 1, 0], c[:, 1, 1]])
    return out


def stmatrix(regs, trans: bool = False) -> list[np.ndarray]:
    """The 8x8 uint16 matrices that stmatrix ``.x{n}`` stores from registers (32, n)."""
    regs = np.asarray(regs, np.uint32).reshape(WARP, -1)
    c = x1_coords(trans)
    matrices = []
    for i in range(regs.shape[1]):
        m = np.zeros((8, 8), dtype=np.uint16)
        lo, hi = unpack(regs[:, i])
        m[c[:, 0, 0], c[:, 0, 1]] = lo
        m[c[:, 1, 0], c[:, 1, 1]] = hi
        matrices.append(m)
    return matrices


# --- mma.m16n8k16 operand fragments ----------------------------------------------------------

def _g_t():
    return LANES // 4, LANES % 4


def a_fragments(a) -> np.ndarray:
    """Registers a0..a3 (32, 4) of the 16x16 A operand (uint16 bits, row-major)."""
    a = np.asarray(a, np.uint16).reshape(16, 16)
    g, t = _g_t()
    regs = np.zeros((WARP, 4), dtype=np.uint32)
    for i, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
        regs[:, i] = pack(a[g + dr, 2 * t + dc], a[g + dr, 2 * t + dc + 1])
    return regs


def a_from_fragments(regs) -> np.ndarray:
    """The 16x16 A operand (uint16) held by registers a0..a3 (32, 4)."""
    regs = np.asarray(regs, np.uint32).reshape(WARP, 4)
    g, t = _g_t()
    a = np.zeros((16, 16), dtype=np.uint16)
    for i, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
        lo, hi = unpack(regs[:, i])
        a[g + dr, 2 * t + dc], a[g + dr, 2 * t + dc + 1] = lo, hi
    return a


def b_fragments(b) -> np.ndarray:
    """Registers b0, b1 (32, 2) of the 16x8 B operand (uint16 bits, row-major: b[k, n])."""
    b = np.asarray(b, np.uint16).reshape(16, 8)
    g, t = _g_t()
    regs = np.zeros((WARP, 2), dtype=np.uint32)
    for i in (0, 1):
        regs[:, i] = pack(b[2 * t + 8 * i, g], b[2 * t + 8 * i + 1, g])
    return regs


def b_from_fragments(regs) -> np.ndarray:
    """The 16x8 B operand (uint16, b[k, n]) held by registers b0, b1 (32, 2)."""
    regs = np.asarray(regs, np.uint32).reshape(WARP, 2)
    g, t = _g_t()
    b = np.zeros((16, 8), dtype=np.uint16)
    for i in (0, 1):
        lo, hi = unpack(regs[:, i])
        b[2 * t + 8 * i, g], b[2 * t + 8 * i + 1, g] = lo, hi
    return b


def c_fragments(c) -> np.ndarray:
    """Registers c0..c3 (32, 4) of a 16x8 float32 accumulator."""
    c = np.asarray(c, np.float32).reshape(16, 8)
    g, t = _g_t()
    regs = np.zeros((WARP, 4), dtype=np.float32)
    for i in range(4):
        regs[:, i] = c[g + 8 * (i // 2), 2 * t + i % 2]
    return regs


def c_from_fragments(regs) -> np.ndarray:
    """The 16x8 float32 accumulator held by registers c0..c3 (32, 4)."""
    regs = np.asarray(regs, np.float32).reshape(WARP, 4)
    g, t = _g_t()
    c = np.zeros((16, 8), dtype=np.float32)
    for i in range(4):
        c[g + 8 * (i // 2), 2 * t + i % 2] = regs[:, i]
    return c


def mma_m16n8k16(a_regs, b_regs, c_regs) -> np.ndarray:
    """D fragments (32, 4) float32 of ``D = A @ B + C`` from the operands' fragments.

    Products of float16 values are exact in float32; the sum is formed in
    float64 and rounded once to float32 (the hardware's internal rounding differs
    by a few units in the last place, which the lesson's tolerance allows for).
    """
    a = a_from_fragments(a_regs).view(np.float16).astype(np.float64)
    b = b_from_fragments(b_regs).view(np.float16).astype(np.float64)
    c = c_from_fragments(c_regs).astype(np.float64)
    return c_fragments((a @ b + c).astype(np.float32))


# --- the lesson's addressing, bank groups, swizzle -----------------------------------------

def x4_a_rows(lane):
    """(row, column) of the 16x16 A tile whose address lane ``lane`` gives to ldmatrix .x4,
    so that registers 0..3 are mma's a0..a3."""
    lane = np.asarray(lane)
    return lane % 16, 8 * (lane // 16)


def swizzle_chunk(row, chunk):
    """The XOR swizzle of 16-byte chunks in rows of 128 bytes: chunk ``chunk ^ (row % 8)``."""
    return np.bitwise_xor(chunk, np.asarray(row) % 8)


def wavefronts(row_addresses) -> int:
    """Shared-memory wavefronts one 8x8 matrix of ldmatrix/stmatrix needs.

    Each of the 8 rows is 16 bytes (4 of the 32 four-byte banks). Rows in the same
    group of 4 banks (``address // 16 % 8``) at different addresses are served one
    after another: the count is the largest number of distinct rows in one group.
    1 is conflict-free; 8 is an 8-way conflict.
    """
    groups: dict[int, set] = {}
    for address in row_addresses:
        groups.setdefault(int(address) // 16 % 8, set()).add(int(address) // 16)
    return max(len(rows) for rows in groups.values())


# --- pictures ------------------------------------------------------------------------------

def owners(regs, shape) -> dict[str, np.ndarray]:
    """Which lane, register and half received each element of a matrix of ``shape``.

    ``regs`` (32, n) are the registers a kernel returned after loading a matrix whose
    element ``(r, c)`` holds the value ``r * cols + c``. Elements no lane received
    have lane -1.
    """
    rows, cols = shape
    lane = np.full(shape, -1)
    reg = np.full(shape, -1)
    half = np.full(shape, -1)
    regs = np.asarray(regs, np.uint32).reshape(WARP, -1)
    for ln in range(WARP):
        for i in range(regs.shape[1]):
            for h, value in enumerate(unpack(regs[ln, i])):
                v = int(value)
                if v < rows * cols:
                    lane[v // cols, v % cols], reg[v // cols, v % cols] = ln, i
                    half[v // cols, v % cols] = h
    return {"lane": lane, "reg": reg, "half": half}


def draw_owners(regs, shape, ax=None, title: str = "", show_reg: bool = False):
    """Draw the matrix with each element labelled by the lane that received it.

    Colours group the 4 lanes that share a row of a fragment (lanes 4g .. 4g+3).
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    own = owners(regs, shape)
    rows, cols = shape
    colours = plt.get_cmap("tab10")
    for r in range(rows):
        for c in range(cols):
            ln = own["lane"][r, c]
            face = colours(ln // 4 % 10) if ln >= 0 else (0.9, 0.9, 0.9)
            ax.add_patch(plt.Rectangle((c, r), 1, 1, facecolor=face, edgecolor="white",
                                       alpha=0.55))
            if ln >= 0:
                label = f"T{ln}"
                if show_reg:
                    label += f"\nr{own['reg'][r, c]}"
                ax.text(c + 0.5, r + 0.5, label, ha="center", va="center",
                        fontsize=7 if show_reg else 8)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks(np.arange(cols) + 0.5, [str(c) for c in range(cols)], fontsize=7)
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)], fontsize=7)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_aspect("equal")
    if title:
        ax.set_title(title)
    return ax


def draw_bank_groups(swizzled: bool, ax=None, rows: int = 8, chunks: int = 8):
    """Rows of 128 bytes (8 chunks of 16 bytes): which bank group each chunk uses.

    The chunks that hold logical column block 0 (what one 8x8 ldmatrix matrix reads)
    are outlined: without a swizzle they all sit in bank group 0 (an 8-way conflict);
    with ``chunk ^ (row % 8)`` they fall in 8 different groups.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    colours = plt.get_cmap("tab10")
    for r in range(rows):
        for logical in range(chunks):
            physical = int(swizzle_chunk(r, logical)) if swizzled else logical
            ax.add_patch(plt.Rectangle((physical, r), 1, 1, facecolor=colours(physical % 10),
                                       alpha=0.35, edgecolor="white"))
            bold = logical == 0
            ax.text(physical + 0.5, r + 0.5, f"{logical}", ha="center", va="center",
                    fontsize=9, fontweight="bold" if bold else "normal")
            if bold:
                ax.add_patch(plt.Rectangle((physical, r), 1, 1, fill=False, linewidth=2,
                                           edgecolor="black"))
    ax.set_xlim(0, chunks)
    ax.set_ylim(rows, 0)
    ax.set_xticks(np.arange(chunks) + 0.5, [f"g{c}" for c in range(chunks)], fontsize=8)
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)], fontsize=8)
    ax.set_xlabel("16-byte chunk in the row = bank group (banks 4g .. 4g+3)")
    ax.set_ylabel("row")
    ax.set_aspect("equal")
    ax.set_title(("XOR swizzle: chunk ^ (row % 8)" if swizzled else "plain layout") +
                 "\n(numbers: logical chunk; bold: chunk 0)")
    return ax
