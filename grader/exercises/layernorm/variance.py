"""Lesson 04, exercise 1 on the CPU: the three variances and Chan's combine, run on each
case's rows and checked against float64, with the mistake named where it can be."""

from __future__ import annotations

import math

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.layernorm.checks import U


def _stats32(parts):
    mean = np.array([p.mean() if p.size else 0.0 for p in parts], np.float32)
    m2 = np.array([((p - p.mean()) ** 2).sum() if p.size else 0.0 for p in parts], np.float32)
    count = np.array([p.size for p in parts], np.float32)
    return mean, m2, count


def variance_hint(kind: str, got, x64) -> str:
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


def run_variance(ns, inputs, mode):
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


def verify_variance(got, expected, inputs, mode):
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
            hint = variance_hint(kind, got, x64) or hint
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
