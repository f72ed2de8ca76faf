"""ldmatrix, stmatrix and mma.m16n8k16 against registers written out by hand from the PTX ISA.

The other fragment tests compare the emulated instructions with :mod:`workbook.fragments`,
which the emulation itself calls: a layout wrong in both places would pass them. Here the
expected registers are literals, derived by hand from the PTX ISA (version 8.x/9.x) sections
"Warp-level matrix load instruction: ldmatrix", "stmatrix" and "Matrix Fragments for
mma.m16n8k16 with floating point type" (the derivation is written beside each table). The
kernels are valid CUDA: on a GPU the same literals check the hardware.

Matrices hold 16-bit elements that name their own place: element (r, c) of matrix i is
``0xIRCC`` (``i << 12 | r << 8 | c``), so a register's two halves say where they came from.
A register holds its lower-numbered element in the low half (the ISA's "Elements (low to
high)").
"""

import numpy as np
import pytest
import test_sim_foreign as kernels
from test_sim_foreign import mma_kernel, needs_sm90

from workbook import fragments as F

LANES = (0, 5, 31)


def coded(count=4, rows=8, cols=8) -> np.ndarray:
    """``count`` matrices whose element (r, c) of matrix i is 0xIRCC."""
    i, r, c = np.indices((count, rows, cols))
    return ((i << 12) | (r << 8) | c).astype(np.uint16)


def reg(lo: int, hi: int) -> int:
    return hi << 16 | lo


# ldmatrix .m8n8 .b16, from the ISA: "Each address corresponds to the start of a matrix row.
# Addresses addr0-addr7 correspond to the rows of the first matrix, addresses addr8-addr15 to
# the rows of the second matrix, and so on." "Each thread in a warp loads fragments of a row,
# with thread 0 receiving the first fragment in its register r ... A group of four threads
# loads an entire row of the matrix" (the figure: row 0 is held by T0 {a0, a1}, T1 {a2, a3},
# T2 {a4, a5}, T3 {a6, a7}, row 1 by T4..T7, ...). So lane l holds row l // 4, columns
# 2 (l % 4) and 2 (l % 4) + 1. With .trans "the matrix is loaded in column-major format": the
# same lane holds column l // 4, rows 2 (l % 4) and 2 (l % 4) + 1. With .x4, register i holds
# the fragment of matrix i.
#   lane 0:  row 0, cols 0, 1  -> 0x0000, 0x0001     .trans: col 0, rows 0, 1 -> 0x0000, 0x0100
#   lane 5:  row 1, cols 2, 3  -> 0x0102, 0x0103     .trans: col 1, rows 2, 3 -> 0x0201, 0x0301
#   lane 31: row 7, cols 6, 7  -> 0x0706, 0x0707     .trans: col 7, rows 6, 7 -> 0x0607, 0x0707
X1 = {0: 0x00010000, 5: 0x01030102, 31: 0x07070706}
X1_TRANS = {0: 0x01000000, 5: 0x03010201, 31: 0x07070607}
# .x4: matrix i adds i << 12 to each half
X4 = {0: [0x00010000, 0x10011000, 0x20012000, 0x30013000],
      5: [0x01030102, 0x11031102, 0x21032102, 0x31033102],
      31: [0x07070706, 0x17071706, 0x27072706, 0x37073706]}


def _load(kernel) -> np.ndarray:
    """Run one of the ldmatrix test kernels on the coded matrices, each lane giving the row
    address of row ``lane % 8`` of matrix ``lane // 8``."""
    out = np.zeros((32, 4), np.uint32)
    kernel[1, 32](coded(), np.tile(np.arange(8, dtype=np.int32), 4), out)
    return out


def test_reference_ldmatrix_map_matches_the_isa():
    mats = list(coded())
    x1, trans, x4 = F.ldmatrix(mats[:1]), F.ldmatrix(mats[:1], trans=True), F.ldmatrix(mats)
    for lane in LANES:
        assert x1[lane, 0] == X1[lane], hex(x1[lane, 0])
        assert trans[lane, 0] == X1_TRANS[lane], hex(trans[lane, 0])
        assert x4[lane].tolist() == X4[lane], [hex(v) for v in x4[lane]]


def test_ldmatrix_x1_loads_the_isa_registers():
    out = _load(kernels.ld_x1_kernel)
    assert {lane: int(out[lane, 0]) for lane in LANES} == X1


def test_ldmatrix_x1_trans_loads_the_isa_registers():
    out = _load(kernels.ld_x1_t_kernel)
    assert {lane: int(out[lane, 0]) for lane in LANES} == X1_TRANS


