"""Lesson 03's output checks: the tolerance, and a diagnosis of a wrong result.

Outputs are compared with a float64 reference element by element. The tolerance
of an output ``y = exp(x - m) / s`` is relative: ``u * (|x - m| + 4)`` for the
rounding of ``x - m`` (amplified by exp) and for exp, the division and the final
rounding, plus ``gamma_d = d u / (1 - d u)`` for the sum of ``d = cols + 2``
positive terms (the worst order of additions), with ``u = 2^-24`` (float32
compute); float16 outputs add their own rounding ``2^-11 * |y|`` and half the
spacing of float16's smallest numbers, ``2^-24``. Log-softmax outputs
``(x - m) - log(s)`` get the absolute tolerance ``u * (|x - m| + |log s| + 4) +
gamma_d`` plus the rounding of the output, ``u * |y|`` (``2^-11 * |y|`` for
float16). Expected NaN and ``-inf`` must be matched exactly.
"""

from __future__ import annotations

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.softmax.buffers import SENTINEL, rows_text
from grader.exercises.softmax.inputs import reference
from grader.exercises.softmax.mistakes import known_mistake
from grader.exercises.softmax.plans import WARP_MAX_COLS, expected_variant

U32 = 2.0**-24
U16 = 2.0**-11
F16_FLOOR = 2.0**-24
F32_FLOOR = 1e-37


def tolerance(inputs: dict) -> tuple[np.ndarray, str]:
    """Per-element tolerance and a sentence explaining it."""
    x = inputs["x"].astype(np.float64)
    cols = x.shape[1]
    depth = cols + 2
    gamma = depth * U32 / (1 - depth * U32)
    expected = reference(inputs)
    with np.errstate(invalid="ignore"):
        shifted = np.abs(x - x.max(axis=1, keepdims=True))
    shifted = np.nan_to_num(shifted, nan=0.0, posinf=0.0)
    half = inputs["x"].dtype == np.float16
    magnitude = np.nan_to_num(np.abs(expected), nan=0.0, posinf=0.0)
    if inputs["log"]:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_sum = np.abs(np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(
                axis=1, keepdims=True)))
        log_sum = np.nan_to_num(log_sum, nan=0.0)
        rounding = U16 if half else U32
        tol = U32 * (shifted + log_sum + 4) + gamma + rounding * magnitude
        why = (f"absolute tolerance u*(|x - max| + |log sum| + 4) + gamma_{depth} + "
               f"{'2^-11' if half else 'u'}*|y| (rounding of the output), u = 2^-24, "
               f"gamma_{depth} = {gamma:.2g}")
        return tol, why
    relative = U32 * (shifted + 4) + gamma + (U16 if half else 0.0)
    floor = F16_FLOOR if half else F32_FLOOR
    why = (f"relative tolerance u*(|x - max| + 4) + gamma_{depth}"
           + (" + 2^-11 (float16 rounding)" if half else "")
           + f", u = 2^-24, gamma_{depth} = {gamma:.2g}, plus {floor:.3g} absolute")
    return relative * magnitude + floor, why


# --- comparison with a diagnosis -----------------------------------------------------------------

def expect_softmax(got, expected, inputs: dict, what: str = "y") -> None:
    """Compare an output matrix with the float64 reference; explain what went wrong."""
    x = inputs["x"]
    got = np.asarray(got)
    if got.shape != x.shape:
        raise Mismatch(f"{what} has shape {got.shape}; expected {x.shape} (one output per input)")
    if got.dtype != x.dtype:
        raise Mismatch(f"{what} has dtype {got.dtype}; expected {x.dtype}, the input's dtype "
                       "(compute in float32, return the input's type)")
    got = got.astype(np.float64)
    unwritten = got == SENTINEL
    if unwritten.any():
        rows = np.nonzero(unwritten.any(axis=1))[0]
        first = tuple(int(i) for i in np.argwhere(unwritten)[0])
        raise Mismatch(
            f"{int(unwritten.sum())} elements of {what} were never written (first {what}"
            f"[{first[0]}, {first[1]}]), in rows {rows_text(rows)}: check that the loop "
            "over rows reaches every row (grid-stride: a grid smaller than the number of "
            "rows), and that the columns a thread covers reach the end of the row")
    tol, why = tolerance(inputs)
    nan_expected = np.isnan(expected)
    with np.errstate(invalid="ignore"):
        bad = np.where(nan_expected, ~np.isnan(got),
                       np.where(np.isinf(expected), got != expected,
                                ~(np.abs(got - expected) <= tol)))
    if not bad.any():
        return
    rows = np.nonzero(bad.any(axis=1))[0]
    r, c = (int(i) for i in np.argwhere(bad)[0])
    lines = [f"{int(bad.sum())} wrong elements in rows {rows_text(rows)}; first {what}[{r}, {c}]:"
             f" expected {expected[r, c]:.7g}, got {got[r, c]:.7g} (input {float(x[r, c]):.7g};"
             f" {why})."]
    lines.extend(diagnose(got, expected, inputs, bad, rows))
    raise Mismatch(" ".join(lines))


# the hint that lists the possible causes of a NaN: "NaN/inf in row 3 where the result ..."
GENERIC_NAN, GENERIC_CAUSES = "NaN/inf in row", "where the result is finite"


