"""Lesson 04 (layernorm): inputs, launches, float64 references, tolerances and tests.

Inputs are rows of several kinds: ``normal`` (modest mean and spread), ``large-mean``
(|mean| / std up to 10^4 in float32, 10^3 in float16: the rows where E[x^2] - E[x]^2
cancels catastrophically) and ``eps`` (constant rows, where only eps keeps rstd
finite, rows whose variance is comparable to eps, and ordinary rows). Every case
draws fresh random data; sizes are odd on purpose (a row length that is not a
multiple of the thread group, a row count that leaves thread groups or blocks
without a row). Outputs start as NaN, so an element never written shows up as NaN.

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
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import SANITIZED_MAX_SIZE, Case, Exercise, Mismatch, with_metric_rules
from grader.metric_rules import MetricRule
from workbook.welford import layer_norm_reference

LESSON = "04_layernorm"
U = 2.0**-24  # unit roundoff of float32, the compute type
OUTPUT_U = {"float32": 2.0**-24, "float16": 2.0**-11}


# --- test cases --------------------------------------------------------------------------------

@dataclass(frozen=True)
class NormCase(Case):
    """A LayerNorm test: ``size`` is the number of columns."""

    rows: int = 1
    dtype: str = "float32"
    affine: bool = True
    eps: float = 1e-5
    config: tuple = ()  # warp kernel: (cols_per_thread, width, rows_per_access)
    block: int = 32
    grid: int = 1
    exact: bool = False  # buffers of exactly the data's size (for compute-sanitizer memcheck)

    def name(self) -> str:
        parts = [f"{self.rows}x{self.size} {self.dtype}", self.kind,
                 "affine" if self.affine else "no affine", f"eps {self.eps:g}"]
        if self.config:
            cpt, width, rpa = self.config
            parts.append(f"cols_per_thread {cpt}, width {width}, rows_per_access {rpa}")
        if self.grid:
            parts.append(f"grid {self.grid} x {self.block}")
        if self.exact:
            parts.append("exact-size buffers")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts)


def make_rows(rng: np.random.Generator, rows: int, cols: int, kind: str, dtype: str):
    """``(rows, cols)`` data of ``kind`` in ``dtype`` (see the module docstring)."""
    half = dtype == "float16"
    if kind == "large-mean":
        sign = rng.choice([-1.0, 1.0], size=(rows, 1))
        mean = sign * rng.uniform(300, 1000, (rows, 1)) if half else \
            sign * rng.uniform(3e3, 1e4, (rows, 1))
        x = mean + rng.standard_normal((rows, cols))
    elif kind == "eps":
        x = rng.uniform(-2, 2, (rows, 1)) + rng.uniform(0.5, 2, (rows, 1)) * \
            rng.standard_normal((rows, cols))
        which = np.arange(rows) % 3
        constant = rng.integers(-8, 9, size=(rows, 1)) * 0.5  # exact: sums stay exact
        x = np.where(which[:, None] == 0, constant, x)
        tiny = rng.uniform(0.2, 1.0, (rows, 1)) + 1e-3 * rng.standard_normal((rows, cols))
        x = np.where(which[:, None] == 1, tiny, x)
    else:
        x = rng.uniform(-2, 2, (rows, 1)) + rng.uniform(0.5, 2, (rows, 1)) * \
            rng.standard_normal((rows, cols))
    return x.astype(dtype)


def make_layer_norm(rng: np.random.Generator, case: NormCase) -> dict:
    x = make_rows(rng, case.rows, case.size, case.kind, case.dtype)
    if case.affine:
        gamma = (1 + 0.5 * rng.standard_normal(case.size)).astype(case.dtype)
        beta = rng.standard_normal(case.size).astype(case.dtype)
    else:  # NaN: a kernel that reads them without affine produces NaN
        gamma = np.full(case.size, np.nan, case.dtype)
        beta = np.full(case.size, np.nan, case.dtype)
    return {"x": x, "gamma": gamma, "beta": beta, "affine": case.affine,
            "eps": np.float32(case.eps), "case": case}


def reference_layer_norm(inputs: dict):
    gamma = inputs["gamma"] if inputs["affine"] else None
    beta = inputs["beta"] if inputs["affine"] else None
    return layer_norm_reference(inputs["x"], gamma, beta, float(inputs["eps"]))


# --- tolerances and the comparison ------------------------------------------------------------

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


def _rows_text(rows: np.ndarray, total: int, noun: str = "rows") -> str:
    shown = ", ".join(str(int(r)) for r in rows[:8])
    more = f", ... ({rows.size} of {total} {noun})" if rows.size > 8 else f" (of {total})"
    return f"[{shown}{more}]"


def _unwritten_hint(rows: np.ndarray, total: int, case) -> str:
    """Explain which rows were never written, from their pattern."""
    if rows.size == total:
        return "No row was written at all."
    first = int(rows[0])
    if np.array_equal(rows, np.arange(first, total)):
        return (f"Every row from {first} on is missing: the loop over rows stops too early "
                "(rows beyond the first pass of the grid need a grid-stride loop: "
                "row += number of rows the whole grid handles per pass).")
    config = getattr(case, "config", ())
    if config and config[2] > 1 and np.all(rows % config[2] == config[2] - 1):
        return ("Only the last row of each access is missing: every one of the "
                "rows_per_access rows needs its own reduction and stores.")
    return "Check the row each thread group or block starts at, and its step."


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
        raise Mismatch(f"mean and rstd of rows {_rows_text(missing, rows)} are NaN: never "
                       "written. " + _unwritten_hint(missing, rows, case))
    y = y.astype(np.float64)
    mean = mean.astype(np.float64)
    rstd = rstd.astype(np.float64)
    poisoned = np.nonzero(np.isnan(mean) & np.isnan(rstd))[0]
    if poisoned.size:
        raise Mismatch(f"mean and rstd of rows {_rows_text(poisoned, rows)} are NaN, and the "
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
            raise Mismatch(f"{name} of rows {_rows_text(nan, rows)} is NaN (the other statistic "
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
                       f"Rows with a wrong mean: {_rows_text(bad, rows)}. "
                       + (_count_hint(mean[bad], rstd[bad], x64[bad], eps, tol_mean[bad],
                                      rel_rstd[bad])
                          or _mean_hint(mean[r], x64[r], case)))

    rel = np.abs(rstd - want_rstd) / want_rstd
    bad = np.nonzero(~(rel <= rel_rstd))[0]
    if bad.size:
        r = int(bad[0])
        raise Mismatch(f"rstd of row {r}: expected {want_rstd[r]:.9g}, got {rstd[r]:.9g}, "
                       f"relative error {rel[r]:.3g} > {rel_rstd[r]:.3g} ({why}). "
                       f"Rows with a wrong rstd: {_rows_text(bad, rows)}. "
                       + (_count_hint(mean[bad], rstd[bad], x64[bad], eps, tol_mean[bad],
                                      rel_rstd[bad])
                          or _rstd_hint(rstd[bad], x64[bad], eps, kappa[bad])))

    if np.isnan(y).all(axis=1).any():
        empty = np.nonzero(np.isnan(y).all(axis=1))[0]
        if not inputs["affine"] and np.isfinite(y).any():
            raise Mismatch(f"y of rows {_rows_text(empty, rows)} is NaN although mean and rstd "
                           "are written: without affine, gamma and beta (NaN here) must not "
                           "be used")
        if not inputs["affine"]:
            raise Mismatch("y is NaN everywhere although mean and rstd are written: without "
                           "affine, gamma and beta (NaN in this test) must not be used")
        raise Mismatch(f"y of rows {_rows_text(empty, rows)} is NaN: never written. "
                       + _unwritten_hint(empty, rows, case))

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
            f"rows, columns {_rows_text(columns, cols, 'columns')}. "
            + _y_hint(y, x64, want_mean, want_rstd, inputs, wrong))


def _count_hint(mean, rstd, rows64, eps, tol_mean, rel_rstd) -> str:
    """A hint when the statistics of every wrong row are those of the row with one element
    more (of whatever value) or one fewer (its first or last): an off-by-one bound."""
    if not (np.isfinite(mean).all() and np.isfinite(rstd).all()):
        return ""
    with np.errstate(all="ignore"):
        return _count_match(mean, rstd, rows64, eps, tol_mean, rel_rstd)


def _count_match(mean, rstd, rows64, eps, tol_mean, rel_rstd) -> str:
    n = rows64.shape[1]
    true_mean, true_var = rows64.mean(axis=1), rows64.var(axis=1)
    # one element v more: the mean says which v; Chan's combine gives the variance
    v = (n + 1) * mean - n * true_mean
    var_more = (n * true_var + (v - true_mean) ** 2 * n / (n + 1)) / (n + 1)
    # the uncertainty of v (n + 1 times that of the mean) carried into the variance
    slack = 2 * np.abs(v - true_mean) * (n + 1) * tol_mean / (n + 1) ** 2
    rstd_more = 1 / np.sqrt(var_more + eps)
    bound = 0.5 * slack / (var_more + eps) + 2 * rel_rstd
    more = (np.abs(rstd - rstd_more) <= bound * rstd_more).all()
    fewer = []
    if n > 1:
        for part in (rows64[:, :-1], rows64[:, 1:]):
            want_rstd = 1 / np.sqrt(part.var(axis=1) + eps)
            fewer.append((np.abs(mean - part.mean(axis=1)) <= tol_mean).all()
                         and (np.abs(rstd - want_rstd) <= 2 * rel_rstd * want_rstd).all())
    if more:
        return ("These statistics are those of the row with one element more (n + 1 values): "
                "a value past the end of the row, or one never loaded (a stale or unwritten "
                "buffer element), was counted. Check the bound (col < cols) wherever a value "
                "is added to the statistics, and that it is the same bound as the load's.")
    if any(fewer):
        return ("These statistics are those of the row without its "
                f"{'last' if fewer[0] else 'first'} element: a bound one short (col < cols - 1, "
                "or a loop that starts at 1) left it out.")
    return ""


def _mean_hint(got: float, row: np.ndarray, case) -> str:
    n = row.size
    if math.isclose(got, row.sum(), rel_tol=1e-4, abs_tol=1e-6) and n > 1:
        return "That is the row's sum: divide by the count."
    config = getattr(case, "config", ())
    if config and config[1] > 1:
        width = config[1]
        lane0 = row[::width]
        if lane0.size and math.isclose(got, lane0.mean(), rel_tol=1e-5, abs_tol=1e-6):
            return ("That is the mean of the first lane's values only: the group's partial "
                    "results were not combined (or not broadcast from the group's first lane).")
    return ("A mean off for some rows only points to padding columns counted as zeros "
            "(count them out), or to partial results combined with a wrong count.")


def _rstd_hint(got, rows64, eps, kappa) -> str:
    var = rows64.var(axis=1)
    n = rows64.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return _match_rstd(got, var, n, eps, kappa)


def _match_rstd(got, var, n, eps, kappa) -> str:
    right = 1 / np.sqrt(var + eps)
    checks = [
        (1 / np.sqrt(var), "rstd = 1 / sqrt(var): eps is missing (constant rows need it)"),
        (1 / (np.sqrt(var) + eps), "rstd = 1 / (sqrt(var) + eps): eps belongs inside the "
                                   "square root"),
        (np.sqrt(var + eps), "that is sqrt(var + eps): rstd is its inverse"),
        (1 / np.sqrt(var * n / max(n - 1, 1) + eps),
         "that uses the sample variance (divided by n - 1): LayerNorm divides by n"),
    ]
    for candidate, text in checks:
        # a mistake is named only where it changes the value: with var >> eps, 1 / sqrt(var)
        # is as close to the answer as the wrong value is, and says nothing
        if np.allclose(got, candidate, rtol=1e-3, atol=0) and \
                not np.allclose(candidate, right, rtol=1e-3, atol=0):
            return text[0].upper() + text[1:] + "."
    typical = float(np.median(kappa))
    if typical > 100:
        return (f"The wrong rows have |mean| / std around {typical:.3g}: "
                "E[x^2] - E[x]^2 cancels catastrophically there. Use Welford's update and "
                "Chan's combine.")
    hint = ("Check the variance: m2 / count of the combined statistics, with every "
            "partial result (and no padding value) combined exactly once.")
    if typical > 1:
        hint += (f" These rows have |mean| / std around {typical:.3g}: a variance taken as "
                 f"E[x^2] - E[x]^2 cancels catastrophically, losing about "
                 f"{2 * math.log10(typical):.1f} digits here.")
    return hint


def _y_hint(y, x64, mean, rstd, inputs, wrong) -> str:
    if np.isnan(y[wrong]).all():
        return ("Those elements are NaN: never written. Check the columns each lane or thread "
                "stores (i * width + lane for the warp kernel; t, t + blockDim, ... for a "
                "block) and that padding is skipped only past the end of the row.")
    xhat = (x64 - mean[:, None]) * rstd[:, None]
    rows_ok = ~wrong.any(axis=1)
    if inputs["affine"]:
        gamma = inputs["gamma"].astype(np.float64)
        beta = inputs["beta"].astype(np.float64)
        if np.allclose(y, xhat, rtol=1e-3, atol=1e-3):
            return "y equals (x - mean) * rstd: gamma and beta were not applied."
        if np.allclose(y, xhat * gamma, rtol=1e-3, atol=1e-3):
            return "y equals (x - mean) * rstd * gamma: beta is missing."
        if np.allclose(y, xhat + beta, rtol=1e-3, atol=1e-3):
            return "y equals (x - mean) * rstd + beta: gamma is missing."
    gamma = inputs["gamma"].astype(np.float64) if inputs["affine"] else 1.0
    beta = inputs["beta"].astype(np.float64) if inputs["affine"] else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        unshifted = x64 * rstd[:, None] * gamma + beta
        divided = (x64 - mean[:, None]) / rstd[:, None] * gamma + beta
    for candidate, text in ((unshifted, "y equals x * rstd (times gamma, plus beta): the mean "
                                        "was not subtracted, y = (x - mean) * rstd."),
                            (divided, "y equals (x - mean) / rstd: rstd is 1 / std already, "
                                      "multiply by it.")):
        if np.allclose(y, candidate, rtol=1e-3, atol=1e-3) and \
                not np.allclose(candidate, xhat * gamma + beta, rtol=1e-3, atol=1e-3):
            return text
    if rows_ok.any() and wrong.any():
        cols_bad = wrong.any(axis=0)
        if cols_bad.all():
            return ("Whole rows are wrong although their mean and rstd are right: were the "
                    "values normalised with another row's statistics, or taken from another "
                    "row's buffer?")
    return ("Mean and rstd are right, so look at the stores: the column each lane or thread "
            "writes, and the values it normalises.")


# --- exercise 1: variances on the CPU ---------------------------------------------------------

def _variance_cases():
    def case(kind, rows, cols, note):
        return Case(cols, kind, note=f"{rows} rows, {note}")

    return {mode: (case("two-pass", 8, 50, "normal"), case("two-pass", 16, 300, "large-mean"),
                   case("naive", 8, 200, "zero-mean"), case("welford", 8, 77, "normal"),
                   case("welford", 16, 500, "large-mean"), case("welford", 8, 1, "normal"),
                   case("combine", 64, 60, "random splits"),
                   case("combine", 64, 60, "large-mean splits"))
            for mode in ("sim", "gpu")}


def _make_variance(rng, case):
    rows = int(case.note.split()[0])
    cols = case.size
    if "large-mean" in case.note:
        x = make_rows(rng, rows, cols, "large-mean", "float32")
    elif "zero-mean" in case.note:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
    else:
        x = make_rows(rng, rows, cols, "normal", "float32")
    inputs = {"x": x, "kind": case.kind}
    if case.kind == "combine":
        # split each row in two at a random point; force empty sides and both empty
        split = rng.integers(0, cols + 1, size=rows)
        split[:3] = (0, cols, 0)
        inputs["split"] = split
        inputs["both_empty"] = np.arange(rows) == 2
    return inputs


def _stats32(parts):
    mean = np.array([p.mean() if p.size else 0.0 for p in parts], np.float32)
    m2 = np.array([((p - p.mean()) ** 2).sum() if p.size else 0.0 for p in parts], np.float32)
    count = np.array([p.size for p in parts], np.float32)
    return mean, m2, count


def _variance_hint(kind: str, got, x64) -> str:
    """The mistake whose variance ``got`` equals on every row (where it differs from the
    right one), as a sentence starting with a space; "" if none does."""
    n = x64.shape[1]
    var = x64.var(axis=1)
    candidates = [
        (x64.var(axis=1, ddof=1) if n > 1 else None,
         "That is the sample variance (m2 / (n - 1)): return m2 / n." if kind == "welford" else
         "That is the sample variance (divided by n - 1): the variance here divides the sum by "
         "n, the number of values."),
        (np.sqrt(var), "That is the standard deviation (the square root of the variance): "
                       "return the variance itself."),
        ((x64 * x64).mean(axis=1),
         "That is the mean of x^2: subtract mean * mean." if kind == "naive" else
         "That is the mean of x^2: subtract the mean from every value before squaring "
         "(deviation = x - mean)."),
    ]
    if kind == "welford":
        candidates.append((_welford_squared_delta(x64) / n,
                           "That is Welford's update with m2 += delta * delta (the old mean "
                           "twice): m2 += delta * (value - mean), with the mean already updated."))
        if not np.isfinite(got).all():
            return (" Some variances are NaN or inf: a division by a count of 0? (add 1 to the "
                    "count before dividing delta by it)")
    for candidate, text in candidates:
        if candidate is None:
            continue
        with np.errstate(invalid="ignore"):
            if np.allclose(got, candidate, rtol=1e-3, atol=0) and \
                    not np.allclose(candidate, var, rtol=1e-3, atol=0):
                return " " + text
    return ""


def _welford_squared_delta(x64):
    """m2 of Welford's update done wrong, m2 += delta * delta (delta = value - old mean)."""
    mean = np.zeros(x64.shape[0])
    m2 = np.zeros(x64.shape[0])
    for count, value in enumerate(x64.T, start=1):
        delta = value - mean
        m2 += delta * delta
        mean += delta / count
    return m2


