"""What each of lesson 01's tests checks, and how a wrong result is explained.

float16 results are compared with a float64 numpy reference within
``(K + K/16 + 1) * 2^-23 * (|A| @ |B|)``: one float32 unit of truncation per product and
per accumulation (tensor cores truncate); small-integer inputs must come out exact.
"""

from __future__ import annotations

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.ldmatrix.inputs import POISON_HALVES
from workbook import fragments as F

SHARED_BYTES = 228 * 1024  # shared memory of one SM on H100/H200


# --- comparing fragments --------------------------------------------------------------------

def _hex(v) -> str:
    return f"{int(v):#010x}"


def expect_registers(got, want, what: str, trans_want=None, source=None) -> None:
    """Compare registers (32, n); explain the common mistakes."""
    got = np.asarray(got, np.uint32).reshape(want.shape)
    if np.array_equal(got, want):
        return
    n = want.shape[1]
    hints = []
    if not got.any():
        hints.append("Every register is 0: nothing was stored (in GPU mode a foreign function "
                     "that returns a nonzero status ends the thread silently).")
    if trans_want is not None and np.array_equal(got, trans_want):
        hints.append("These are the transposed fragments: the layout of the other variant "
                     "(with or without .trans).")
    lo, hi = F.unpack(got)
    if np.isin(np.concatenate([lo, hi]), POISON_HALVES).any():
        hints.append("Some registers hold 0xBEEF / 0x7FAD, the simulator's fill for shared "
                     "memory nobody wrote: was every element of the tile copied before the "
                     "ldmatrix, with a cuda.syncthreads() in between?")
    if np.array_equal(F.pack(hi, lo), want):
        hints.append("The low and high 16-bit halves are swapped: the element with the smaller "
                     "column goes into the low half.")
    if n > 1 and not hints:
        moved = [(i, j) for i in range(n) for j in range(n)
                 if i != j and np.array_equal(got[:, i], want[:, j])]
        if moved:
            i, j = moved[0]
            hints.append(f"Register {i} holds what register {j} should: check the order of the "
                         "outputs in the asm statement and which lanes address which matrix "
                         "(matrix i gets its row addresses from lanes 8i .. 8i+7).")
    if source is not None and not hints:
        hints.extend(_trace_rows(got, want, source))
    bad = np.argwhere(got != want)
    lane, reg = (int(x) for x in bad[0])
    first = (f"{what}: {len(bad)} of {want.size} registers differ; first at lane {lane}, "
             f"register {reg}: expected {_hex(want[lane, reg])}, got {_hex(got[lane, reg])}.")
    raise Mismatch(" ".join([first, *hints]))


def _trace_rows(got, want, source) -> list[str]:
    """Locate the elements a wrong register holds in the (distinct-valued) source matrix."""
    where = {int(v): divmod(i, source.shape[1]) for i, v in enumerate(source.reshape(-1))}
    lo_g, _ = F.unpack(got)
    lo_w, _ = F.unpack(want)
    for lane in range(32):
        for reg in range(want.shape[1]):
            g, w = int(lo_g[lane, reg]), int(lo_w[lane, reg])
            if g != w and g in where and w in where:
                (gr, gc), (wr, wc) = where[g], where[w]
                return [f"Lane {lane} register {reg} should start with element ({wr}, {wc}) of "
                        f"the matrix but starts with ({gr}, {gc}): the row address that feeds "
                        f"it is wrong (lane 8i + r must point at row r of matrix i)."]
    return []


# --- exercise 1: shared-space addresses -----------------------------------------------------

def verify_address(got, expected, inputs, mode):
    got = got.astype(np.int64)
    steps = got - got[0]
    want = 2 * np.arange(got.size)
    if not np.array_equal(steps, want):
        t = int(np.nonzero(steps != want)[0][0])
        raise Mismatch(f"thread {t}'s address is {steps[t]} bytes after thread 0's, expected "
                       f"{want[t]} (tile[t] is 2 bytes after tile[t - 1]): does thread t pass "
                       "tile[t:].ctypes?")
    if got[0] % 16:
        raise Mismatch(f"tile[0] is at shared address {int(got[0]):#x}, not 16-byte aligned: "
                       "declare the tile with alignment=16")
    if got.max() >= SHARED_BYTES:
        raise Mismatch(f"address {int(got.max()):#x} is beyond the {SHARED_BYTES // 1024} KiB of "
                       "shared memory: that is (part of) a generic address; convert it with "
                       "__cvta_generic_to_shared")


# --- exercise 2: the predicted map ----------------------------------------------------------

def verify_predict(got, expected, inputs, mode):
    if got.shape != (32, 2, 2):
        raise Mismatch(f"x1_fragment_map() has shape {got.shape}, expected (32, 2, 2)")
    if np.array_equal(got, expected):
        return
    if np.array_equal(got, F.x1_coords(trans=True)):
        raise Mismatch("that is the .trans layout (rows and columns swapped): without .trans "
                       "lane l holds row l // 4")
    if np.array_equal(got[:, ::-1], expected):
        raise Mismatch("low and high halves are swapped: the low half holds the smaller column")
    lane, half = (int(x) for x in np.argwhere((got != expected).any(axis=2))[0])
    raise Mismatch(f"lane {lane}, half {half}: expected {tuple(expected[lane, half])}, got "
                   f"{tuple(got[lane, half])}")


# --- exercises 3-5: ldmatrix ----------------------------------------------------------------