def diagnose(got, expected, inputs, bad, rows) -> list[str]:
    x = inputs["x"].astype(np.float64)
    hints = []
    finite_expected = np.isfinite(expected)
    broken = bad & finite_expected & ~np.isfinite(got)
    if broken.any():
        row = int(np.nonzero(broken.any(axis=1))[0][0])
        finite = x[row][np.isfinite(x[row])]
        if finite.size and finite.max() > 80:
            hints.append(f"NaN/inf in row {row}, whose largest input is {finite.max():.4g}: "
                         "exp overflows float32 beyond 88.7 -- subtract the row max before exp.")
        elif finite.size and finite.max() < -80 and not inputs["log"]:
            hints.append(f"NaN/inf in row {row}, whose inputs are all far below 0 (the largest "
                         f"is {finite.max():.4g}): exp of each underflows float32 to 0 beyond "
                         "-87, so a max that is not subtracted, or that starts at 0 instead of "
                         "-inf, leaves a sum of 0 and 0 / 0 = NaN. Start the max at -inf (or the "
                         "row's first value) and subtract it before exp.")
        else:
            hints.append(f"{GENERIC_NAN} {row} {GENERIC_CAUSES}: a value read from "
                         "past the end of the row (the memory after each row holds NaN in "
                         "these tests: a bound `col <= cols`?), memory nobody wrote (shared "
                         "memory not stored yet -- a missing barrier?) or a sum that stayed 0.")
            if not np.isfinite(x[row]).all():
                hints.append("This row has -inf entries: -inf - (-inf) is NaN; a value that is "
                             "-inf must contribute exp(-inf - max) = 0, and a thread that has "
                             "seen only -inf must add nothing to the sum.")
    if not inputs["log"] and not hints:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = got / expected
        scaled = []
        for row in rows:
            usable = finite_expected[row] & (expected[row] > 1e-30)
            if usable.sum() >= 2:
                values = ratio[row][usable]
                if np.allclose(values, values[0], rtol=1e-4) and not np.isclose(values[0], 1):
                    scaled.append(int(row))
        if scaled:
            hints.append(f"Rows {rows_text(scaled)} are proportional to the right answer but do "
                         "not sum to 1: the sum missed or repeated some values (a reduction over "
                         "the wrong group of lanes or threads, or a shared slot read too early).")
    known = known_mistake(got, expected, inputs, rows)
    if known:  # named exactly: the list of possible causes of a NaN says less
        hints = [h for h in hints if not (h.startswith(GENERIC_NAN) and GENERIC_CAUSES in h)]
        hints.append(known)
    if not hints:
        hints.append("Values that change from run to run point to a race (a missing "
                     "cuda.syncthreads()); stable wrong values to a wrong index, stride or pack "
                     "layout (a value written to one place and read from another).")
    return hints


# --- the exercises' verify functions -------------------------------------------------------------

def verify(got, expected, inputs, mode):
    expect_softmax(got, expected, inputs)


def verify_plan(plan, allowed, case):
    """The plan's choice for ``case`` (no launch): a kernel of ``allowed``, a block size the
    kernels take, and a shared-memory kernel given room for the row."""
    try:
        name, _, rows_per_block, threads, shared = plan
    except (TypeError, ValueError):
        raise Mismatch("plan must return (name, kernel, rows_per_block, threads, "
                       "shared_bytes)") from None
    what = f"plan for {case.rows}x{case.cols} {case.dtype}"
    if name not in allowed:
        raise Mismatch(f"{what} chose {name!r}; expected {' or '.join(map(repr, allowed))} "
                       f"(the warp kernel up to {WARP_MAX_COLS} columns; longer float16 rows "
                       "uncached; longer float32 rows in shared memory while a block of 128 "
                       "threads fits, then uncached)")
    if threads % 32 or not 32 <= threads <= 1024 or rows_per_block < 1:
        raise Mismatch(f"{what}: {threads} threads per block, {rows_per_block} rows per "
                       "block; the kernels need a multiple of 32 threads, at most 1024, and "
                       "at least one row per block")
    if name == "block_smem" and shared < 4 * case.cols:
        raise Mismatch(f"{what}: {shared} bytes of dynamic shared memory; the row needs "
                       f"{4 * case.cols}")


def verify_dispatch(got, expected, inputs, mode):
    if inputs["case"].kind == "plan":
        verify_plan(got, expected, inputs["case"])
        return
    if "table" in inputs:
        table = dict(zip((128, 256, 512, 1024), inputs["table"]))
        if got != expected:
            raise Mismatch(f"choose_block_size with resident blocks per SM {table} returned "
                           f"{got}; expected {expected} (the largest block size whose count "
                           "equals the count for 128 threads; 0 when 128 threads do not fit)")
        return
    name, y = got
    allowed = expected_variant(inputs["case"].cols, inputs["case"].dtype)
    if name not in allowed:
        raise Mismatch(f"softmax_gpu chose {name!r} for {inputs['case'].cols} columns; expected "
                       f"{' or '.join(map(repr, allowed))} (the warp kernel up to {WARP_MAX_COLS} "
                       "columns; longer float16 rows uncached; longer float32 rows in shared "
                       "memory while a block of 128 threads fits, then uncached)")
    expect_softmax(y, expected, inputs)


def verify_log(got, expected, inputs, mode):
    if inputs["case"].calls == "softmax_gpu":
        name, y = got
        expect_softmax(y, expected, inputs, what="y (softmax_gpu with log=True)")
    else:
        expect_softmax(got, expected, inputs, what="log_softmax_cpu(x)")