def test_ldmatrix_x4_loads_the_isa_registers():
    out = _load(kernels.ld_x4_kernel)
    assert {lane: out[lane].tolist() for lane in LANES} == X4


def test_ldmatrix_takes_each_row_from_the_lane_that_gives_its_address():
    """Lane 8i + r gives the address of row r of matrix i: here lane r points at row 7 - r
    of the coded matrix, so lane 5 (row 1 of the result) receives stored row 6."""
    out = np.zeros((32, 4), np.uint32)
    kernels.ld_x1_kernel[1, 32](coded(), np.tile(np.arange(7, -1, -1, dtype=np.int32), 4), out)
    assert [int(out[lane, 0]) for lane in LANES] == [0x07010700, 0x06030602, 0x00070006]


# stmatrix is the inverse map (the ISA gives stmatrix the same fragment figure, registers to
# memory). If lane l's register holds the values 2l (low) and 2l + 1 (high), the element of
# flat index 8 (l // 4) + 2 (l % 4) = 2l gets 2l: the stored matrix is 0..63 in row-major
# order; with .trans it is its transpose. Matrix i of .x4 gets register i (here: + 64 i).
def _iota_registers() -> np.ndarray:
    lanes = np.arange(32, dtype=np.uint32)
    return np.stack([((2 * lanes + 1 + 64 * i) << 16) | (2 * lanes + 64 * i)
                     for i in range(4)], axis=1).astype(np.uint32)


@needs_sm90
@pytest.mark.parametrize("name,transposed", [("st_x1_kernel", False), ("st_x1_t_kernel", True),
                                             ("st_x4_kernel", False)])
def test_stmatrix_stores_the_isa_layout(name, transposed):
    out = np.zeros((4, 8, 8), np.uint16)
    getattr(kernels, name)[1, 32](_iota_registers(), np.tile(np.arange(8, dtype=np.int32), 4),
                                  out)
    iota = np.arange(64, dtype=np.uint16).reshape(8, 8)
    assert np.array_equal(out[0], iota.T if transposed else iota)
    assert out[0, 1, 2] == (17 if transposed else 10)  # lane 5's low half; .trans: lane 8's high
    if name == "st_x4_kernel":
        for i in range(1, 4):
            assert np.array_equal(out[i], iota + 64 * i)
    else:
        assert not out[1:].any()  # .x1 stores one matrix only


# mma.m16n8k16 (.f16 inputs, .f32 accumulators), from the ISA, with groupID = lane >> 2 and
# threadID_in_group = lane % 4:
#   A (16x16), elements a0..a7 (two per register, low to high):
#     row = groupID for a0, a1, a4, a5, groupID + 8 otherwise;
#     col = 2 threadID_in_group + (i & 1), + 8 for a4..a7.
#     So register 0 = (a0, a1) = row g, cols 2t, 2t+1; register 1 = (a2, a3) = row g + 8;
#     register 2 = (a4, a5) = row g, cols 2t + 8, 2t + 9; register 3 = (a6, a7) = row g + 8.
#   B (16x8), b0..b3: row (k) = 2 threadID_in_group + (i & 1), + 8 for b2, b3; col = groupID.
#     Register 0 = (b0, b1) = rows 2t, 2t + 1 of column g; register 1 = rows 2t + 8, 2t + 9.
#   C, D (16x8 .f32), c0..c3, one per register: row = groupID for c0, c1, groupID + 8 for c2,
#     c3; col = 2 threadID_in_group + (i & 1).
# Lane 0 is (g, t) = (0, 0), lane 5 is (1, 1), lane 31 is (7, 3). With A coded 0x0RCC (R and
# CC one hex digit each here: rows and columns up to 15) and B coded 0x0KNN:
A_REGS = {0: [reg(0x000, 0x001), reg(0x800, 0x801), reg(0x008, 0x009), reg(0x808, 0x809)],
          5: [reg(0x102, 0x103), reg(0x902, 0x903), reg(0x10A, 0x10B), reg(0x90A, 0x90B)],
          31: [reg(0x706, 0x707), reg(0xF06, 0xF07), reg(0x70E, 0x70F), reg(0xF0E, 0xF0F)]}
B_REGS = {0: [reg(0x000, 0x100), reg(0x800, 0x900)],
          5: [reg(0x201, 0x301), reg(0xA01, 0xB01)],
          31: [reg(0x607, 0x707), reg(0xE07, 0xF07)]}
