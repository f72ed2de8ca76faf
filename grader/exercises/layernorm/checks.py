"""Lesson 04's comparison of a LayerNorm result with the float64 reference.

Tolerances, with u = 2^-24 (float32 compute), n = cols and ``seq`` the number of
values one thread folds in sequentially (Welford's error grows about like its square
root; the tree of combines adds log2 n):

    K          = 16 + 4 sqrt(seq) + 2 log2 n
    |d mean|  <= K u (|mean| + std)
    |d var|   <= K u (var + |mean| std) + (2 u mean)^2
    |d rstd| / rstd <= |d var| / (2 (var + eps)) + 4 u
    |d y|     <= |gamma| (|d mean| rstd + (|d rstd| / rstd + 4 u) |xhat|)
                 + 4 u (|gamma xhat| + |beta|) + rounding of y to its dtype

Measured float32 errors of sequential and tree Welford stay below a quarter of these
bounds for |mean| / std up to 10^5; the naive formula exceeds them by orders of
magnitude once |mean| / std passes about 100.
"""

from __future__ import annotations

import math

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.layernorm.buffers import never_written
from grader.exercises.layernorm.diagnoses import (
    count_hint,
    mean_hint,
    rstd_hint,
    unwritten_hint,
    y_hint,
)
from grader.exercises.layernorm.messages import rows_text

U = 2.0**-24  # unit roundoff of float32, the compute type
OUTPUT_U = {"float32": 2.0**-24, "float16": 2.0**-11}


def stat_tolerances(x: np.ndarray, eps: float, seq: int):
    """Per-row tolerances ``(tol_mean, rel_rstd, why)`` (see the module docstring)."""
    x64 = x.astype(np.float64)
    n = x.shape[1]
    mean, var = x64.mean(axis=1), x64.var(axis=1)
    std = np.sqrt(var)
    k = 16 + 4 * math.sqrt(max(seq, 1)) + 2 * math.log2(max(n, 2))
    tol_mean = k * U * (np.abs(mean) + std)
    tol_var = k * U * (var + np.abs(mean) * std) + (2 * U * mean) ** 2
    rel_rstd = tol_var / (2 * (var + eps)) + 4 * U
    why = (f"K = 16 + 4 sqrt({seq}) + 2 log2({n}) = {k:.1f}, u = 2^-24: "
           "|d mean| <= K u (|mean| + std), |d var| <= K u (var + |mean| std), "
           "|d rstd| / rstd <= |d var| / (2 (var + eps)) + 4 u")
    return tol_mean, rel_rstd, why


