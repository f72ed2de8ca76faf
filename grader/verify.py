"""Output comparisons whose failure messages explain what went wrong on the GPU."""

from __future__ import annotations

import math

import numpy as np

from grader.exercise import Mismatch
from grader.results import plural

UNIT_ROUNDOFF = {np.dtype(np.float16): 2.0**-11, np.dtype(np.float32): 2.0**-24,
                 np.dtype(np.float64): 2.0**-53}


def summation_tolerance(x: np.ndarray, sequential_terms: int = 0) -> tuple[float, str]:
    """Worst-case rounding error of a tree sum of ``x`` finished by sequential additions.

    A pairwise (tree) sum of n numbers adds each element at most ceil(log2 n)
    times; combining ``sequential_terms`` block results one after another (as
    atomics do) adds that many more. With d additions in the longest chain and
    unit roundoff u, the error is at most gamma_d * sum|x|, gamma_d = d*u/(1-d*u)
    (Higham, Accuracy and Stability of Numerical Algorithms, ch. 4).
    """
    n = max(int(x.size), 1)
    u = UNIT_ROUNDOFF.get(x.dtype, 2.0**-24)
    depth = math.ceil(math.log2(n)) + sequential_terms + 1
    gamma = depth * u / (1 - depth * u)
    abs_sum = float(np.abs(x, dtype=np.float64).sum())
    tol = gamma * abs_sum
    why = (
        f"tolerance {tol:.3g} = gamma_{depth} * sum|x| with u = {u:.3g} and "
        f"{plural(depth, 'rounding')} in the longest addition chain "
        f"(log2 n + {sequential_terms} sequential block results + 1)"
    )
    return tol, why


def expect_sum(got, x: np.ndarray, segment: int | None = None, sequential_terms: int = 0) -> None:
    """Check a scalar sum of ``x``; diagnose common bugs when it is wrong.

    ``segment`` is the number of elements one block reduces (for diagnosing
    lost or overwritten block results). The message gives expected and got, then the
    diagnosis, then (on a line of its own) how the tolerance was derived.
    """
    got = float(np.asarray(got).reshape(-1)[0])
    expected = float(np.sum(x, dtype=np.float64))
    tol, why = summation_tolerance(x, sequential_terms)
    if not math.isfinite(got):
        raise Mismatch(
            f"the result is {got}: a NaN or inf usually means reading memory nobody wrote "
            "(past the end of the input -- a missing bounds check -- or shared memory "
            "read before it was written)"
        )
    diff = abs(got - expected)
    if diff <= tol:
        return
    raise Mismatch("\n".join([f"expected {expected:.9g} (float64 reference), got {got:.9g}.",
                              sum_diagnosis(got, x, segment, tol),
                              f"(|diff| {diff:.3g} > {why})"]))


def sum_diagnosis(got: float, x: np.ndarray, segment: int | None, tol: float) -> str:
    """What a wrong sum ``got`` of ``x`` equals, as one sentence: the explanation that fits,
    or all of them where these inputs cannot tell them apart."""
    fits = _sum_explanations(got, x, segment, tol)
    if not fits:
        return ("A result that changes from run to run points to a race (a missing "
                "cuda.syncthreads() between tree levels); a stable wrong value to a wrong "
                "index or stride.")
    if len(fits) == 1:
        return f"It equals {fits[0]}."
    listed = "; ".join(f"({k}) {fit}" for k, fit in enumerate(fits, 1))
    agree = "both fit" if len(fits) == 2 else "all fit"
    return f"These inputs cannot tell {len(fits)} causes apart ({agree}): it equals {listed}."


def _sum_explanations(got: float, x: np.ndarray, segment: int | None, tol: float) -> list[str]:
    x64 = x.astype(np.float64)
    n = x.size
    fits = []
    if got == 0.0:
        fits.append("exactly 0: was the output ever written (thread 0 of each block)?")
    if abs(got - 2 * x64.sum()) <= 2 * tol and n > 1:
        fits.append("twice the sum: every element was counted twice")
    if segment and n > segment:
        starts = np.arange(0, n, segment)
        seg_sums = np.add.reduceat(x64, starts)
        prefix = np.cumsum(seg_sums)
        close = np.nonzero(np.abs(prefix - got) <= max(tol, 1e-6 * abs(got)))[0]
        if close.size and close[0] + 1 < len(starts):
            b = int(close[0]) + 1
            fits.append(
                f"the sum of the first {plural(b, 'block segment')} of {segment} elements: "
                f"blocks {b}.. were lost (grid too small, or a block's result not added)")
        single = np.nonzero(np.abs(seg_sums - got) <= max(tol, 1e-6 * abs(got)))[0]
        if single.size and not close.size:
            fits.append(
                f"block {int(single[0])}'s segment alone: the blocks overwrote the output "
                "instead of adding to it (use cuda.atomic.add)")
    else:
        prefix = np.cumsum(x64)
        close = np.nonzero(np.abs(prefix - got) <= max(tol, 1e-9))[0]
        if close.size and close[0] + 1 < n:
            m = int(close[0]) + 1
            fits.append("the first element alone: the others were never added" if m == 1 else
                        f"the sum of the first {m} elements only")
    return fits


def expect_exact(got, expected, what: str) -> None:
    """Check an exactly known result (max, min, argmax index, ...)."""
    if not np.array_equal(np.asarray(got), np.asarray(expected)):
        raise Mismatch(f"{what}: expected {np.asarray(expected).tolist()}, "
                       f"got {np.asarray(got).tolist()}")


def expect_unchanged(before: np.ndarray, after: np.ndarray, name: str) -> None:
    """Check that a kernel left an input array untouched."""
    changed = np.nonzero(before != after)[0]
    if changed.size:
        raise Mismatch(
            f"the kernel modified {name} (first changed index {int(changed[0])}, "
            f"{changed.size} elements changed); this version must only read it"
        )
