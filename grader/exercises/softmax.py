"""Lesson 03 (softmax): how each exercise is launched, what it must compute, and its tests.

Every test is a ``(rows, cols)`` matrix of float32 or float16 whose rows are
softmaxed (or log-softmaxed). Inputs come in kinds that catch the common bugs:

* ``normal`` -- standard normal values times 3;
* ``large`` -- rows shifted by +-100 to 1000: exp overflows (or every term underflows
  to 0) unless the row max is subtracted first;
* ``masked`` -- about a third of the entries are ``-inf`` (attention masks): they
  must give exactly 0 (``-inf`` for log-softmax) without disturbing the rest;
* ``-inf rows`` -- ``masked``, and some rows entirely ``-inf``: their result is NaN
  (as ``torch.softmax`` gives; ``-inf - (-inf)`` is NaN, no special case needed);
* ``wide`` -- values spread over ``[-200, 0]``: probabilities below float32's range,
  whose log must still be finite.

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

Every output array starts filled with 7.0 (no softmax or log-softmax value), with
``GUARD_ROWS`` guard rows after the last: an element left at 7.0 was never written,
and a changed guard row means a write past the end. The input has guard rows of NaN
after it (on a GPU a read past the end reads NaN; in the simulator it raises). The
kernel exercises also pad every row of the input with 16 bytes of NaN and every row of
the output with 7.0 (the arrays the kernel gets are views with a longer row stride):
on a GPU a read one past the end of a row reads NaN, and a write there is seen.

The simulator cases of the kernel exercises add boundary shapes made from each
kernel's own launch parameters (:func:`warp_boundary_cases`,
:func:`block_boundary_cases`): columns just below, at and above what one pass of a
thread group or block covers, for each pack size, and rows that end inside a warp's
tile of rows or inside a block. The dispatcher's plan is checked alone, without a launch,
on both sides of each of its decisions (:func:`plan_boundary_cases`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import SANITIZED_MAX_SIZE, Case, Exercise, Mismatch, with_metric_rules
from grader.metric_rules import MetricRule

LESSON = "03_softmax"
SENTINEL = 7.0
GUARD_ROWS = 4  # rows after the input and the output that a kernel must not touch
U32 = 2.0**-24
U16 = 2.0**-11
F16_FLOOR = 2.0**-24
F32_FLOOR = 1e-37
VECTOR = {"float32": 4, "float16": 8}  # elements in 16 bytes


@dataclass(frozen=True)
class Shape(Case):
    """A softmax test: shape, dtype, log or not, and how the kernel is configured/launched."""

    rows: int = 1
    cols: int = 1
    dtype: str = "float32"
    log: bool = False
    config: tuple = ()  # exercise-specific kernel configuration
    grid: int = 0  # 0: one block per row (block kernels) or enough for every row
    block: int = 32
    exact: bool = False  # buffers of exactly the data's size (for compute-sanitizer memcheck)

    def name(self) -> str:
        parts = [f"{self.rows}x{self.cols} {self.dtype}", self.kind]
        if self.log:
            parts.append("log")
        if self.config:
            parts.append(f"config {self.config}")
        if self.grid:
            parts.append(f"grid {self.grid}")
        if self.exact:
            parts.append("exact-size buffers")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts)


def shape(rows, cols, dtype="float32", kind="normal", **extra) -> Shape:
    return Shape(size=rows * cols, kind=kind, rows=rows, cols=cols, dtype=dtype, **extra)


# --- inputs and reference ---------------------------------------------------------------------

def make_matrix(rng: np.random.Generator, case: Shape) -> dict:
    rows, cols = case.rows, case.cols
    x = 3.0 * rng.standard_normal((rows, cols))
    if case.kind == "large":
        # even rows far above 0 (exp overflows), odd rows far below (exp underflows to 0)
        sign = np.where(np.arange(rows) % 2 == 0, 1.0, -1.0)[:, None]
        x += sign * rng.uniform(100.0, 1000.0, size=(rows, 1))
    elif case.kind == "wide":
        x = rng.uniform(-200.0, 0.0, size=(rows, cols))
    elif case.kind in ("masked", "-inf rows"):
        mask = rng.random((rows, cols)) < 0.35
        mask[np.arange(rows), rng.integers(0, cols, size=rows)] = False  # one finite per row
        x[mask] = -np.inf
        if case.kind == "-inf rows":
            x[rng.random(rows) < 0.3] = -np.inf
            x[rows // 2] = -np.inf  # at least one
    return {"x": x.astype(case.dtype), "log": case.log, "case": case}


def reference(inputs: dict) -> np.ndarray:
    """Softmax (or log-softmax) of each row in float64; NaN for rows of -inf."""
    x = inputs["x"].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = x - x.max(axis=1, keepdims=True)
        total = np.exp(shifted).sum(axis=1, keepdims=True)
        if inputs["log"]:
            return shifted - np.log(total)
        return np.exp(shifted) / total


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


# --- comparison with a diagnosis ----------------------------------------------------------------

def _rows_text(rows) -> str:
    rows = [int(r) for r in rows]
    head = ", ".join(map(str, rows[:8]))
    return head + (f", ... ({len(rows)} rows)" if len(rows) > 8 else "")


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
            f"[{first[0]}, {first[1]}]), in rows {_rows_text(rows)}: check that the loop "
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
    lines = [f"{int(bad.sum())} wrong elements in rows {_rows_text(rows)}; first {what}[{r}, {c}]:"
             f" expected {expected[r, c]:.7g}, got {got[r, c]:.7g} (input {float(x[r, c]):.7g};"
             f" {why})."]
    lines.extend(_diagnose(got, expected, inputs, bad, rows))
    raise Mismatch(" ".join(lines))


def _diagnose(got, expected, inputs, bad, rows) -> list[str]:
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
            hints.append(f"Rows {_rows_text(scaled)} are proportional to the right answer but do "
                         "not sum to 1: the sum missed or repeated some values (a reduction over "
                         "the wrong group of lanes or threads, or a shared slot read too early).")
    known = _known_mistake(got, expected, inputs, rows)
    if known:  # named exactly: the list of possible causes of a NaN says less
        hints = [h for h in hints if not (h.startswith(GENERIC_NAN) and GENERIC_CAUSES in h)]
        hints.append(known)
    if not hints:
        hints.append("Values that change from run to run point to a race (a missing "
                     "cuda.syncthreads()); stable wrong values to a wrong index, stride or pack "
                     "layout (a value written to one place and read from another).")
    return hints


# the hint that lists the possible causes of a NaN: "NaN/inf in row 3 where the result ..."
GENERIC_NAN, GENERIC_CAUSES = "NaN/inf in row", "where the result is finite"

# A known mistake is named only where its result differs from the right one, and ``got``
# equals it on every wrong row: each candidate below is what that mistake computes.

def _known_mistake(got, expected, inputs, rows) -> str:
    """A sentence naming the mistake whose result ``got`` equals on the wrong rows, or ""."""
    x = inputs["x"]
    case = inputs.get("case")
    config = getattr(case, "config", ())
    candidates = [(_in_float16(x, inputs["log"]), FLOAT16_TEXT)]
    if inputs["log"]:
        candidates.append((_log_of_softmax(x), LOG_OF_SOFTMAX_TEXT))
    else:
        candidates.append((_sum_unshifted(x), SUM_UNSHIFTED_TEXT))
    if len(config) == 4:  # the warp kernel: (pack, cols_per_thread, width, rows_per_thread)
        candidates.append((_warp_sum_over_32_lanes(x, config, inputs["log"]),
                           WARP_32_LANES_TEXT.format(width=config[2])))
        pad = config[1] * config[2] - x.shape[1]
        candidates.append((_zero_padding(x, pad, inputs["log"]),
                           ZERO_PADDING_TEXT.format(pad=pad, width=config[2], cpt=config[1],
                                                    cols=x.shape[1])))
    rtol = 2e-3 if x.dtype == np.float16 else 1e-4
    for candidate, text in candidates:
        if candidate is not None and _matches(got[rows], candidate[rows], rtol) and \
                not _matches(candidate[rows], expected[rows], rtol):
            return text
    return ""


FLOAT16_TEXT = ("That is the softmax computed in float16 arithmetic: its sums and quotients "
                "round to float16 at every step. Compute in float32 (x.astype(np.float32)) and "
                "round to the input's dtype once, at the end.")
LOG_OF_SOFTMAX_TEXT = ("That is log(softmax(x)), the log of a quotient: exp(x - max) underflows "
                       "float32 to 0 for inputs about 87 or more below the row max, and log(0) "
                       "= -inf (or it loses digits before that). Compute x - max - log(sum(exp(x "
                       "- max))) instead: no exp of the result, nothing underflows.")
SUM_UNSHIFTED_TEXT = ("Each row is its softmax times exp(-max): the sum adds exp(x) without "
                      "subtracting the row max, while the numerator exp(x - max) subtracts it. "
                      "Subtract the same max in both.")
WARP_32_LANES_TEXT = ("That is the sum reduced over the warp's 32 lanes instead of the row's "
                      "group of {width}: the groups of a warp hold different rows, so each row's "
                      "sum takes in the other rows of its tile (and the NaN of rows past the "
                      "last, whose max is -inf). Reduce over width = {width} lanes, as the max.")
ZERO_PADDING_TEXT = ("That is the softmax of each row with {pad} zero(s) appended: a group of "
                     "{width} lanes holds {width} x {cpt} slots per row, and the slots past "
                     "the row's {cols} columns count in the max and the sum. Fill them with "
                     "-inf: exp(-inf - max) = 0 adds nothing.")


def _matches(a, b, rtol) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):
        return bool(np.allclose(a, b, rtol=rtol, atol=1e-30, equal_nan=True))


def _in_float16(x, log):
    """What softmax_cpu's numpy code gives when it computes in the input's float16."""
    if x.dtype != np.float16:
        return None
    with np.errstate(all="ignore"):
        shifted = x - x.max(axis=1, keepdims=True)
        if log:
            return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        e = np.exp(shifted)
        return e / e.sum(axis=1, keepdims=True)


def _log_of_softmax(x):
    with np.errstate(all="ignore"):
        shifted = x.astype(np.float32) - x.astype(np.float32).max(axis=1, keepdims=True)
        e = np.exp(shifted)
        return np.log(e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


def _sum_unshifted(x):
    """exp(x - max) / sum(exp(x)), in float64."""
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return np.exp(x64 - x64.max(axis=1, keepdims=True)) / np.exp(x64).sum(
            axis=1, keepdims=True)


def _warp_sum_over_32_lanes(x, config, log):
    """The warp kernel with each row's sum reduced over 32 lanes instead of its group's:
    rows first + r of every group of a tile share one sum (see make_warp_softmax)."""
    _pack, _cpt, width, per_thread = config
    if width >= 32:
        return None
    groups = 32 // width
    tile = groups * per_thread
    x64 = x.astype(np.float64)
    rows = x64.shape[0]
    with np.errstate(all="ignore"):
        shifted = x64 - x64.max(axis=1, keepdims=True)
        sums = np.full(-(-rows // tile) * tile, np.nan)  # rows past the last: -inf - -inf
        sums[:rows] = np.exp(shifted).sum(axis=1)
        shared = sums.reshape(-1, groups, per_thread).sum(axis=1, keepdims=True)
        total = np.broadcast_to(shared, (sums.size // tile, groups, per_thread)).reshape(-1)
        total = total[:rows, None]
        return shifted - np.log(total) if log else np.exp(shifted) / total


def _zero_padding(x, pad, log):
    """Softmax of each row with ``pad`` zeros appended (padding slots filled with 0)."""
    if pad <= 0:
        return None
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        m = np.maximum(x64.max(axis=1, keepdims=True), 0.0)
        total = np.exp(x64 - m).sum(axis=1, keepdims=True) + pad * np.exp(-m)
        return x64 - m - np.log(total) if log else np.exp(x64 - m) / total


# --- launching --------------------------------------------------------------------------------

def _device_input(x: np.ndarray, padded: bool = False, exact: bool = False):
    """``x`` on the device with guard rows of NaN after it; the view of the first rows.

    ``padded`` (the kernel exercises): each row is followed by 16 bytes of NaN as well
    (:func:`grader.launch.padded_rows`), so that on a GPU a read one past the end of a
    row reads NaN, not the first element of the next row. ``exact``: nothing after the
    data, so that compute-sanitizer's memcheck sees a read past the last row's end."""
    if exact:
        return L.cuda().to_device(x)
    if padded:
        return L.padded_rows(x, GUARD_ROWS)[0]
    padded_host = np.full((x.shape[0] + GUARD_ROWS, x.shape[1]), np.nan, dtype=x.dtype)
    padded_host[: x.shape[0]] = x
    return L.cuda().to_device(padded_host)[: x.shape[0]]


def _device_output(shape, dtype, padded: bool = False, exact: bool = False):
    """An output filled with SENTINEL, and the whole array including its guard rows (and,
    ``padded``, the SENTINEL columns after each row; ``exact``, neither)."""
    if exact:
        view = full = L.cuda().to_device(np.full(shape, SENTINEL, dtype=dtype))
    elif padded:
        view, full = L.padded_output(shape, SENTINEL, dtype, GUARD_ROWS)
    else:
        full = L.cuda().to_device(np.full((shape[0] + GUARD_ROWS, shape[1]), SENTINEL,
                                          dtype=dtype))
        view = full[: shape[0]]
    if L.cuda().config.ENABLE_CUDASIM:
        from workbook.sim.global_races import watch

        watch(view, "y")
    return view, full


def _finish(full, rows: int, cols: int | None = None) -> np.ndarray:
    """The output's rows, after checking that nothing past them (nor, ``cols`` given,
    past the end of a row) was written."""
    L.cuda().synchronize()
    host = full.copy_to_host()
    cols = host.shape[1] if cols is None else cols
    pads, guards = L.outside_changes(host, (rows, cols), SENTINEL)
    if guards:
        raise Mismatch("the kernel wrote past the last row of y (the guard rows after it "
                       "changed): check the row bounds")
    if pads:
        raise Mismatch(f"the kernel wrote past the end of rows {_rows_text(pads)} of y (the "
                       f"padding after column {cols - 1} changed): check the column bound "
                       "(col < cols) of every store")
    return np.ascontiguousarray(host[:rows, :cols])


class _quiet_numpy(warnings.catch_warnings):
    """Simulated kernels compute with numpy scalars, which warn about -inf - (-inf)."""

    def __enter__(self):
        result = super().__enter__()
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        return result


@cache
def _kernel(factory, config):
    return factory(*config)


def _launch_kernel(kernel, grid, block, shared, x, y):
    if shared > 48 * 1024 and not L.cuda().config.ENABLE_CUDASIM:
        from workbook.occupancy import allow_dynamic_shared_memory

        allow_dynamic_shared_memory(kernel, shared, (x, y))
    with _quiet_numpy():
        kernel[grid, block, 0, shared](x, y)
        L.cuda().synchronize()


# --- exercise 1: CPU ----------------------------------------------------------------------------

def _run_cpu(entry):
    def run(ns, inputs, mode):
        x = inputs["x"]
        before = x.copy()
        with _quiet_numpy():  # overflow and log(0) warnings: the comparison explains them
            got = ns[entry](x)
        if not np.array_equal(before, x, equal_nan=True):
            raise Mismatch(f"{entry} modified its input; it must return a new array")
        return got

    return run


def _verify(got, expected, inputs, mode):
    expect_softmax(got, expected, inputs)


def _cpu_cases(log=False):
    kinds = ("normal", "large", "masked", "-inf rows") + (("wide",) if log else ())
    cases = [shape(1, 1, log=log), shape(1, 1, kind="-inf rows", log=log)]
    for dtype in ("float32", "float16"):
        for kind in kinds:
            cases.append(shape(6, 37, dtype, kind, log=log))
    cases.extend((shape(3, 2000, log=log), shape(3, 2000, "float16", log=log)))
    return tuple(cases)


# --- exercise 2: three kernels --------------------------------------------------------------------

def _run_naive(ns, inputs, mode):
    x = inputs["x"]
    d_x = _device_input(x)
    d_y, full = _device_output(x.shape, x.dtype)
    with _quiet_numpy():
        ns["softmax_naive"](d_x, d_y)
    return _finish(full, x.shape[0])


NAIVE_CASES = {
    "sim": (shape(1, 1), shape(3, 5, kind="large"), shape(5, 33, "float16", "masked"),
            shape(4, 17, kind="-inf rows"), shape(2, 70, "float16", "large")),
    "gpu": (shape(1, 1), shape(1000, 5, kind="large"), shape(777, 33, "float16", "masked"),
            shape(300, 100, kind="-inf rows"), shape(64, 4000, "float16", "large"),
            shape(2000, 1024)),
}


# --- exercise 3: warp softmax ---------------------------------------------------------------------

def warp_config(cols: int, pack: int) -> tuple[int, int, int]:
    """(cols_per_thread, group_width, rows_per_thread), as the lesson's dispatcher picks it."""
    if cols <= 32 * pack:
        width = 1
        while width * pack < cols:
            width *= 2
        return pack, width, 2
    packs = -(-cols // (32 * pack))
    return packs * pack, 32, 1


def pack_for(dtype: str, cols: int) -> int:
    return VECTOR[dtype] if cols % VECTOR[dtype] == 0 else 1


def _warp_case(rows, cols, dtype="float32", kind="normal", *, pack=None, config=None, grid=0,
               block=32, log=False):
    pack = pack_for(dtype, cols) if pack is None else pack
    per_thread, width, rows_per_thread = config or warp_config(cols, pack)
    return shape(rows, cols, dtype, kind, log=log, grid=grid, block=block,
                 config=(pack, per_thread, width, rows_per_thread))


SIM_BLOCK = 64  # threads per block of the simulator's boundary cases: two warps
EDGE_KINDS = ("normal", "masked", "large", "-inf rows")


def _edge_columns(width: int, pack: int) -> tuple[int, ...]:
    """Row lengths at the edge of what ``width`` lanes moving ``pack`` elements each cover
    in one pass: one pack short (the last lane's pack starts at ``cols``: a bound
    ``col <= cols`` reads past the row) and one pack over (a last pass with one pack)."""
    return (width * pack - pack, width * pack + pack)


def _rows_ending_mid_tile(rows_per_warp: int, rows_per_block: int) -> int:
    """A row count whose last row falls inside a warp's tile of rows in the second block,
    one row into a thread's rows (or, with one row per warp, inside the second block)."""
    return rows_per_block + (rows_per_warp // 2 | 1)


def warp_boundary_cases(block: int = SIM_BLOCK) -> tuple[Shape, ...]:
    """Boundary shapes of the warp kernel, from its launch parameters: for each pack size
    (16 bytes of float32 or float16, and 1 where a row is not a multiple of 16 bytes), row
    lengths at the edges of a narrow group's pass (``4 * pack``), of a warp's pass
    (``32 * pack``) and of a lane's second pack (``64 * pack``), in blocks of ``block``
    threads; the rows end inside a warp's tile of rows (even with a grid of one block,
    whose grid-stride loop ends there on its second pass)."""
    cases = []
    for dtype, pack in (("float32", 4), ("float32", 1), ("float16", 8)):
        for width in (4, 32, 64):
            for cols in _edge_columns(width, pack):
                if pack_for(dtype, cols) != pack:
                    continue
                per_thread, group, rows_per_thread = warp_config(cols, pack)
                per_warp = 32 // group * rows_per_thread
                rows = _rows_ending_mid_tile(per_warp, block // group * rows_per_thread)
                k = len(cases)
                cases.append(_warp_case(rows, cols, dtype, EDGE_KINDS[k % 4], block=block,
                                        grid=k % 2, log=k % 3 == 2))
    return tuple(cases)


WARP_CASES = {
    "sim": (
        _warp_case(5, 1, grid=1),
        _warp_case(13, 7, kind="masked", grid=1),
        _warp_case(11, 32, kind="large", grid=1, block=64),
        _warp_case(9, 40, "float16", grid=2),
        _warp_case(5, 100, kind="-inf rows", grid=1),
        _warp_case(4, 33, kind="large", grid=1),
        _warp_case(3, 300, "float16", "masked", grid=2, log=True),
        _warp_case(3, 64, pack=2, config=(2, 32, 1), kind="large", log=True),
        _warp_case(6, 64, config=(4, 16, 2), kind="-inf rows", grid=1, log=True),
        *warp_boundary_cases(),
    ),
    "gpu": (
        _warp_case(1000, 1, block=128),
        _warp_case(4099, 7, kind="masked", block=128),
        _warp_case(3001, 32, kind="large", grid=7, block=128),
        _warp_case(2000, 32, "float16", block=128),
        _warp_case(999, 100, kind="-inf rows", block=128),
        _warp_case(513, 129, kind="large", grid=3, block=128),
        _warp_case(1000, 300, "float16", "masked", block=128, log=True),
        _warp_case(4096, 512, "float16", block=128),
        _warp_case(2000, 1024, kind="large", block=128),
        _warp_case(1500, 1024, "float16", "-inf rows", grid=11, block=128, log=True),
        _warp_case(800, 1000, block=256, log=True),
    ),
}

GPU_BLOCK = 128  # the block of most GPU cases


def _compile_key(case: Shape) -> tuple:
    """What a kernel is compiled for: a case with a new key costs a compilation on a GPU."""
    return (case.dtype, case.config, case.log)


def _reusing(cases, known) -> tuple[Shape, ...]:
    """The ``cases`` whose kernels ``known`` cases compile anyway."""
    keys = {_compile_key(c) for c in known}
    return tuple(c for c in cases if _compile_key(c) in keys)


def exact_size(cases) -> tuple[Shape, ...]:
    """The cases compute-sanitizer runs (at most ``SANITIZED_MAX_SIZE`` elements), in buffers
    of exactly the data's size: memcheck then reports a read or write past the last row's
    end, which the guard rows and padding of the checks would hide from it."""
    return tuple(replace(c, exact=True) for c in cases if c.size <= SANITIZED_MAX_SIZE)


# On a GPU: the boundary shapes of its launches whose kernels the cases compile anyway (the
# simulator pass of gpu mode runs all of the simulator's).
WARP_CASES["gpu"] += _reusing(warp_boundary_cases(GPU_BLOCK), WARP_CASES["gpu"])


def _run_warp(ns, inputs, mode):
    case, x = inputs["case"], inputs["x"]
    pack, per_thread, width, rows_per_thread = case.config
    kernel = _kernel(ns["make_warp_softmax"],
                     (np.dtype(case.dtype), pack, per_thread, width, rows_per_thread, case.log))
    rows_per_block = case.block // width * rows_per_thread
    grid = case.grid or L.blocks_for(case.rows, rows_per_block)
    d_x = _device_input(x, padded=True, exact=case.exact)
    d_y, full = _device_output(x.shape, x.dtype, padded=True, exact=case.exact)
    _launch_kernel(kernel, grid, case.block, 0, d_x, d_y)
    return _finish(full, case.rows, case.cols)


# --- exercises 4 and 5: block kernels -------------------------------------------------------------

def _block_case(rows, cols, dtype="float32", kind="normal", *, pack=None, grid=0, block=32,
                log=False):
    pack = pack_for(dtype, cols) if pack is None else pack
    return shape(rows, cols, dtype, kind, log=log, grid=grid, block=block, config=(pack,))


def block_boundary_cases(blocks=(32, SIM_BLOCK)) -> tuple[Shape, ...]:
    """Boundary shapes of the block kernels, from their launch parameters: for blocks of
    each size in ``blocks`` and each pack size (float16 packs in the first size only),
    rows one pack short of and one pack over what the block's threads cover in one pass
    (``block * pack``); a grid of two blocks whose loop over the rows ends after the first
    block's second row."""
    cases = []
    for block in blocks:
        packs = (("float32", 4), ("float32", 1)) + ((("float16", 8),) if block == blocks[0]
                                                   else ())
        for dtype, pack in packs:
            for cols in _edge_columns(block, pack):
                if pack_for(dtype, cols) != pack:
                    continue
                k = len(cases)
                cases.append(_block_case(3, cols, dtype, EDGE_KINDS[k % 4], grid=2, block=block,
                                         log=k % 3 == 2))
    return tuple(cases)


BLOCK_CASES = {
    "sim": (
        _block_case(2, 1),
        _block_case(3, 7, kind="masked", grid=1),
        _block_case(3, 33, kind="large", block=64),
        _block_case(4, 64, grid=2),
        _block_case(3, 96, "float16", "-inf rows", grid=1),
        _block_case(2, 100, "float16", "large", log=True),
        _block_case(3, 200, kind="masked", grid=1, log=True),
        _block_case(2, 256, pack=2, block=64),
        *block_boundary_cases(),
    ),
    "gpu": (
        _block_case(100, 1, block=128),
        _block_case(300, 7, kind="masked", grid=1, block=128),
        _block_case(500, 1025, kind="large", block=128),
        _block_case(64, 2048, "float16", "-inf rows", grid=5, block=256),
        _block_case(257, 4096, block=512, log=True),
        _block_case(33, 8192, "float16", "masked", block=1024),
        _block_case(20, 16384, kind="large", block=1024),
        _block_case(40, 3000, "float16", block=128, log=True),
    ),
}

UNCACHED_EXTRA = {
    "sim": (_block_case(1, 700, "float16", "masked", block=64),),
    "gpu": (_block_case(8, 70000, "float16", "masked", block=1024),
            _block_case(4, 65536, kind="large", block=512, log=True)),
}

BLOCK_CASES["gpu"] += _reusing(block_boundary_cases((GPU_BLOCK, 2 * GPU_BLOCK)),
                               BLOCK_CASES["gpu"])


def _run_block(entry: str, cached: bool):
    def run(ns, inputs, mode):
        case, x = inputs["case"], inputs["x"]
        (pack,) = case.config
        kernel = _kernel(ns[entry], (np.dtype(case.dtype), pack, case.log))
        d_x = _device_input(x, padded=True, exact=case.exact)
        d_y, full = _device_output(x.shape, x.dtype, padded=True, exact=case.exact)
        shared = 4 * case.cols if cached else 0
        _launch_kernel(kernel, case.grid or case.rows, case.block, shared, d_x, d_y)
        return _finish(full, case.rows, case.cols)

    return run


# --- exercise 6: dispatcher -------------------------------------------------------------------

SMEM_LIMIT = 232448  # bytes one block can use on an H100/H200 (the simulator's estimate)
BLOCK_TABLES = (  # resident blocks per SM for 128, 256, 512, 1024 threads -> expected choice
    ((16, 8, 4, 2), 128),
    ((2, 2, 2, 2), 1024),
    ((4, 4, 2, 1), 256),
    ((3, 3, 3, 1), 512),
    ((0, 0, 0, 0), 0),
    ((1, 1, 1, 1), 1024),
)


def _dispatch_cases(log=False):
    sim = [shape(3, 1, log=log), shape(5, 7, kind="masked", log=log),
           shape(9, 32, "float16", "large", log=log), shape(2, 100, kind="-inf rows", log=log),
           shape(2, 1030, kind="large", log=log), shape(1, 2048, "float16", "masked", log=log),
           shape(2, 2100, kind="large", log=log), shape(1, 2056, "float16", "masked", log=log)]
    gpu = [shape(1, 1, log=log), shape(1000, 7, kind="masked", log=log),
           shape(3000, 32, "float16", "large", log=log), shape(513, 1000, log=log),
           shape(300, 1024, "float16", "-inf rows", log=log), shape(200, 1025, log=log),
           shape(100, 2048, kind="large", log=log), shape(50, 2050, "float16", log=log),
           shape(64, 4096, "float16", "masked", log=log), shape(32, 16384, kind="large", log=log),
           shape(8, 60000, log=log), shape(4, 100000, "float16", "masked", log=log)]
    if not log:
        sim.append(shape(1, SMEM_LIMIT // 4 + 88, kind="masked"))
        choose = tuple(shape(1, 1, kind="block size", note=f"resident blocks {table}")
                       for table, _ in BLOCK_TABLES)
        sim = list(choose) + list(plan_boundary_cases()) + sim
        gpu = list(choose) + list(plan_boundary_cases()) + gpu
    return {"sim": tuple(sim), "gpu": tuple(gpu)}


def plan_boundary_cases() -> tuple[Shape, ...]:
    """The plan alone (no launch) on each side of each of its decisions: the warp kernel up
    to WARP_MAX_COLS columns (float32 and float16), then float16 uncached, float32 in shared
    memory up to SMEM_LIMIT - 16 KiB bytes of row, uncached past SMEM_LIMIT (in between,
    either)."""
    smem_only = (SMEM_LIMIT - 16 * 1024) // 4
    columns = [(WARP_MAX_COLS, "float32"), (WARP_MAX_COLS + 1, "float32"),
               (WARP_MAX_COLS, "float16"), (WARP_MAX_COLS + 1, "float16"),
               (smem_only, "float32"), (SMEM_LIMIT // 4 + 1, "float32"),
               (SMEM_LIMIT // 4 + 1, "float16")]
    return tuple(shape(2, cols, dtype, kind="plan", note="plan only, no launch")
                 for cols, dtype in columns)


WARP_MAX_COLS = 2048  # the warp kernel up to here; then float16 goes uncached (measured)


def expected_variant(cols: int, dtype: str) -> tuple[str, ...]:
    """The kernel(s) the dispatcher may pick (near the shared-memory limit, either one)."""
    if cols <= WARP_MAX_COLS:
        return ("warp",)
    if np.dtype(dtype) == np.float16:
        return ("block_uncached",)
    if cols * 4 <= SMEM_LIMIT - 16 * 1024:
        return ("block_smem",)
    if cols * 4 > SMEM_LIMIT:
        return ("block_uncached",)
    return ("block_smem", "block_uncached")


def _table(case) -> tuple[int, ...]:
    return next(t for t, _ in BLOCK_TABLES if f"resident blocks {t}" == case.note)


def _make_dispatch(rng, case):
    if case.kind == "block size":
        return {"table": _table(case), "case": case, "log": False, "x": np.zeros((1, 1))}
    if case.kind == "plan":
        return {"case": case, "log": False, "x": np.zeros((case.rows, case.cols), case.dtype)}
    return make_matrix(rng, case)


def _reference_dispatch(inputs):
    if "table" in inputs:
        return dict(BLOCK_TABLES)[inputs["table"]]
    if inputs["case"].kind == "plan":
        return expected_variant(inputs["case"].cols, inputs["case"].dtype)
    return reference(inputs)


def _run_dispatch(ns, inputs, mode):
    if "table" in inputs:
        counts = dict(zip((128, 256, 512, 1024), inputs["table"]))
        return ns["choose_block_size"](lambda threads: counts[threads])
    case, x = inputs["case"], inputs["x"]
    if case.kind == "plan":
        return ns["plan"](L.cuda().to_device(x), L.cuda().device_array_like(x))
    d_x = _device_input(x)
    d_y, full = _device_output(x.shape, x.dtype)
    with _quiet_numpy():
        name = ns["softmax_gpu"](d_x, d_y, log=case.log) if case.log else ns["softmax_gpu"](
            d_x, d_y)
    return name, _finish(full, case.rows)


def _verify_plan(plan, allowed, case):
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


def _verify_dispatch(got, expected, inputs, mode):
    if inputs["case"].kind == "plan":
        _verify_plan(got, expected, inputs["case"])
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


# --- exercise 7: log-softmax --------------------------------------------------------------------

def _log_cases():
    gpu_part = _dispatch_cases(log=True)
    cpu = _cpu_cases(log=True)
    wide = (shape(4, 64, "float16", "wide", log=True, note="softmax_gpu"),)
    return {"sim": cpu + wide + tuple(replace(c, note="softmax_gpu") for c in gpu_part["sim"]),
            "gpu": cpu + wide + tuple(replace(c, note="softmax_gpu") for c in gpu_part["gpu"])}


def _run_log(ns, inputs, mode):
    if inputs["case"].note == "softmax_gpu":
        return _run_dispatch(ns, inputs, mode)
    return _run_cpu("log_softmax_cpu")(ns, inputs, mode)


def _verify_log(got, expected, inputs, mode):
    if inputs["case"].note == "softmax_gpu":
        name, y = got
        expect_softmax(y, expected, inputs, what="y (softmax_gpu with log=True)")
    else:
        expect_softmax(got, expected, inputs, what="log_softmax_cpu(x)")


# --- the exercises ------------------------------------------------------------------------------

def _exercise(id_, title, entry, run, cases, verify=_verify, make=make_matrix,
              ref=reference, needs=(), **more):
    return Exercise(id=f"softmax.{id_}", lesson=LESSON, title=title, entry=entry,
                    make_inputs=make, run=run, reference=ref, verify=verify, cases=cases,
                    needs=needs, **more)


EXERCISES = (
    _exercise("cpu", "numerically stable softmax in numpy", "softmax_cpu",
              _run_cpu("softmax_cpu"), {"sim": _cpu_cases(), "gpu": _cpu_cases()}, points=1),
    _exercise("naive", "naive GPU softmax: max, exp-sum and normalise kernels", "row_max_kernel",
              _run_naive, NAIVE_CASES, needs=("exp_sum_kernel", "normalize_kernel",
                                              "softmax_naive"), points=1),
    _exercise("warp", "warp softmax: a row in registers, shuffle all-reduce", "make_warp_softmax",
              _run_warp, WARP_CASES, sanitizer_cases=exact_size(WARP_CASES["gpu"]), points=3),
    _exercise("block_smem", "block softmax with the row cached in shared memory",
              "make_block_smem_softmax", _run_block("make_block_smem_softmax", True),
              BLOCK_CASES, sanitizer_cases=exact_size(BLOCK_CASES["gpu"]), points=2),
    _exercise("block_uncached", "block softmax for long rows: online max and sum",
              "make_block_uncached_softmax", _run_block("make_block_uncached_softmax", False),
              {m: BLOCK_CASES[m] + UNCACHED_EXTRA[m] for m in ("sim", "gpu")},
              sanitizer_cases=exact_size(BLOCK_CASES["gpu"] + UNCACHED_EXTRA["gpu"]), points=2),
    _exercise("dispatch", "dispatcher: kernel by columns, block size by occupancy", "softmax_gpu",
              _run_dispatch, _dispatch_cases(), verify=_verify_dispatch, make=_make_dispatch,
              ref=_reference_dispatch, needs=("choose_block_size", "plan"), points=2),
    _exercise("log", "log-softmax on the CPU and with the same kernels", "log_softmax_cpu",
              _run_log, _log_cases(), verify=_verify_log, needs=("softmax_gpu",), points=1),
)


# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---

TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22"
WARP_PROFILE = (49152, 1024)       # float32, 201 MB each way
BLOCK_PROFILE = (8192, 4096)       # float32, 134 MB each way, 16 KiB of cache per block
UNCACHED_PROFILE = (4096, 16384)   # float32, 268 MB each way
DISPATCH_PROFILE = (393216, 16)    # float32, 25 MB each way: rows a warp would leave 7/8 idle
SOFTMAX_KERNELS = ("warp_softmax_kernel", "block_smem_softmax_kernel",
                   "block_uncached_softmax_kernel")

DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SMEM_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SMEM_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"

# The row-major pack layout makes each shared-memory store or load of 32 lanes a 4-way
# conflict (3 extra wavefronts): 3/32 of the element count, about 3.1 million each way here.
# The reference counts some too (its block reductions: 0.15 M stores, 0.31 M loads on an
# H100, 2026-11-25), and a correct kernel with its own reductions 1.11x the reference's
# loads; the row-major slow variant 22x / 11x. Bound: twice the reference's count.
CONFLICT_RATIO = 2.0


def _data(rows, cols, dtype=np.float32):
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(dtype)
    cuda = L.cuda()
    return cuda.to_device(x), cuda.device_array((rows, cols), dtype)


def _profile_warp(ns):
    rows, cols = WARP_PROFILE
    pack = 4
    per_thread, width, rows_per_thread = warp_config(cols, pack)
    kernel = _kernel(ns["make_warp_softmax"],
                     (np.dtype(np.float32), pack, per_thread, width, rows_per_thread, False))
    x, y = _data(rows, cols)
    rows_per_block = 128 // width * rows_per_thread
    kernel[1, 128](x[:8], y[:8])  # compiles: not profiled
    kernel[L.blocks_for(rows, rows_per_block), 128](x, y)


def _profile_block(entry, cached, shape_, threads):
    def profile(ns):
        rows, cols = shape_
        kernel = _kernel(ns[entry], (np.dtype(np.float32), 4, False))
        x, y = _data(rows, cols)
        shared = 4 * cols if cached else 0
        for count in (2, rows):  # the first launch compiles and is not profiled
            _launch_kernel(kernel, count, threads, shared, x[:count], y[:count])

    return profile


def _profile_dispatch(ns):
    """softmax_gpu on DISPATCH_PROFILE: a first call on 64 rows compiles the kernel it picks,
    the second call's launch is profiled."""
    for rows in (64, DISPATCH_PROFILE[0]):
        x, y = _data(rows, DISPATCH_PROFILE[1])
        with _quiet_numpy():
            ns["softmax_gpu"](x, y)
    L.cuda().synchronize()


def _rule(metric, label, why, **bound):
    return MetricRule(metric=metric, label=label, why=why, tuned_on=TUNED_ON, **bound)


METRICS = {
    "warp": dict(
        rules=(_rule(DRAM_PCT, "DRAM throughput (% of peak)", "each row is read once with "
                     "16-byte coalesced loads and written once: DRAM should stay busy",
                     min_ratio=0.8),
               _rule(DURATION, "duration", "one read and one write per element, at DRAM "
                     "speed", max_ratio=1.25)),
        profile=_profile_warp, kernels=("warp_softmax_kernel",)),
    "block_smem": dict(
        rules=(_rule(SMEM_ST_CONFLICTS, "shared-memory store bank conflicts", "packs stored "
                     "column-major put the 32 lanes of a store on 32 different banks",
                     max_ratio=CONFLICT_RATIO),
               _rule(SMEM_LD_CONFLICTS, "shared-memory load bank conflicts", "packs read back "
                     "column-major: one bank per lane", max_ratio=CONFLICT_RATIO)),
        profile=_profile_block("make_block_smem_softmax", True, BLOCK_PROFILE, 128),
        kernels=("block_smem_softmax_kernel",)),
    "block_uncached": dict(
        rules=(_rule(DRAM_PCT, "DRAM throughput (% of peak)", "every thread of the block "
                     "streams 16-byte packs: DRAM should stay busy", min_ratio=0.8),
               _rule(DURATION, "duration", "two reads and one write per element, the second "
                     "read partly from L2 (correct kernels measured up to 1.13x on an H100, "
                     "one thread per row 72x)", max_ratio=1.5)),
        profile=_profile_block("make_block_uncached_softmax", False, UNCACHED_PROFILE, 512),
        kernels=("block_uncached_softmax_kernel",)),
    "dispatch": dict(
        rules=(MetricRule(DURATION, f"duration ({DISPATCH_PROFILE[0]} x {DISPATCH_PROFILE[1]} "
                          "float32)", "short rows need thread groups narrower than a warp "
                          "(warp_config: 4 lanes and 2 rows each for 16 float32 columns): a "
                          "whole warp per 16-column row leaves 28 of its 32 lanes idle",
                          "NVIDIA H100 80GB HBM3, 2026-11-25: correct plans up to 1.09x, a "
                          "whole warp per row 6.9x (H200, same day: 1.14x and 7.8x)",
                          max_ratio=1.5),),
        profile=_profile_dispatch, kernels=SOFTMAX_KERNELS),
}

# Exercises without a metric rule, and why.
NO_METRIC_RULE = {
    "cpu": "CPU-only: numpy",
    "naive": "the lesson's baseline, slow by design (one thread per row, reads strided by the "
             "row length): its speed is what the later kernels improve on, not a target",
    "log": "its code, log_softmax_cpu, runs on the CPU (numpy); on the GPU it runs "
           "softmax_gpu(log=True), whose plan and kernels are the dispatch, warp and block "
           "exercises', measured by their rules",
}

EXERCISES = with_metric_rules(EXERCISES, METRICS, NO_METRIC_RULE)

# Slow but correct submissions, each (description, text in the solution cell, replacement):
# with no text, the replacement is the whole cell. Each must fail every metric rule of its
# exercise on a GPU (benchmarks/metric_rules.py checks this).
def _one_thread_per_row(factory: str, kernel: str, start: str, stride: str) -> str:
    """Source of a softmax factory whose kernel gives each row to one thread, which makes
    three scalar passes over global memory (``start`` picks its first row)."""
    return f'''
def {factory}:
    @cuda.jit
    def {kernel}(x, y):
        rows, cols = x.shape
{start}
        while row < rows:
            m = NEG_INF
            for c in range(cols):
                m = max(m, float32(x[row, c]))
            s = float32(0.0)
            for c in range(cols):
                s += math.exp(float32(x[row, c]) - m)
            for c in range(cols):
                shifted = float32(x[row, c]) - m
                y[row, c] = shifted - math.log(s) if log else math.exp(shifted) / s
            row += {stride}

    return {kernel}
'''


SLOW_VARIANTS = {
    "softmax.warp": ("one thread per row, three scalar passes over global memory", None,
                     _one_thread_per_row("make_warp_softmax(dtype, pack, cols_per_thread, "
                                         "group_width, rows_per_thread=1, log=False)",
                                         "warp_softmax_kernel", "        row = cuda.grid(1)",
                                         "cuda.gridsize(1)")),
    "softmax.block_smem": ("packs stored row-major in shared memory (bank conflicts)", None, '''
def make_block_smem_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_smem_softmax_kernel(x, y):
        rows, cols = x.shape
        cache = cuda.shared.array(0, float32)
        values = cuda.local.array(pack, float32)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        num_packs = cols // pack
        row = cuda.blockIdx.x
        while row < rows:
            m = NEG_INF
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    cache[p * pack + i] = values[i]
                    m = max(m, values[i])
            m = block_all_reduce_max(m)
            s = float32(0.0)
            for c in range(tid, cols, threads):
                shifted = cache[c] - m
                e = math.exp(shifted)
                cache[c] = shifted if log else e
                s += e
            s = block_all_reduce_sum(s)
            scale = math.log(s) if log else float32(1.0) / s
            for p in range(tid, num_packs, threads):
                for i in range(pack):
                    v = cache[p * pack + i]
                    values[i] = v - scale if log else v * scale
                store_pack(y[row], p * pack, values, 0)
            row += cuda.gridDim.x

    return block_smem_softmax_kernel
'''),
    # One thread of each block does the whole row: 40 registers on sm_90, so it also launches
    # with 1024 threads (a version using the block's first warp needed 68, more than the 64
    # a 1024-thread block allows, and failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
    "softmax.block_uncached": ("only the first thread of each block works, three scalar "
                               "passes", None,
                               _one_thread_per_row("make_block_uncached_softmax(dtype, pack, "
                                                   "log=False)",
                                                   "block_uncached_softmax_kernel",
                                                   "        if cuda.threadIdx.x != 0:\n"
                                                   "            return\n"
                                                   "        row = cuda.blockIdx.x",
                                                   "cuda.gridDim.x")),
    # The kernel the plan picks is right ("warp"); its configuration is not: a whole warp per
    # row, one row per thread, whatever the row's length.
    "softmax.dispatch": ("a whole warp per row even for rows of 16 columns (no narrow thread "
                         "groups)",
                         "        per_thread, width, rows_per_thread = warp_config(cols, pack)\n",
                         "        per_thread, width, rows_per_thread = (\n"
                         "            pack * -(-cols // (32 * pack)), 32, 1)\n"),
}

# Correct submissions written differently from the reference solution, each (description,
# text in the solution cell, replacement) as in SLOW_VARIANTS: each must pass every metric
# rule of its exercise on a GPU (benchmarks/metric_rules.py profiles them beside the slow
# variants, so that the thresholds leave room for them).
CORRECT_VARIANTS = {
    "softmax.warp": (
        ("xor butterflies inline: a for-range over tiles, each row reduced and stored in turn",
         None, '''
def make_warp_softmax(dtype, pack, cols_per_thread, group_width, rows_per_thread=1,
                      log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)
    packs = cols_per_thread // pack
    rows_per_warp = 32 // group_width * rows_per_thread

    @cuda.jit
    def warp_softmax_kernel(x, y):
        rows, cols = x.shape
        v = cuda.local.array(cols_per_thread, float32)
        lane = cuda.threadIdx.x % group_width
        group = cuda.threadIdx.x % 32 // group_width
        warps = cuda.gridsize(1) // 32
        for first in range(cuda.grid(1) // 32 * rows_per_warp, rows, warps * rows_per_warp):
            for r in range(rows_per_thread):
                row = first + group * rows_per_thread + r
                for p in range(packs):
                    col = p * group_width * pack + lane * pack
                    if row < rows and col < cols:
                        load_pack(x[row], col, v, p * pack)
                    else:
                        for i in range(pack):
                            v[p * pack + i] = NEG_INF
                m = v[0]
                for j in range(1, cols_per_thread):
                    m = max(m, v[j])
                for offset in (16, 8, 4, 2, 1):
                    if offset < group_width:
                        m = max(m, cuda.shfl_xor_sync(0xFFFFFFFF, m, offset))
                s = float32(0.0)
                for j in range(cols_per_thread):
                    v[j] -= m
                    e = math.exp(v[j])
                    if not log:
                        v[j] = e
                    s += e
                for offset in (16, 8, 4, 2, 1):
                    if offset < group_width:
                        s += cuda.shfl_xor_sync(0xFFFFFFFF, s, offset)
                if log:
                    log_s = math.log(s)
                    for j in range(cols_per_thread):
                        v[j] = v[j] - log_s
                else:
                    inv_s = float32(1.0) / s
                    for j in range(cols_per_thread):
                        v[j] = v[j] * inv_s
                for p in range(packs):
                    col = p * group_width * pack + lane * pack
                    if row < rows and col < cols:
                        store_pack(y[row], col, v, p * pack)

    return warp_softmax_kernel
'''),
        ("shfl_down and a broadcast: from the group's first lane; a thread's rows "
         "interleaved, exps recomputed at the store", None, '''
def make_warp_softmax(dtype, pack, cols_per_thread, group_width, rows_per_thread=1,
                      log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)
    W, R, N = group_width, rows_per_thread, cols_per_thread
    GROUPS = 32 // W
    VALUES = R * N  # a local array's size must be a constant of the kernel

    @cuda.jit(device=True)
    def group_max(value, leader):
        for offset in (16, 8, 4, 2, 1):
            if offset < W:  # the group's first lane gathers its W lanes
                value = max(value, cuda.shfl_down_sync(0xFFFFFFFF, value, offset))
        return cuda.shfl_sync(0xFFFFFFFF, value, leader)

    @cuda.jit(device=True)
    def group_sum(value, leader):
        for offset in (16, 8, 4, 2, 1):
            if offset < W:
                value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        return cuda.shfl_sync(0xFFFFFFFF, value, leader)

    @cuda.jit
    def warp_softmax_kernel(x, y):
        rows, cols = x.shape
        vals = cuda.local.array(VALUES, float32)
        lane = cuda.threadIdx.x % W
        leader = cuda.threadIdx.x % 32 - lane
        group = leader // W
        base = cuda.grid(1) // 32 * (GROUPS * R)
        while base < rows:  # the same for the whole warp
            for r in range(R):
                row = base + r * GROUPS + group
                for k in range(N // pack):
                    col = pack * (lane + k * W)
                    if row < rows and col < cols:
                        load_pack(x[row], col, vals, r * N + k * pack)
                    else:
                        for i in range(pack):
                            vals[r * N + k * pack + i] = NEG_INF
            for r in range(R):
                row = base + r * GROUPS + group
                m = NEG_INF
                for j in range(N):
                    m = max(m, vals[r * N + j])
                m = group_max(m, leader)
                s = float32(0.0)
                for j in range(N):
                    s += math.exp(vals[r * N + j] - m)
                s = group_sum(s, leader)
                if log:
                    scale = math.log(s)
                else:
                    scale = float32(1.0) / s
                for k in range(N // pack):
                    col = pack * (lane + k * W)
                    if row < rows and col < cols:
                        for i in range(pack):
                            j = r * N + k * pack + i
                            shifted = vals[j] - m
                            vals[j] = shifted - scale if log else math.exp(shifted) * scale
                        store_pack(y[row], col, vals, r * N + k * pack)
            base += cuda.gridsize(1) // 32 * (GROUPS * R)

    return warp_softmax_kernel
'''),
        ("lane sums before the group max: rescaled by exp(lane max - row max)", None, '''
def make_warp_softmax(dtype, pack, cols_per_thread, group_width, rows_per_thread=1,
                      log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)
    W, R, CPT = group_width, rows_per_thread, cols_per_thread
    PACKS = CPT // pack
    BUF = R * CPT  # a local array's size must be a constant of the kernel
    TILE = (32 // W) * R

    @cuda.jit
    def warp_softmax_kernel(x, y):
        rows, cols = x.shape
        buf = cuda.local.array(BUF, float32)
        lane = cuda.threadIdx.x % W
        first = (cuda.threadIdx.x % 32) // W * R
        tile = cuda.grid(1) // 32 * TILE
        while tile < rows:
            for r in range(R):
                row = tile + first + r
                for p in range(PACKS):
                    col = (p * W + lane) * pack
                    if row < rows and col < cols:
                        load_pack(x[row], col, buf, r * CPT + p * pack)
                    else:
                        for i in range(pack):
                            buf[r * CPT + p * pack + i] = NEG_INF
            for r in range(R):
                lane_max = NEG_INF
                for j in range(CPT):
                    lane_max = max(lane_max, buf[r * CPT + j])
                # a lane of -inf only adds nothing (and must not compute -inf - (-inf))
                shift = lane_max if lane_max > NEG_INF else float32(0.0)
                s = float32(0.0)
                for j in range(CPT):
                    e = math.exp(buf[r * CPT + j] - shift)
                    if not log:
                        buf[r * CPT + j] = e
                    s += e
                m = warp_all_reduce_max(lane_max, W)
                rescale = math.exp(lane_max - m)
                s = warp_all_reduce_sum(s * rescale, W)
                if log:
                    log_sum = math.log(s)
                    for j in range(CPT):
                        buf[r * CPT + j] = (buf[r * CPT + j] - m) - log_sum
                else:
                    factor = rescale / s
                    for j in range(CPT):
                        buf[r * CPT + j] *= factor
            for r in range(R):
                row = tile + first + r
                for p in range(PACKS):
                    col = (p * W + lane) * pack
                    if row < rows and col < cols:
                        store_pack(y[row], col, buf, r * CPT + p * pack)
            tile += cuda.gridsize(1) // 32 * TILE

    return warp_softmax_kernel
'''),
    ),
    "softmax.block_smem": (
        ("own packs in every pass: the cache keeps x, exps recomputed at the store", None,
         '''
def make_block_smem_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_smem_softmax_kernel(x, y):
        rows, cols = x.shape
        cache = cuda.shared.array(0, float32)
        values = cuda.local.array(pack, float32)
        num_packs = cols // pack
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m = NEG_INF
            for p in range(cuda.threadIdx.x, num_packs, cuda.blockDim.x):
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    cache[p + i * num_packs] = values[i]  # column-major: one bank per lane
                    m = max(m, values[i])
            m = block_all_reduce_max(m)
            s = float32(0.0)
            for p in range(cuda.threadIdx.x, num_packs, cuda.blockDim.x):
                for i in range(pack):
                    s += math.exp(cache[p + i * num_packs] - m)
            s = block_all_reduce_sum(s)
            log_s = math.log(s)
            inv_s = float32(1.0) / s
            for p in range(cuda.threadIdx.x, num_packs, cuda.blockDim.x):
                for i in range(pack):
                    shifted = cache[p + i * num_packs] - m
                    values[i] = shifted - log_s if log else math.exp(shifted) * inv_s
                store_pack(y[row], p * pack, values, 0)

    return block_smem_softmax_kernel
'''),
        ("rotated row-major layout: element i of pack p at p * pack + (i + p // (32 // pack)) "
         "% pack", None, '''
def make_block_smem_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)
    ROUND = 32 // pack  # lanes whose packs fill the 32 banks once

    @cuda.jit(device=True)
    def slot(p, i):
        # element i of pack p, rotated: the 32 lanes of one store (or load) of element i
        # land on 32 different banks
        return p * pack + (i + p // ROUND) % pack

    @cuda.jit
    def block_smem_softmax_kernel(x, y):
        rows, cols = x.shape
        cache = cuda.shared.array(0, float32)
        values = cuda.local.array(pack, float32)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        num_packs = cols // pack
        row = cuda.blockIdx.x
        while row < rows:
            m = NEG_INF
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    cache[slot(p, i)] = values[i]
                    m = max(m, values[i])
            m = block_all_reduce_max(m)
            s = float32(0.0)
            for c in range(tid, cols, threads):  # any order: a permutation of the row
                e = math.exp(cache[c] - m)
                if not log:
                    cache[c] = e
                s += e
            s = block_all_reduce_sum(s)
            if log:
                log_s = math.log(s)
                for p in range(tid, num_packs, threads):
                    for i in range(pack):
                        values[i] = (cache[slot(p, i)] - m) - log_s
                    store_pack(y[row], p * pack, values, 0)
            else:
                inv_s = float32(1.0) / s
                for p in range(tid, num_packs, threads):
                    for i in range(pack):
                        values[i] = cache[slot(p, i)] * inv_s
                    store_pack(y[row], p * pack, values, 0)
            row += cuda.gridDim.x

    return block_smem_softmax_kernel
'''),
        ("own block reductions: shfl_down, then every thread combines the warps' slots", None,
         '''
@cuda.jit(device=True)
def block_max(value, slots):
    for offset in (16, 8, 4, 2, 1):
        value = max(value, cuda.shfl_down_sync(0xFFFFFFFF, value, offset))
    if cuda.threadIdx.x % 32 == 0:
        slots[cuda.threadIdx.x // 32] = value
    cuda.syncthreads()
    result = slots[0]
    for w in range(1, cuda.blockDim.x // 32):
        result = max(result, slots[w])
    return result


@cuda.jit(device=True)
def block_sum(value, slots):
    for offset in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
    if cuda.threadIdx.x % 32 == 0:
        slots[cuda.threadIdx.x // 32] = value
    cuda.syncthreads()
    result = slots[0]
    for w in range(1, cuda.blockDim.x // 32):
        result += slots[w]
    return result


def make_block_smem_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_smem_softmax_kernel(x, y):
        rows, cols = x.shape
        cache = cuda.shared.array(0, float32)
        # one array per reduction: a slot is written again only after the other
        # reduction's barrier, which every thread passes after reading it
        max_slots = cuda.shared.array(32, float32)
        sum_slots = cuda.shared.array(32, float32)
        values = cuda.local.array(pack, float32)
        tid = cuda.threadIdx.x
        num_packs = cols // pack
        row = cuda.blockIdx.x
        while row < rows:
            m = NEG_INF
            p = tid
            while p < num_packs:
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    cache[i * num_packs + p] = values[i]
                    m = max(m, values[i])
                p += cuda.blockDim.x
            m = block_max(m, max_slots)
            s = float32(0.0)
            c = tid
            while c < cols:
                shifted = cache[c] - m
                e = math.exp(shifted)
                cache[c] = shifted if log else e
                s += e
                c += cuda.blockDim.x
            s = block_sum(s, sum_slots)
            scale = math.log(s) if log else float32(1.0) / s
            p = tid
            while p < num_packs:
                for i in range(pack):
                    v = cache[i * num_packs + p]
                    values[i] = v - scale if log else v * scale
                store_pack(y[row], p * pack, values, 0)
                p += cuda.blockDim.x
            row += cuda.gridDim.x

    return block_smem_softmax_kernel
'''),
    ),
    "softmax.block_uncached": (
        ("running max per element: the sum rescaled at each new max", None, '''
def make_block_uncached_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_uncached_softmax_kernel(x, y):
        rows, cols = x.shape
        values = cuda.local.array(pack, float32)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        num_packs = cols // pack
        row = cuda.blockIdx.x
        while row < rows:
            m = NEG_INF
            s = float32(0.0)
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    v = values[i]
                    if v > m:  # a new max: rescale what was summed so far
                        s = s * math.exp(m - v) + float32(1.0)
                        m = v
                    elif v > NEG_INF:
                        s += math.exp(v - m)
            row_max = block_all_reduce_max(m)
            s = block_all_reduce_sum(s * math.exp(m - row_max))
            if log:
                log_s = math.log(s)
                for p in range(tid, num_packs, threads):
                    load_pack(x[row], p * pack, values, 0)
                    for i in range(pack):
                        values[i] = (values[i] - row_max) - log_s
                    store_pack(y[row], p * pack, values, 0)
            else:
                inv_s = float32(1.0) / s
                for p in range(tid, num_packs, threads):
                    load_pack(x[row], p * pack, values, 0)
                    for i in range(pack):
                        values[i] = math.exp(values[i] - row_max) * inv_s
                    store_pack(y[row], p * pack, values, 0)
            row += cuda.gridDim.x

    return block_uncached_softmax_kernel
'''),
        ("max-and-sum pairs merged: by shuffles, then one shared-memory round", None, '''
@cuda.jit(device=True)
def merge(m, s, other_m, other_s):
    """The (max, sum of exp(x - max)) of two parts of a row."""
    if other_m > m:  # the part with the larger max first
        m, other_m = other_m, m
        s, other_s = other_s, s
    if other_m > NEG_INF:  # an empty part (max -inf, sum 0) adds nothing
        s += other_s * math.exp(other_m - m)
    return m, s


def make_block_uncached_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_uncached_softmax_kernel(x, y):
        rows, cols = x.shape
        warp_m = cuda.shared.array(32, float32)
        warp_s = cuda.shared.array(32, float32)
        values = cuda.local.array(pack, float32)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        num_packs = cols // pack
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m = NEG_INF
            s = float32(0.0)
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * pack, values, 0)
                pack_max = values[0]
                for i in range(1, pack):
                    pack_max = max(pack_max, values[i])
                if pack_max > NEG_INF:
                    pack_sum = float32(0.0)
                    for i in range(pack):
                        pack_sum += math.exp(values[i] - pack_max)
                    m, s = merge(m, s, pack_max, pack_sum)
            for offset in (16, 8, 4, 2, 1):
                m, s = merge(m, s, cuda.shfl_xor_sync(0xFFFFFFFF, m, offset),
                             cuda.shfl_xor_sync(0xFFFFFFFF, s, offset))
            if tid % 32 == 0:
                warp_m[tid // 32] = m
                warp_s[tid // 32] = s
            cuda.syncthreads()
            m = warp_m[0]
            s = warp_s[0]
            for w in range(1, threads // 32):
                m, s = merge(m, s, warp_m[w], warp_s[w])
            cuda.syncthreads()  # every thread has read the slots: the next row may write
            scale = math.log(s) if log else float32(1.0) / s
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    shifted = values[i] - m
                    values[i] = shifted - scale if log else math.exp(shifted) * scale
                store_pack(y[row], p * pack, values, 0)

    return block_uncached_softmax_kernel
'''),
        ("normalisation in the exponent: exp((x - max) - log(sum))", None, '''
def make_block_uncached_softmax(dtype, pack, log=False):
    load_pack, store_pack = make_pack_io(dtype, pack)

    @cuda.jit
    def block_uncached_softmax_kernel(x, y):
        rows, cols = x.shape
        values = cuda.local.array(pack, float32)
        num_packs = cols // pack
        for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m = NEG_INF
            s = float32(0.0)
            p = cuda.threadIdx.x
            while p < num_packs:
                load_pack(x[row], p * pack, values, 0)
                new_m = m
                for i in range(pack):
                    new_m = max(new_m, values[i])
                if new_m > NEG_INF:
                    s *= math.exp(m - new_m)
                    m = new_m
                    for i in range(pack):
                        s += math.exp(values[i] - m)
                p += cuda.blockDim.x
            row_max = block_all_reduce_max(m)
            s = block_all_reduce_sum(s * math.exp(m - row_max))
            log_s = math.log(s)
            p = cuda.threadIdx.x
            while p < num_packs:
                load_pack(x[row], p * pack, values, 0)
                for i in range(pack):
                    shifted = (values[i] - row_max) - log_s
                    values[i] = shifted if log else math.exp(shifted)
                store_pack(y[row], p * pack, values, 0)
                p += cuda.blockDim.x

    return block_uncached_softmax_kernel
'''),
    ),
    "softmax.dispatch": (
        ("blocks of 256 threads for the warp kernel",
         "WARP_THREADS = 128         # block size of the warp kernel: 4 warps\n",
         "WARP_THREADS = 256         # block size of the warp kernel: 8 warps\n"),
        ("grids of at most 16 blocks per SM of an H100: the kernels loop over the other rows",
         "        grid = -(-rows // rows_per_block)\n",
         "        grid = min(-(-rows // rows_per_block), 16 * 132)\n"),
        ("one row per thread in narrow groups too",
         "        per_thread, width, rows_per_thread = warp_config(cols, pack)\n",
         "        per_thread, width, _ = warp_config(cols, pack)\n"
         "        rows_per_thread = 1\n"),
    ),
}

__all__ = ["CORRECT_VARIANTS", "EXERCISES", "LESSON", "SLOW_VARIANTS", "expect_softmax",
           "reference", "tolerance"]