def expect_layer_norm(got, inputs: dict, expected, seq: int) -> None:
    """Compare ``(y, mean, rstd)`` with the float64 reference; explain a failure."""
    y, mean, rstd = (np.asarray(a) for a in got)
    x = inputs["x"]
    rows, cols = x.shape
    case = inputs.get("case")
    want_y, want_mean, want_rstd = expected
    if y.shape != x.shape or mean.shape != (rows,) or rstd.shape != (rows,):
        raise Mismatch(f"shapes: y {y.shape}, mean {mean.shape}, rstd {rstd.shape}; "
                       f"expected {x.shape}, ({rows},), ({rows},)")
    if y.dtype != x.dtype:
        raise Mismatch(f"y has dtype {y.dtype}: it must have x's dtype ({x.dtype})")
    for name, array in (("mean", mean), ("rstd", rstd)):
        if array.dtype != np.float32:
            raise Mismatch(f"{name} has dtype {array.dtype}: it must be float32 (as in "
                           "PyTorch, statistics stay float32 for float16 input)")
    missing = np.nonzero(never_written(mean) & never_written(rstd))[0]
    if missing.size:
        raise Mismatch(f"mean and rstd of rows {rows_text(missing, rows)} are NaN: never "
                       "written. " + unwritten_hint(missing, rows, case))
    y = y.astype(np.float64)
    mean = mean.astype(np.float64)
    rstd = rstd.astype(np.float64)
    poisoned = np.nonzero(np.isnan(mean) & np.isnan(rstd))[0]
    if poisoned.size:
        raise Mismatch(f"mean and rstd of rows {rows_text(poisoned, rows)} are NaN, and the "
                       "kernel wrote them: a NaN entered the statistics. The rows hold none, "
                       "so a value past the end of the row (NaN in this test; on a GPU, "
                       "whatever memory holds there: a bound `col <= cols`?) or one never "
                       "loaded (a local array element read before it was written) was "
                       "counted.")
    for name, array in (("mean", mean), ("rstd", rstd)):
        nan = np.nonzero(np.isnan(array))[0]
        if nan.size:
            one_value = (" These rows hold one value each: m2 / (n - 1), the sample variance, "
                         "is 0 / 0 there (LayerNorm divides by n)." if cols == 1 else "")
            raise Mismatch(f"{name} of rows {rows_text(nan, rows)} is NaN (the other statistic "
                           "is written). An rstd of NaN is the square root of a negative "
                           "variance: E[x^2] - E[x]^2 goes negative when it cancels "
                           "catastrophically (use Welford), or 0 / 0 from a count of 0."
                           + one_value)
    eps = float(inputs["eps"])
    tol_mean, rel_rstd, why = stat_tolerances(x, eps, seq)
    x64 = x.astype(np.float64)
    true_var = x64.var(axis=1)
    kappa = np.abs(want_mean) / np.maximum(np.sqrt(true_var), 1e-30)

    bad = np.nonzero(~(np.abs(mean - want_mean) <= tol_mean))[0]
    if bad.size:
        r = int(bad[0])
        raise Mismatch(f"mean of row {r}: expected {want_mean[r]:.9g}, got {mean[r]:.9g}, "
                       f"|diff| {abs(mean[r] - want_mean[r]):.3g} > {tol_mean[r]:.3g} ({why}). "
                       f"Rows with a wrong mean: {rows_text(bad, rows)}. "
                       + (count_hint(mean[bad], rstd[bad], x64[bad], eps, tol_mean[bad],
                                     rel_rstd[bad])
                          or mean_hint(mean[r], x64[r], case)))

    rel = np.abs(rstd - want_rstd) / want_rstd
    bad = np.nonzero(~(rel <= rel_rstd))[0]
    if bad.size:
        r = int(bad[0])
        raise Mismatch(f"rstd of row {r}: expected {want_rstd[r]:.9g}, got {rstd[r]:.9g}, "
                       f"relative error {rel[r]:.3g} > {rel_rstd[r]:.3g} ({why}). "
                       f"Rows with a wrong rstd: {rows_text(bad, rows)}. "
                       + (count_hint(mean[bad], rstd[bad], x64[bad], eps, tol_mean[bad],
                                     rel_rstd[bad])
                          or rstd_hint(rstd[bad], x64[bad], eps, kappa[bad])))

    if np.isnan(y).all(axis=1).any():
        empty = np.nonzero(np.isnan(y).all(axis=1))[0]
        if not inputs["affine"] and np.isfinite(y).any():
            raise Mismatch(f"y of rows {rows_text(empty, rows)} is NaN although mean and rstd "
                           "are written: without affine, gamma and beta (NaN here) must not "
                           "be used")
        if not inputs["affine"]:
            raise Mismatch("y is NaN everywhere although mean and rstd are written: without "
                           "affine, gamma and beta (NaN in this test) must not be used")
        raise Mismatch(f"y of rows {rows_text(empty, rows)} is NaN: never written. "
                       + unwritten_hint(empty, rows, case))

    gamma = np.abs(inputs["gamma"].astype(np.float64)) if inputs["affine"] else np.ones(cols)
    beta = np.abs(inputs["beta"].astype(np.float64)) if inputs["affine"] else np.zeros(cols)
    xhat = (x64 - want_mean[:, None]) * want_rstd[:, None]
    out_u = OUTPUT_U[str(x.dtype)]
    tol_y = (gamma * (tol_mean[:, None] * want_rstd[:, None]
                      + (rel_rstd[:, None] + 4 * U) * np.abs(xhat))
             + 4 * U * (gamma * np.abs(xhat) + beta)
             + out_u * np.abs(want_y) + (2.0**-24 if out_u > U else 0.0))
    wrong = ~(np.abs(y - want_y) <= tol_y)
    if wrong.any():
        r, c = (int(i) for i in np.argwhere(wrong)[0])
        columns = np.nonzero(wrong.any(axis=0))[0]
        raise Mismatch(
            f"y[{r}, {c}]: expected {want_y[r, c]:.7g}, got {y[r, c]:.7g} (tolerance "
            f"{tol_y[r, c]:.3g}, from the mean and rstd tolerances above plus rounding to "
            f"{x.dtype}); {int(wrong.sum())} wrong elements in {int(wrong.any(axis=1).sum())} "
            f"rows, columns {rows_text(columns, cols, 'columns')}. "
            + y_hint(y, x64, want_mean, want_rstd, inputs, wrong))


def verify_kernel(got, expected, inputs, mode):
    case = inputs["case"]
    if case.config:
        seq = case.config[0]
    else:
        seq = -(-case.size // case.block)
    expect_layer_norm(got, inputs, expected, seq)


def verify_dispatch(got, expected, inputs, mode):
    case = inputs["case"]
    if isinstance(got[0], str):
        verify_plan(got[1], case)
        return
    expect_layer_norm(got, inputs, expected, -(-case.size // 32))


def verify_plan(plan, case):
    try:
        kind, kernel, grid, block, shared_bytes = plan
    except (TypeError, ValueError):
        raise Mismatch("plan_layer_norm must return (kind, kernel, grid, block, "
                       "shared_bytes)") from None
    want = case.plan
    shape = f"({case.rows}, {case.size}) {case.dtype}"
    if kind != want:
        reasons = {"warp": f"{case.size} <= 1024 columns: the warp kernel",
                   "smem": f"{case.size} > 1024 columns whose {4 * case.size:,} bytes of "
                           "shared memory fit in a block: the shared-memory kernel",
                   "uncached": f"{4 * case.size:,} bytes of shared memory per block do not "
                               "fit (max_active_blocks is 0): the uncached kernel"}
        raise Mismatch(f"plan for {shape}: kind {kind!r}, expected {want!r} "
                       f"({reasons[want]})")
    if block % 32 or not 32 <= block <= 1024:
        raise Mismatch(f"plan for {shape}: block {block}; the kernels need a multiple of 32 "
                       "threads, at most 1024")
    if grid < 1:
        raise Mismatch(f"plan for {shape}: grid {grid}")
    if kind == "smem" and shared_bytes < 4 * case.size:
        raise Mismatch(f"plan for {shape}: {shared_bytes} bytes of dynamic shared memory; "
                       f"the row needs {4 * case.size}")
