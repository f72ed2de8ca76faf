"""Lesson 03's known mistakes: what each computes, and the sentence that names it.

A known mistake is named only where its result differs from the right one, and ``got``
equals it on every wrong row: each candidate below is what that mistake computes.
"""

from __future__ import annotations

import numpy as np


def known_mistake(got, expected, inputs, rows) -> str:
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