def verify_x1(got, expected, inputs, mode):
    m = inputs["m"]
    expect_registers(got.reshape(32, 1), expected, "ldmatrix .x1 fragments",
                     F.ldmatrix([m], trans=True), m)


def verify_x4(got, expected, inputs, mode):
    m = inputs["m"]
    blocks = [m[:8, :8], m[8:, :8], m[:8, 8:], m[8:, 8:]]
    expect_registers(got, expected, "ldmatrix .x4 fragments (mma A operand)",
                     F.ldmatrix(blocks, trans=True), m)


def verify_trans(got, expected, inputs, mode):
    m = inputs["m"]
    expect_registers(got, expected, "ldmatrix .x2.trans fragments (mma B operand)",
                     F.ldmatrix([m[:8], m[8:]], trans=False), m)


# --- exercise 6: stmatrix -------------------------------------------------------------------

def verify_stmatrix(got, expected, inputs, mode):
    stored, round_trip = got
    m = inputs["m"]
    if not np.array_equal(stored, m):
        if np.array_equal(stored, m.T):
            raise Mismatch("stmatrix_x4_kernel stored the transpose of the matrix whose "
                           "fragments it was given (.trans, or rows/columns swapped)")
        r, c = (int(x) for x in np.argwhere(stored != m)[0])
        raise Mismatch(f"stmatrix_x4_kernel: element ({r}, {c}) is {int(stored[r, c])}, expected "
                       f"{int(m[r, c])} (the matrix whose A fragments were stored); "
                       f"{int((stored != m).sum())} of 256 elements differ")
    if not np.array_equal(round_trip, m):
        r, c = (int(x) for x in np.argwhere(round_trip != m)[0])
        raise Mismatch(f"roundtrip_kernel: ldmatrix then stmatrix with the same addresses must "
                       f"give the input back; element ({r}, {c}) is {int(round_trip[r, c])}, "
                       f"expected {int(m[r, c])}")


# --- exercises 7-8: mma and GEMM ------------------------------------------------------------

def gemm_tolerance(a, b) -> tuple[np.ndarray, str]:
    """Per-element tolerance of a float16 GEMM with float32 tensor-core accumulation."""
    k = a.shape[1]
    gamma = (k + k // 16 + 1) * 2.0**-23
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    why = (f"tolerance gamma * (|A| @ |B|) with gamma = (K + K/16 + 1) * 2^-23 = {gamma:.3g} "
           f"(K = {k}): one float32 unit of truncation per product and per accumulation")
    return gamma * bound, why


def expect_gemm(got, expected, inputs, what: str) -> None:
    a, b = inputs["a"], inputs["b"]
    got = np.asarray(got, np.float64)
    if not np.all(np.isfinite(got)):
        r, c = (int(x) for x in np.argwhere(~np.isfinite(got))[0])
        raise Mismatch(f"{what}: C[{r}, {c}] is {got[r, c]}: an element never written, or "
                       "fragments read from the wrong place")
    exact = np.all(np.abs(a.astype(np.float64)) == np.round(np.abs(a.astype(np.float64)))) and \
        np.all(np.abs(b.astype(np.float64)) == np.round(np.abs(b.astype(np.float64))))
    tol, why = gemm_tolerance(a, b)
    if exact:
        tol, why = np.zeros_like(tol), "small-integer inputs: the result must be exact"
    bad = np.abs(got - expected) > tol
    if not bad.any():
        return
    r, c = (int(x) for x in np.argwhere(bad)[0])
    hints = []
    if a.shape[0] == a.shape[1]:
        transposed = a.astype(np.float64).T @ b.astype(np.float64)
        if np.all(np.abs(got - transposed) <= tol + 1e-6):
            hints.append("That is A^T @ B: A's fragments are transposed.")
    if not got.any():
        hints.append("C is all zeros: nothing was written.")
    if b.shape[1] == 8 and a.shape == (16, 16) and not hints:
        rows = np.nonzero(bad.any(axis=1))[0]
        hints.append(f"Wrong rows: {rows.tolist()}; a0/a1 hold rows g and g + 8, a2/a3 the same "
                     "rows at columns + 8; c0, c1 go to row g and c2, c3 to row g + 8.")
    raise Mismatch(f"{what}: {int(bad.sum())} of {bad.size} elements are off; first C[{r}, {c}] "
                   f"= {got[r, c]:.6g}, expected {expected[r, c]:.6g} (|diff| "
                   f"{abs(got[r, c] - expected[r, c]):.3g} > {tol[r, c]:.3g}; {why}). "
                   + " ".join(hints))


def verify_mma(got, expected, inputs, mode):
    expect_gemm(got, expected, inputs, "mma_tile_kernel")


def verify_gemm(got, expected, inputs, mode):
    expect_gemm(got, expected, inputs, "gemm_kernel")


# --- exercise 9: swizzle --------------------------------------------------------------------

def verify_swizzle(got, expected, inputs, mode):
    out, conflicts = got
    m = inputs["m"]
    for s in range(4):
        expect_registers(out[s], expected[s], f"column slice {s} (columns {16 * s}..{16 * s + 15})",
                         source=m)
    if conflicts:
        raise Mismatch(
            f"the fragments are right, but the ldmatrix instructions needed {conflicts} extra "
            "shared-memory wavefronts (bank conflicts): the 8 rows of each matrix must sit in "
            "8 different 16-byte bank groups; store chunk c of row r at chunk c ^ (r % 8) and "
            "load through the same swizzle")
