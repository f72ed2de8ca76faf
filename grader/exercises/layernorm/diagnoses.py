"""Lesson 04's diagnoses: the likely mistake behind a wrong LayerNorm result, each named
only where the result it gives differs from the right one."""

from __future__ import annotations

import math

import numpy as np


def unwritten_hint(rows: np.ndarray, total: int, case) -> str:
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


def count_hint(mean, rstd, rows64, eps, tol_mean, rel_rstd) -> str:
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


def mean_hint(got: float, row: np.ndarray, case) -> str:
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


def rstd_hint(got, rows64, eps, kappa) -> str:
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


def y_hint(y, x64, mean, rstd, inputs, wrong) -> str:
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