# C coded as 100 r + c (exact in float32): lane 5 holds (1, 2), (1, 3), (9, 2), (9, 3)
C_REGS = {0: [0.0, 1.0, 800.0, 801.0], 5: [102.0, 103.0, 902.0, 903.0],
          31: [706.0, 707.0, 1506.0, 1507.0]}


def _coded_operands():
    r, c = np.indices((16, 16))
    a = ((r << 8) | c).astype(np.uint16)
    k, n = np.indices((16, 8))
    b = ((k << 8) | n).astype(np.uint16)
    rr, cc = np.indices((16, 8))
    return a, b, (100 * rr + cc).astype(np.float32)


def test_reference_mma_fragments_match_the_isa():
    a, b, c = _coded_operands()
    got_a, got_b, got_c = F.a_fragments(a), F.b_fragments(b), F.c_fragments(c)
    for lane in LANES:
        assert got_a[lane].tolist() == A_REGS[lane], [hex(v) for v in got_a[lane]]
        assert got_b[lane].tolist() == B_REGS[lane], [hex(v) for v in got_b[lane]]
        assert got_c[lane].tolist() == C_REGS[lane]


def _isa_registers(a, b, c):
    """Every lane's A, B and C registers, written straight from the ISA's formulas above
    (not from workbook.fragments)."""
    a_regs = np.zeros((32, 4), np.uint32)
    b_regs = np.zeros((32, 2), np.uint32)
    c_regs = np.zeros((32, 4), np.float32)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        halves = []
        for i in range(8):
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = 2 * t + (i & 1) + (8 if i >= 4 else 0)
            halves.append(int(a[row, col]))
        a_regs[lane] = [reg(halves[2 * j], halves[2 * j + 1]) for j in range(4)]
        bs = [int(b[2 * t + (i & 1) + (8 if i >= 2 else 0), g]) for i in range(4)]
        b_regs[lane] = [reg(bs[0], bs[1]), reg(bs[2], bs[3])]
        c_regs[lane] = [c[g if i < 2 else g + 8, 2 * t + (i & 1)] for i in range(4)]
    return a_regs, b_regs, c_regs


def test_the_isa_formulas_give_the_literal_registers():
    a_regs, b_regs, c_regs = _isa_registers(*_coded_operands())
    for lane in LANES:
        assert a_regs[lane].tolist() == A_REGS[lane]
        assert b_regs[lane].tolist() == B_REGS[lane]
        assert c_regs[lane].tolist() == C_REGS[lane]


# D = A B + C with A a permutation (A[r, k] = 1 where k = (r + 3) % 16), B[k, n] = 8 k + n and
# C[r, n] = 1000 r, all exact in float16 / float32: D[r, n] = 8 ((r + 3) % 16) + n + 1000 r.
#   lane 0:  D[0, 0..1] = 24, 25;        D[8, 0..1] = 88 + 8000, 89 + 8000
#   lane 5:  D[1, 2..3] = 34 + 1000, 35 + 1000;  D[9, 2..3] = 98 + 9000, 99 + 9000
#   lane 31: D[7, 6..7] = 86 + 7000, 87 + 7000;  D[15, 6..7] = 22 + 15000, 23 + 15000
D_REGS = {0: [24.0, 25.0, 8088.0, 8089.0], 5: [1034.0, 1035.0, 9098.0, 9099.0],
          31: [7086.0, 7087.0, 15022.0, 15023.0]}


def test_mma_computes_the_isa_registers():
    r = np.arange(16)
    a = np.zeros((16, 16), np.float16)
    a[r, (r + 3) % 16] = 1
    k, n = np.indices((16, 8))
    b = (8 * k + n).astype(np.float16)
    c = np.repeat(1000.0 * r, 8).reshape(16, 8).astype(np.float32)
    a_regs, b_regs, c_regs = _isa_registers(a.view(np.uint16), b.view(np.uint16), c)
    d = np.zeros((32, 4), np.float32)
    mma_kernel[1, 32](a_regs, b_regs, c_regs, d)
    assert {lane: d[lane].tolist() for lane in LANES} == D_REGS
    # every lane: D's registers hold the ISA's places of the exact product
    g, t = np.arange(32) >> 2, np.arange(32) % 4
    want = (8 * ((r[:, None] + 3) % 16) + np.arange(8) + 1000 * r[:, None]).astype(np.float32)
    for i in range(4):
        assert np.array_equal(d[:, i], want[g + 8 * (i // 2), 2 * t + i % 2])