def _run_variance(ns, inputs, mode):
    x, kind = inputs["x"], inputs["kind"]
    if kind == "two-pass":
        return ns["variance_two_pass"](x.copy())
    if kind == "naive":
        return ns["variance_naive"](x.copy())
    if kind == "welford":
        return ns["variance_welford"](x.copy())
    x64 = x.astype(np.float64)
    left = [row[:s] for row, s in zip(x64, inputs["split"])]
    right = [row[s:] for row, s in zip(x64, inputs["split"])]
    a, b = _stats32(left), _stats32(right)
    empty = inputs["both_empty"]
    a = tuple(np.where(empty, np.float32(0), v) for v in a)
    b = tuple(np.where(empty, np.float32(0), v) for v in b)
    return ns["welford_combine"](*a, *b)


def _reference_variance(inputs):
    return inputs["x"].astype(np.float64).var(axis=1)


def _verify_variance(got, expected, inputs, mode):
    x, kind = inputs["x"], inputs["kind"]
    rows, cols = x.shape
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=1), x64.var(axis=1)
    if kind != "combine":
        got = np.asarray(got, dtype=np.float64).reshape(-1)
        if got.shape != (rows,):
            raise Mismatch(f"expected one variance per row, shape ({rows},); got {got.shape}")
        if kind == "naive":
            # its own error bound: rounding of the sums of x and x^2, magnified by cancellation
            k = 4 * cols
            tol = k * U * ((x64 * x64).mean(axis=1) + mean * mean) + 1e-30
            what = "naive variance"
        else:
            seq = cols if kind == "welford" else 1
            k = 16 + 4 * math.sqrt(seq) + 2 * math.log2(max(cols, 2)) + \
                (4 * math.sqrt(cols) if kind == "two-pass" else 0)
            tol = k * U * (var + np.abs(mean) * np.sqrt(var)) + (2 * U * mean) ** 2
            what = f"{kind} variance"
        bad = np.nonzero(~(np.abs(got - var) <= tol))[0]
        if bad.size:
            r = int(bad[0])
            hint = ""
            if kind != "naive" and abs(mean[r]) > 100 * math.sqrt(var[r]):
                hint = (f" This row's mean is {abs(mean[r]) / math.sqrt(var[r]):.3g} times its "
                        "standard deviation: E[x^2] - E[x]^2 cancels catastrophically there.")
            hint = _variance_hint(kind, got, x64) or hint
            raise Mismatch(f"{what} of row {r} ({rows} x {cols} float32): expected "
                           f"{var[r]:.9g}, got {got[r]:.9g}; |diff| {abs(got[r] - var[r]):.3g} "
                           f"> tolerance {tol[r]:.3g}.{hint}")
        return
    # combine: each row split in two at inputs["split"]
    try:
        c_mean, c_m2, c_count = (np.asarray(v, dtype=np.float64).reshape(-1) for v in got)
    except (TypeError, ValueError):
        raise Mismatch("welford_combine must return (mean, m2, count)") from None
    empty = inputs["both_empty"]
    want_count = np.where(empty, 0, cols)
    want_mean = np.where(empty, 0.0, mean)
    want_m2 = np.where(empty, 0.0, var * cols)
    if np.isnan(c_mean).any() or np.isnan(c_m2).any():
        r = int(np.nonzero(np.isnan(c_mean) | np.isnan(c_m2))[0][0])
        raise Mismatch(f"combine of pair {r} gives NaN: the combine of two empty sides "
                       "(count 0 and 0) must be (0, 0, 0), without dividing by 0")
    if not np.array_equal(c_count, want_count):
        r = int(np.nonzero(c_count != want_count)[0][0])
        raise Mismatch(f"pair {r}: count {c_count[r]:g}, expected {want_count[r]}")
    std = np.sqrt(var)
    k = 16 + 2 * math.log2(cols)
    tol_mean = k * U * (np.abs(mean) + std)
    tol_m2 = k * U * cols * (var + np.abs(mean) * std) + cols * (2 * U * mean) ** 2
    for name, value, want, tol in (("mean", c_mean, want_mean, tol_mean),
                                   ("m2", c_m2, want_m2, tol_m2)):
        bad = np.nonzero(~(np.abs(value - want) <= tol))[0]
        if bad.size:
            inner = [i for i in bad if 0 < inputs["split"][i] < cols and not empty[i]]
            r = int(inner[0] if inner else bad[0])  # a pair with two non-empty sides explains more
            s = int(inputs["split"][r])
            hint = ""
            if name == "m2" and s not in (0, cols):
                left, right = x64[r, :s], x64[r, s:]
                without = ((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum()
                if math.isclose(value[r], without, rel_tol=1e-4):
                    hint = (" That is m2_a + m2_b alone: the delta^2 n_a n_b / n term (the "
                            "spread between the two means) is missing.")
            if name == "mean" and s not in (0, cols):
                la, lb = s, cols - s
                ma, mb = x64[r, :s].mean(), x64[r, s:].mean()
                # within the tolerance of a right answer: float32 rounding, not a 1e-7 rtol
                if abs(value[r] - (ma + (mb - ma) * la / cols)) <= tol[r]:
                    hint = " The weights are swapped: mean = mean_a + delta * n_b / n."
                if abs(value[r] - (ma + mb) / 2) <= tol[r] and la != lb:
                    hint = " That is the plain average of the two means: weight them by count."
            raise Mismatch(f"combine of pair {r} (n_a = {s}, n_b = {cols - s}): {name} expected "
                           f"{want[r]:.9g}, got {value[r]:.9g}; |diff| "
                           f"{abs(value[r] - want[r]):.3g} > {tol[r]:.3g}.{hint}")


# --- exercises 2-4: the kernels -----------------------------------------------------------------

UNWRITTEN_BITS = 0x7FC0DEAD  # the NaN mean and rstd start as: a payload no arithmetic makes
PAD_FILL = 7.0  # what the padding after each row of y holds (no normalised value is exactly 7.0)


def unwritten(n: int) -> np.ndarray:
    """``n`` float32 NaN whose bits (:data:`UNWRITTEN_BITS`) tell an element never written
    from a NaN that a kernel computed and stored."""
    return np.full(n, UNWRITTEN_BITS, np.uint32).view(np.float32)


def never_written(array: np.ndarray) -> np.ndarray:
    """Where a float32 array still holds :func:`unwritten`'s NaN."""
    return np.ascontiguousarray(array, np.float32).view(np.uint32) == UNWRITTEN_BITS


def _device_args(inputs: dict, padded: bool = False):
    """``(x, gamma, beta, affine, eps, y, mean, rstd)`` on the device; y starts as NaN, mean
    and rstd as :func:`unwritten`.

    ``padded`` (the kernel exercises): x and y are views of padded rows
    (:func:`grader.launch.padded_rows`): 16 bytes of NaN after each row of x, so that on a
    GPU a load one past the end of a row reads NaN (not the next row's first element), and
    16 bytes of :data:`PAD_FILL` after each row of y, so that a store there is seen. Else x
    is followed by ``GUARD`` elements of NaN and y is exact. A case marked ``exact`` gets
    buffers of exactly the data's size, so that memcheck sees a read past the last row's
    end."""
    cuda = L.cuda()
    x = inputs["x"]
    rows, cols = x.shape
    if getattr(inputs.get("case"), "exact", False):  # nothing after the data: for memcheck
        d_x = cuda.to_device(x)
        y = y_full = cuda.to_device(np.full((rows, cols), np.nan, dtype=x.dtype))
    elif padded:
        d_x, _ = L.padded_rows(x, 1)
        host_y = np.full((rows, cols + L.row_pad(x.dtype)), PAD_FILL, dtype=x.dtype)
        host_y[:, :cols] = np.nan
        y_full = cuda.to_device(host_y)
        y = y_full[:, :cols]
    else:
        d_x = L.guarded_input(x).reshape(rows, cols)
        y = y_full = cuda.to_device(np.full((rows, cols), np.nan, dtype=x.dtype))
    if cuda.config.ENABLE_CUDASIM:
        from workbook.sim.global_races import watch

        watch(y, "y")
    mean = L.output(rows, np.nan, np.float32, "mean")
    rstd = L.output(rows, np.nan, np.float32, "rstd")
    mean.copy_to_device(unwritten(rows))
    rstd.copy_to_device(unwritten(rows))
    inputs["y_full"] = y_full
    return (d_x, cuda.to_device(inputs["gamma"]), cuda.to_device(inputs["beta"]),
            bool(inputs["affine"]), np.float32(inputs["eps"]), y, mean, rstd)


def _outputs(args, inputs: dict | None = None):
    """``(y, mean, rstd)`` on the host; with the padded y of ``inputs``, after checking that
    no store went past the end of a row."""
    y_full = (inputs or {}).get("y_full")
    if y_full is None or y_full is args[5]:
        return tuple(a.copy_to_host() for a in args[5:])
    cols = args[5].shape[1]
    host = y_full.copy_to_host()
    pads, _ = L.outside_changes(host, args[5].shape, PAD_FILL)
    if pads:
        which = _rows_text(np.array(pads), len(host))
        raise Mismatch(f"the kernel wrote past the end of rows {which} of y (the padding after "
                       f"column {cols - 1} changed): check the column bound (col < cols) of "
                       "every store")
    return (np.ascontiguousarray(host[:, :cols]), args[6].copy_to_host(), args[7].copy_to_host())


def launch_with_shared(kernel, grid, block, shared_bytes, *args) -> None:
    """Launch with ``shared_bytes`` of dynamic shared memory (opting in above 48 KiB)."""
    from workbook.occupancy import allow_dynamic_shared_memory

    allow_dynamic_shared_memory(kernel, shared_bytes, args)
    kernel[grid, block, 0, shared_bytes](*args)
    L.cuda().synchronize()


@cache
def _warp_kernel(factory, cols_per_thread, width, rows_per_access):
    return factory(cols_per_thread, width, rows_per_access)


def _run_warp(ns, inputs, mode):
    case = inputs["case"]
    kernel = _warp_kernel(ns["make_warp_layernorm"], *case.config)
    args = _device_args(inputs, padded=True)
    L.launch(kernel, case.grid, case.block, *args)
    return _outputs(args, inputs)


def _run_block(entry: str, shared: bool):
    def run(ns, inputs, mode):
        case = inputs["case"]
        args = _device_args(inputs, padded=True)
        shared_bytes = 4 * case.size if shared else 0
        launch_with_shared(ns[entry], case.grid, case.block, shared_bytes, *args)
        return _outputs(args, inputs)

    return run


def _verify_kernel(got, expected, inputs, mode):
    case = inputs["case"]
    if case.config:
        seq = case.config[0]
    else:
        seq = -(-case.size // case.block)
    expect_layer_norm(got, inputs, expected, seq)


SIM_BLOCK = 64  # threads per block of the simulator's boundary cases: two warps
GPU_BLOCK = 128  # the block of most GPU cases
UNROLL = 4  # the lesson's UNROLL: elements each thread of a block kernel loads at once


def _rows_ending_mid_tile(rows_per_warp: int, rows_per_block: int) -> int:
    """A row count whose last row falls inside a warp's rows in the second block, one row
    into a thread group's rows (or, with one row per warp, inside the second block)."""
    return rows_per_block + (rows_per_warp // 2 | 1)


def warp_boundary_cases(block: int = SIM_BLOCK) -> tuple[NormCase, ...]:
    """Boundary shapes of the warp kernel, from its launch parameters: for each
    configuration ``(cols_per_thread, width, rows_per_access)``, a row one element short of
    what the group covers (``col == cols`` falls on the last lane) and a row whose last
    pass has one element; rows that end one row into a group's rows inside a warp of the
    second block (a grid of two blocks), or on the grid-stride loop's second pass (one)."""
    configs = ((1, 8, 2), (1, 16, 2), (1, 32, 1), (2, 32, 1), (3, 32, 2))
    cases = []
    for per_thread, width, per_access in configs:
        for cols in (per_thread * width - 1, (per_thread - 1) * width + width // 2 + 1):
            rows_per_warp = 32 // width * per_access
            grid = 2 - len(cases) % 2
            rows = _rows_ending_mid_tile(rows_per_warp, block // width * per_access)
            kind = ("normal", "eps")[len(cases) % 2]
            cases.append(NormCase(cols, kind, rows=rows, config=(per_thread, width, per_access),
                                  affine=len(cases) % 3 != 1, block=block, grid=grid))
    return tuple(cases)


def block_boundary_cases(blocks=(32, SIM_BLOCK)) -> tuple[NormCase, ...]:
    """Boundary shapes of the block kernels, from their launch parameters: row lengths one
    element short of and one over what a block covers in one pass (``block``) and in one
    unrolled pass (``UNROLL * block``), one past a block beyond that (where the thread
    whose next element would be ``col == cols`` is in its second unrolled pass), and, for
    the first block size, one short of two unrolled passes (every thread but the last loads
    all UNROLL elements of its second pass; the last one's last element is past the row);
    float32 rows of ordinary values, where the statistics' tolerance is tight; three rows
    for a grid of two blocks. tests/test_case_coverage.py says which shapes reach which
    path of the kernels' loops."""
    cases = []
    for block in blocks:
        span = UNROLL * block
        sizes = (block - 1, block + 1, span - 1, span + 1, span + block + 1)
        if block == blocks[0]:
            sizes += (2 * span - 1,)
        for cols in sizes if block == blocks[0] else sizes[1::2]:
            cases.append(NormCase(cols, "normal", rows=3, affine=len(cases) % 3 != 1,
                                  block=block, grid=2))
    return tuple(cases)


def _warp_cases():
    def c(rows, cols, config, kind, affine=True, eps=1e-5, block=64, grid=1, dtype="float32"):
        return NormCase(cols, kind, rows=rows, config=config, affine=affine, eps=eps,
                        block=block, grid=grid, dtype=dtype)

    sim = (
        c(7, 1, (1, 1, 2), "eps", eps=1e-3),
        c(9, 3, (1, 4, 2), "normal"),
        c(37, 8, (1, 8, 2), "large-mean", affine=False),
        c(5, 32, (1, 32, 1), "large-mean"),
        c(6, 45, (2, 32, 1), "normal", affine=False, grid=2),
        c(4, 100, (4, 32, 1), "eps", eps=1e-5),
        c(7, 70, (4, 32, 2), "large-mean"),
        c(3, 13, (1, 16, 2), "eps", eps=0.1, affine=False),
        *warp_boundary_cases(),
    )
    gpu = (
        c(1001, 1, (1, 1, 2), "eps", eps=1e-3, block=128, grid=3),
        c(999, 3, (1, 4, 2), "normal", block=128, grid=7),
        c(4099, 8, (1, 8, 2), "large-mean", affine=False, block=128, grid=5),
        c(2000, 32, (1, 32, 1), "large-mean", block=128, grid=100),
        c(1000, 45, (2, 32, 1), "normal", affine=False, block=256, grid=9),
        c(777, 100, (4, 32, 1), "eps", block=128, grid=13),
        c(1003, 300, (10, 32, 2), "large-mean", block=128, grid=64),
        c(513, 1024, (32, 32, 1), "large-mean", block=128, grid=40),
        c(300, 1000, (32, 32, 1), "eps", eps=1e-5, affine=False, block=128, grid=1000),
    )
    # the boundary shapes of GPU launches whose kernels the cases above compile anyway
    configs = {case.config for case in gpu}
    gpu += tuple(case for case in warp_boundary_cases(GPU_BLOCK) if case.config in configs)
    return {"sim": sim, "gpu": gpu}


def _block_cases():
    def c(rows, cols, kind, affine=True, eps=1e-5, block=32, grid=2):
        return NormCase(cols, kind, rows=rows, affine=affine, eps=eps, block=block, grid=grid)

    sim = (
        c(3, 1, "eps", eps=1e-3),
        c(5, 200, "large-mean"),
        c(4, 129, "eps", affine=False),
        c(3, 300, "normal", block=64),
        c(2, 37, "large-mean", eps=0.1, affine=False, block=64, grid=1),
        *block_boundary_cases(),
    )
    gpu = (
        c(100, 1, "eps", eps=1e-3, block=128, grid=7),
        c(1000, 1025, "large-mean", block=128, grid=100),
        c(333, 4096, "eps", affine=False, block=256, grid=64),
        c(257, 12345, "normal", block=512, grid=129),
        c(64, 32768, "large-mean", block=512, grid=64),
        c(500, 2000, "large-mean", eps=0.1, affine=False, block=512, grid=2000),
        *block_boundary_cases((GPU_BLOCK,)),
    )
    return {"sim": sim, "gpu": gpu}


# --- exercise 5: the dispatcher ---------------------------------------------------------------

def _dispatch_cases():
    def c(rows, cols, kind, dtype="float32", affine=True, eps=1e-5, note=""):
        return NormCase(cols, kind, rows=rows, dtype=dtype, affine=affine, eps=eps, grid=0,
                        note=note)

    sim = (
        c(5, 1, "eps", "float16", eps=1e-3),
        c(9, 31, "large-mean", "float16", affine=False),
        c(4, 100, "normal"),
        c(3, 1024, "large-mean", "float16"),
        c(3, 1100, "eps", affine=False),
        c(2, 2500, "large-mean", "float16"),
        c(4, 64, "normal", note="plan warp"),
        c(16, 3000, "normal", note="plan smem"),
        c(2, 70000, "normal", note="plan uncached"),
        *plan_boundary_cases(),
    )
    gpu = (
        c(4099, 1, "eps", "float16", eps=1e-3),
        c(1000, 31, "large-mean", "float16", affine=False),
        c(49152, 128, "normal", "float16"),
        c(2000, 1000, "large-mean"),
        c(1000, 1024, "large-mean", "float16"),
        c(999, 1025, "eps", affine=False),
        c(1000, 8192, "large-mean", "float16"),
        c(128, 32768, "normal"),
        c(8, 70000, "large-mean"),
        c(4, 64, "normal", note="plan warp"),
        c(16, 3000, "normal", note="plan smem"),
        c(2, 70000, "normal", note="plan uncached"),
        *plan_boundary_cases(gpu=True),
    )
    # the plans first: a wrong choice is named before a launch fails on it (on a GPU, shared
    # memory that does not fit is a launch error)
    return {"sim": _plans_first(sim), "gpu": _plans_first(gpu)}


WARP_MAX_COLS = 1024  # the lesson's: the warp kernel up to here, then the block kernels
SMEM_PER_BLOCK = 232448  # bytes of shared memory one block can have on an H100 (opt-in)


def plan_boundary_cases(gpu: bool = False) -> tuple[NormCase, ...]:
    """Plans (no launch) on each side of each decision: the warp kernel up to WARP_MAX_COLS
    columns, then the shared-memory kernel while the row's 4-byte values fit in a block's
    shared memory, then the uncached one. In the simulator, whose occupancy estimate counts
    the dynamic shared memory only, the last decision falls between SMEM_PER_BLOCK / 4 columns
    and one more; on a GPU the kernel's own static shared memory (the student's block
    all-reduce) moves it down a little, so a row of 50000 columns stands for the smem side."""
    fits = 50000 if gpu else SMEM_PER_BLOCK // 4
    return tuple(NormCase(cols, "normal", rows=2, grid=0, note=f"plan {kind}")
                 for cols, kind in ((WARP_MAX_COLS, "warp"), (WARP_MAX_COLS + 1, "smem"),
                                    (fits, "smem"), (SMEM_PER_BLOCK // 4 + 1, "uncached")))


def _plans_first(cases):
    return tuple(sorted(cases, key=lambda case: not case.note.startswith("plan")))


def _run_dispatch(ns, inputs, mode):
    case = inputs["case"]
    cuda = L.cuda()
    if case.note.startswith("plan"):
        args = _device_args(inputs)
        plan = ns["plan_layer_norm"](args)
        return ("plan", plan)
    d_x = cuda.to_device(inputs["x"])
    if inputs["affine"]:
        out = ns["layer_norm"](d_x, cuda.to_device(inputs["gamma"]),
                               cuda.to_device(inputs["beta"]), float(inputs["eps"]))
    else:
        out = ns["layer_norm"](d_x, eps=float(inputs["eps"]))
    cuda.synchronize()
    if not isinstance(out, tuple) or len(out) != 3:
        raise Mismatch("layer_norm must return (y, mean, rstd)")
    return tuple(a.copy_to_host() for a in out)


def _verify_dispatch(got, expected, inputs, mode):
    case = inputs["case"]
    if isinstance(got[0], str):
        _verify_plan(got[1], case)
        return
    expect_layer_norm(got, inputs, expected, -(-case.size // 32))


def _verify_plan(plan, case):
    try:
        kind, kernel, grid, block, shared_bytes = plan
    except (TypeError, ValueError):
        raise Mismatch("plan_layer_norm must return (kind, kernel, grid, block, "
                       "shared_bytes)") from None
    want = case.note.split()[-1]
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


def _reference_dispatch(inputs):
    if inputs["case"].note.startswith("plan"):
        return None
    return reference_layer_norm(inputs)


# --- the catalogue ------------------------------------------------------------------------------

def exact_size(cases) -> tuple[NormCase, ...]:
    """The cases compute-sanitizer runs (at most ``SANITIZED_MAX_SIZE`` elements), in buffers
    of exactly the data's size: memcheck then reports a read or write past the last row's
    end, which the padding of the checks would hide from it."""
    return tuple(replace(c, exact=True) for c in cases if c.size * c.rows <= SANITIZED_MAX_SIZE)


def _exercise(id_, title, entry, run, verify, cases, make=make_layer_norm,
              reference=reference_layer_norm, needs=(), exact=False, points=1.0):
    return Exercise(
        id=f"layernorm.{id_}", lesson=LESSON, title=title, entry=entry, make_inputs=make,
        run=run, reference=reference, verify=verify, cases=cases, needs=needs, points=points,
        sanitizer_cases=exact_size(cases["gpu"]) if exact else None,
    )


EXERCISES = (
    _exercise("variance", "variance three ways (two-pass, naive, Welford) and Chan's combine",
              "variance_welford", _run_variance, _verify_variance, _variance_cases(),
              make=_make_variance, reference=_reference_variance,
              needs=("variance_two_pass", "variance_naive", "welford_update",
                     "welford_combine"), points=2),
    _exercise("warp", "warp LayerNorm: a thread group per row, the row in registers",
              "make_warp_layernorm", _run_warp, _verify_kernel, _warp_cases(),
              needs=("welford_warp_allreduce",), exact=True, points=3),
    _exercise("block_smem", "block LayerNorm with the row in shared memory",
              "layernorm_block_smem_kernel", _run_block("layernorm_block_smem_kernel", True),
              _verify_kernel, _block_cases(), needs=("welford_block_allreduce",), exact=True,
              points=3),
    _exercise("block_uncached", "uncached block LayerNorm (the row read twice)",
              "layernorm_block_uncached_kernel",
              _run_block("layernorm_block_uncached_kernel", False), _verify_kernel,
              _block_cases(), needs=("welford_block_allreduce",), exact=True, points=2),
    _exercise("dispatch", "dispatcher by row length and occupancy, float32 and float16",
              "layer_norm", _run_dispatch, _verify_dispatch, _dispatch_cases(),
              reference=_reference_dispatch, needs=("plan_layer_norm",), points=2),
)


# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---

TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22"
WARP_SHAPE = (32768, 1024)   # 128 MiB of float32 each way
BLOCK_SHAPE = (8192, 4096)   # 128 MiB of float32 each way
DISPATCH_SHAPE = (393216, 16)  # 24 MiB of float32 each way


def _profile_inputs(shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = (3 + rng.standard_normal(shape, dtype=np.float32)).astype(dtype)
    case = NormCase(shape[1], "normal", rows=shape[0], dtype=np.dtype(dtype).name)
    return {"x": x, "gamma": np.ones(shape[1], dtype), "beta": np.zeros(shape[1], dtype),
            "affine": True, "eps": np.float32(1e-5), "case": case}


def _profile_warp(ns):
    kernel = _warp_kernel(ns["make_warp_layernorm"], 32, 32, 1)
    small = _device_args(_profile_inputs((64, 1000)))
    L.launch(kernel, 4, 128, *small)  # compiles: not profiled
    args = _device_args(_profile_inputs(WARP_SHAPE))
    L.launch(kernel, WARP_SHAPE[0] // 4, 128, *args)


def _profile_block(entry, block, shared):
    def profile(ns):
        kernel = ns[entry]
        small = _device_args(_profile_inputs((8, 2000)))
        launch_with_shared(kernel, 8, block, 4 * 2000 if shared else 0, *small)  # compiles
        args = _device_args(_profile_inputs(BLOCK_SHAPE))
        launch_with_shared(kernel, BLOCK_SHAPE[0], block,
                           4 * BLOCK_SHAPE[1] if shared else 0, *args)

    return profile


def _profile_dispatch(ns):
    cuda = L.cuda()
    rng = np.random.default_rng(0)
    for shape in ((64, DISPATCH_SHAPE[1]), DISPATCH_SHAPE):  # the first call compiles
        x = cuda.to_device(rng.standard_normal(shape, dtype=np.float32))
        ns["layer_norm"](x)
    cuda.synchronize()


def _rule(metric, label, why, **bound):
    return MetricRule(metric=metric, label=label, why=why, tuned_on=TUNED_ON, **bound)


DURATION = "gpu__time_duration.sum"
GLOBAL_LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
LAYERNORM_KERNELS = ("warp_layernorm_kernel", "layernorm_block_smem_kernel",
                     "layernorm_block_uncached_kernel")

METRICS = {
    "warp": dict(
        # Duration and DRAM throughput do not separate the three-pass variant on an H200
        # (1.19x and 0.84x: the re-reads hit L2), so only the load count is a rule here.
        rules=(_rule(GLOBAL_LOADS, "global load requests", "the row stays in registers: "
                     "each element is loaded from global memory once", max_ratio=1.2),),
        profile=_profile_warp, kernels=("warp_layernorm_kernel",)),
    "block_smem": dict(
        rules=(_rule(DURATION, "duration", "the whole block computes the statistics in "
                     "parallel while loads are in flight", max_ratio=1.3),
               _rule(DRAM_PCT, "DRAM throughput (% of peak)", "a memory-bound kernel should "
                     "keep DRAM busy", min_ratio=0.75)),
        profile=_profile_block("layernorm_block_smem_kernel", 256, True)),
    "block_uncached": dict(
        rules=(_rule(DURATION, "duration", "coalesced loads and stores, UNROLL loads in "
                     "flight per thread", max_ratio=1.3),
               _rule(DRAM_PCT, "DRAM throughput (% of peak)", "a memory-bound kernel should "
                     "keep DRAM busy", min_ratio=0.75)),
        profile=_profile_block("layernorm_block_uncached_kernel", 512, False)),
    "dispatch": dict(
        rules=(_rule(DURATION, f"duration ({DISPATCH_SHAPE[0]} x {DISPATCH_SHAPE[1]} float32)",
                     "short rows need thread groups narrower than a warp: a whole warp per "
                     "16-column row leaves half its lanes idle", max_ratio=1.3),),
        profile=_profile_dispatch, kernels=LAYERNORM_KERNELS),
}

NO_METRIC_RULE = {"variance": "CPU-only: numpy"}  # exercises without a metric rule, and why

EXERCISES = with_metric_rules(EXERCISES, METRICS, NO_METRIC_RULE)

# The slow variants replace whole exercise cells, so they bring the all-reductions those
# cells define: the workbook's copies (the same algorithm as the solution's).
_WARP_ALLREDUCE = """
from workbook.welford import welford_warp_allreduce
"""

_BLOCK_ALLREDUCE = """
from workbook.welford import welford_block_allreduce

UNROLL = 4
"""

# Slow but correct submissions, each (description, text in the solution cell, replacement):
# with no text, the replacement is the whole cell. Each must fail every metric rule of its
# exercise on a GPU (benchmarks/metric_rules.py checks this).
SLOW_VARIANTS = {
    "layernorm.warp": ("no register buffer: the row is read three times from global memory "
                       "(mean, variance, normalisation)", None, _WARP_ALLREDUCE + """

def make_warp_layernorm(cols_per_thread, width, rows_per_access):
    @cuda.jit
    def warp_layernorm_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
        rows, cols = x.shape
        lane = cuda.threadIdx.x % width
        step = cuda.gridsize(1) // width
        row = cuda.grid(1) // width
        warp_row = row - (cuda.threadIdx.x % WARP_SIZE) // width
        while warp_row < rows:
            m = m2 = n = float32(0.0)
            for i in range(cols_per_thread):
                col = i * width + lane
                if row < rows and col < cols:
                    m, m2, n = welford_update_device(m, m2, n, float32(x[row, col]))
            own = n
            m, m2, n = welford_warp_allreduce(m, m2, n, width)
            squares = float32(0.0)
            for i in range(cols_per_thread):
                col = i * width + lane
                if row < rows and col < cols:
                    d = float32(x[row, col]) - m
                    squares += d * d
            # partial results that share one mean: their m2 simply add up
            m, m2, n = welford_warp_allreduce(m, squares, own, width)
            if row < rows:
                inv_std = float32(1.0) / math.sqrt(m2 / n + eps)
                if lane == 0:
                    mean[row] = m
                    rstd[row] = inv_std
                for i in range(cols_per_thread):
                    col = i * width + lane
                    if col < cols:
                        value = (float32(x[row, col]) - m) * inv_std
                        if affine:
                            value = value * float32(gamma[col]) + float32(beta[col])
                        y[row, col] = value
            row += step
            warp_row += step

    return warp_layernorm_kernel
"""),
    "layernorm.block_smem": ("thread 0 of each block computes the statistics serially",
                             None, _BLOCK_ALLREDUCE + """

@cuda.jit
def layernorm_block_smem_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
    buf = cuda.shared.array(0, float32)
    stats = cuda.shared.array(2, float32)
    rows, cols = x.shape
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x
    while row < rows:
        for col in range(t, cols, cuda.blockDim.x):
            buf[col] = float32(x[row, col])
        cuda.syncthreads()
        if t == 0:  # serial, in float64 so that it stays as accurate as the parallel one
            m = m2 = n = 0.0
            for col in range(cols):
                value = float(buf[col])
                n += 1.0
                delta = value - m
                m += delta / n
                m2 += delta * (value - m)
            stats[0] = m
            stats[1] = 1.0 / math.sqrt(m2 / n + eps)
            mean[row] = stats[0]
            rstd[row] = stats[1]
        cuda.syncthreads()
        m = stats[0]
        inv_std = stats[1]
        for col in range(t, cols, cuda.blockDim.x):
            value = (buf[col] - m) * inv_std
            if affine:
                value = value * float32(gamma[col]) + float32(beta[col])
            y[row, col] = value
        cuda.syncthreads()
        row += cuda.gridDim.x
"""),
    "layernorm.block_uncached": ("each thread handles a contiguous chunk of the row "
                                 "(uncoalesced loads and stores)", None, """
@cuda.jit
def layernorm_block_uncached_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
    rows, cols = x.shape
    t = cuda.threadIdx.x
    chunk = (cols + cuda.blockDim.x - 1) // cuda.blockDim.x
    first = t * chunk
    last = min(first + chunk, cols)
    row = cuda.blockIdx.x
    while row < rows:
        m = m2 = n = float32(0.0)
        for col in range(first, last):
            m, m2, n = welford_update_device(m, m2, n, float32(x[row, col]))
        m, m2, n = welford_block_allreduce(m, m2, n)
        inv_std = float32(1.0) / math.sqrt(m2 / n + eps)
        if t == 0:
            mean[row] = m
            rstd[row] = inv_std
        for col in range(first, last):
            value = (float32(x[row, col]) - m) * inv_std
            if affine:
                value = value * float32(gamma[col]) + float32(beta[col])
            y[row, col] = value
        row += cuda.gridDim.x
"""),
    "layernorm.dispatch": ("a whole warp per row even for rows of 16 columns (no thread "
                           "groups, one row per access)",
                           "kernel, width, rows_per_access = warp_kernel_for(cols)",
                           "kernel, width, rows_per_access = warp_kernel_for(max(cols, 33))"),
}

# Correct submissions written differently from the reference solution, each (description,
# text in the solution cell, replacement) as above. Each must be graded correct on its
# output and pass every metric rule of its exercise on a GPU: benchmarks/metric_rules.py
# profiles them beside the slow variants and records both groups' ratios, the evidence the
# rules' thresholds are set from.
_WARP_TWO_PASS = _WARP_ALLREDUCE + """from workbook.collectives import warp_all_reduce_sum


def make_warp_layernorm(cols_per_thread, width, rows_per_access):
    @cuda.jit
    def warp_layernorm_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
        rows, cols = x.shape
        buf = cuda.local.array((rows_per_access, cols_per_thread), float32)
        row_sum = cuda.local.array(rows_per_access, float32)
        lane = cuda.threadIdx.x % width
        step = (cuda.gridsize(1) // width) * rows_per_access
        first_row = (cuda.grid(1) // width) * rows_per_access
        warp_row = first_row - ((cuda.threadIdx.x % WARP_SIZE) // width) * rows_per_access
        n = float32(cols)
        while warp_row < rows:
            for r in range(rows_per_access):
                row = first_row + r
                total = float32(0.0)
                for i in range(cols_per_thread):
                    col = i * width + lane
                    value = float32(0.0)  # padding and missing rows: zeros, added exactly
                    if row < rows and col < cols:
                        value = float32(x[row, col])
                    buf[r, i] = value
                    total += value
                row_sum[r] = total
            for r in range(rows_per_access):
                row = first_row + r
                m = warp_all_reduce_sum(row_sum[r], width) / n
                squares = float32(0.0)
                for i in range(cols_per_thread):
                    if i * width + lane < cols:
                        d = buf[r, i] - m
                        squares += d * d
                var = warp_all_reduce_sum(squares, width) / n
                if row < rows:
                    inv_std = float32(1.0) / math.sqrt(var + eps)
                    if lane == 0:
                        mean[row] = m
                        rstd[row] = inv_std
                    for i in range(cols_per_thread):
                        col = i * width + lane
                        if col < cols:
                            value = (buf[r, i] - m) * inv_std
                            if affine:
                                value = value * float32(gamma[col]) + float32(beta[col])
                            y[row, col] = value
            first_row += step
            warp_row += step

    return warp_layernorm_kernel
"""

_SMEM_TWO_PASS = _BLOCK_ALLREDUCE + """from workbook.collectives import block_all_reduce_sum


@cuda.jit
def layernorm_block_smem_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
    buf = cuda.shared.array(0, float32)
    values = cuda.local.array(UNROLL, float32)
    rows, cols = x.shape
    t = cuda.threadIdx.x
    block = cuda.blockDim.x
    n = float32(cols)
    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        total = float32(0.0)
        for start in range(t, cols, UNROLL * block):
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    values[k] = float32(x[row, col])
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    buf[col] = values[k]
                    total += values[k]
        m = block_all_reduce_sum(total) / n
        squares = float32(0.0)
        for col in range(t, cols, block):  # the thread's own elements: no barrier needed
            d = buf[col] - m
            squares += d * d
        inv_std = float32(1.0) / math.sqrt(block_all_reduce_sum(squares) / n + eps)
        if t == 0:
            mean[row] = m
            rstd[row] = inv_std
        for col in range(t, cols, block):
            value = (buf[col] - m) * inv_std
            if affine:
                value = value * float32(gamma[col]) + float32(beta[col])
            y[row, col] = value
"""

# the first pass's use of a chunk of UNROLL loaded values: a whole chunk (every column inside
# the row) gets its own mean and m2 from two short passes over the registers and one Chan
# combine (one division instead of UNROLL); the row's last partial chunk element by element
_CHUNK_COMBINE = """            if start + (UNROLL - 1) * block < cols:
                total = float32(0.0)
                for k in range(UNROLL):
                    total += values[k]
                chunk_mean = total / float32(UNROLL)
                chunk_m2 = float32(0.0)
                for k in range(UNROLL):
                    d = values[k] - chunk_mean
                    chunk_m2 += d * d
                m, m2, n = welford_combine_device(m, m2, n, chunk_mean, chunk_m2,
                                                  float32(UNROLL))
            else:
                for k in range(UNROLL):
                    if start + k * block < cols:
                        m, m2, n = welford_update_device(m, m2, n, values[k])
"""

CORRECT_VARIANTS = {
    "layernorm.warp": (
        ("xor butterfly, no broadcast (every lane combines)",
         """        b_mean = cuda.shfl_down_sync(FULL_MASK, mean, offset)
        b_m2 = cuda.shfl_down_sync(FULL_MASK, m2, offset)
        b_count = cuda.shfl_down_sync(FULL_MASK, count, offset)
        mean, m2, count = welford_combine_device(mean, m2, count, b_mean, b_m2, b_count)
        offset //= 2
    lane = cuda.threadIdx.x % WARP_SIZE
    first = lane - lane % width
    mean = cuda.shfl_sync(FULL_MASK, mean, first)
    m2 = cuda.shfl_sync(FULL_MASK, m2, first)
    count = cuda.shfl_sync(FULL_MASK, count, first)
""",
         """        b_mean = cuda.shfl_xor_sync(FULL_MASK, mean, offset)
        b_m2 = cuda.shfl_xor_sync(FULL_MASK, m2, offset)
        b_count = cuda.shfl_xor_sync(FULL_MASK, count, offset)
        mean, m2, count = welford_combine_device(mean, m2, count, b_mean, b_m2, b_count)
        offset //= 2
"""),
        ("two-pass over the registers (xor-butterfly sums of x, then of squared deviations)",
         None, _WARP_TWO_PASS),
        ("per-lane two-pass, Chan's combine across lanes",
         """                m = m2 = n = float32(0.0)
                for i in range(cols_per_thread):
                    col = i * width + lane
                    value = float32(0.0)
                    if row < rows and col < cols:
                        value = float32(x[row, col])
                        m, m2, n = welford_update_device(m, m2, n, value)
                    buf[r, i] = value
""",
         """                total = n = float32(0.0)
                for i in range(cols_per_thread):
                    col = i * width + lane
                    value = float32(0.0)
                    if row < rows and col < cols:
                        value = float32(x[row, col])
                        n += float32(1.0)
                    buf[r, i] = value
                    total += value
                m = total / max(n, float32(1.0))
                m2 = float32(0.0)
                for i in range(cols_per_thread):
                    if row < rows and i * width + lane < cols:
                        d = buf[r, i] - m
                        m2 += d * d
"""),
    ),
    "layernorm.block_smem": (
        ("UNROLL = 8", "UNROLL = 4  #", "UNROLL = 8  #"),
        ("two-pass from the shared row (block sums of x, then of squared deviations)",
         None, _SMEM_TWO_PASS),
        ("a Chan combine per whole chunk of UNROLL values",
         """            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    buf[col] = values[k]
                    m, m2, n = welford_update_device(m, m2, n, values[k])
""",
         """            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    buf[col] = values[k]
""" + _CHUNK_COMBINE),
    ),
    "layernorm.block_uncached": (
        ("UNROLL = 8 for this kernel", "@cuda.jit\ndef layernorm_block_uncached_kernel",
         "UNROLL = 8  # more loads in flight per thread\n\n\n"
         "@cuda.jit\ndef layernorm_block_uncached_kernel"),
        ("a Chan combine per whole chunk of UNROLL values",
         """            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    m, m2, n = welford_update_device(m, m2, n, values[k])
""", _CHUNK_COMBINE),
        ("second pass prefetches gamma and beta with x",
         """            rstd[row] = inv_std
        for start in range(t, cols, UNROLL * block):
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    values[k] = float32(x[row, col])
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    value = (values[k] - m) * inv_std
                    if affine:
                        value = value * float32(gamma[col]) + float32(beta[col])
                    y[row, col] = value
""",
         """            rstd[row] = inv_std
        scale = cuda.local.array(UNROLL, float32)
        shift = cuda.local.array(UNROLL, float32)
        for start in range(t, cols, UNROLL * block):
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    values[k] = float32(x[row, col])
                    if affine:
                        scale[k] = float32(gamma[col])
                        shift[k] = float32(beta[col])
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    value = (values[k] - m) * inv_std
                    if affine:
                        value = value * scale[k] + shift[k]
                    y[row, col] = value
"""),
    ),
    "layernorm.dispatch": (
        ("blocks of 256 threads for the warp kernel", "        block = 128\n        rows_per_block",
         "        block = 256\n        rows_per_block"),
        ("a warp-kernel grid covering every row (no grid-stride pass)",
         "        resident = max(1, max_active_blocks(kernel, block, 0, args))\n"
         "        grid = min(-(-rows // rows_per_block), WAVES * resident * sm_count())",
         "        grid = -(-rows // rows_per_block)"),
        ("grids capped at 4 waves instead of 32", "def plan_layer_norm(args):",
         "WAVES = 4  # fewer blocks, each looping over more rows\n\n\n"
         "def plan_layer_norm(args):"),
    ),
}
