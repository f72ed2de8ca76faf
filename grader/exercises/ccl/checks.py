"""Each exercise's ``verify(got, expected, inputs, mode)``: raises :class:`Mismatch` with a
diagnosis when the student's output is wrong (see :mod:`.label_checks`, :mod:`.block_checks`)."""

from __future__ import annotations

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.ccl.block_checks import explain_block_links
from grader.exercises.ccl.label_checks import (
    explain_consecutive,
    explain_roots,
    explain_stats,
    pix,
)
from grader.exercises.ccl.references import tile_label_pairs


def verify_cpu_labels(got, expected, inputs, mode):
    labels, count = got
    image = inputs["image"]
    if labels.shape != image.shape:
        raise Mismatch(f"labels have shape {labels.shape}, expected the image's {image.shape}")
    explain_consecutive(labels, count, image, inputs["connectivity"])


def verify_runs(got, expected, inputs, mode):
    if got.size == 0 and expected.size == 0:
        return
    got = got.reshape(-1, 3) if got.size % 3 == 0 else got
    if got.ndim != 2 or got.shape[1] != 3:
        raise Mismatch(f"expected an array of shape (runs, 3), got shape {got.shape}")
    if len(got) != len(expected):
        raise Mismatch(f"expected {len(expected)} runs, got {len(got)}; first expected runs "
                       f"{expected[:3].tolist()}, got {got[:3].tolist()}")
    wrong = np.flatnonzero((got != expected).any(axis=1))
    if wrong.size:
        k = wrong[0]
        hint = ""
        if got[k, 2] == expected[k, 2] - 1:
            hint = " The stop is one short: stop is exclusive (one past the last pixel)."
        raise Mismatch(f"run {k}: expected (row, start, stop) = {tuple(expected[k].tolist())}, "
                       f"got {tuple(got[k].tolist())}.{hint}")


def verify_propagation(got, expected, inputs, mode):
    explain_roots(got, inputs["image"], inputs["connectivity"], None,
                  "labels have not finished spreading (did the loop stop before a sweep "
                  "changed nothing?), or a neighbour was not examined",
                  "when nothing changes any more, every pixel of a blob holds the blob's "
                  "smallest index ({count} pixels do not: did the loop stop before a sweep "
                  "that changed nothing?)")
    sweeps = inputs["sweeps"]
    if not isinstance(sweeps, int | np.integer) or sweeps < 1:
        raise Mismatch(f"propagation_label must return the number of sweeps it launched "
                       f"(at least 1), got {sweeps!r}")


def verify_uf_init(got, expected, inputs, mode):
    (parents, roots), (want_parents, want_roots) = got, expected
    w = inputs["image"].shape[1]
    wrong = np.flatnonzero(parents != want_parents)
    if wrong.size:
        i = wrong[0]
        got_i, want_i = int(parents[i]), int(want_parents[i])
        if got_i == -7:
            why = "it was never written (a bound too strict, or a thread that returns early?)"
        elif want_i == -1:
            why = "it is background: -1"
        elif want_i == i:
            why = "no back neighbour is connected: the pixel is its own root"
        else:
            why = (f"its connected back neighbour with the smallest index is {want_i} "
                   f"{pix(want_i, w)}")
            if got_i >= 0 and got_i != i and got_i > want_i:
                why += " (a larger one was chosen)"
        raise Mismatch(f"uf_init_kernel: parents[{i}] (pixel {pix(i, w)}) is {got_i}; {why} "
                       f"({wrong.size} pixels wrong)")
    wrong = np.flatnonzero(roots != want_roots)
    if wrong.size:
        i = wrong[0]
        got_i, want_i = int(roots[i]), int(want_roots[i])
        hint = ""
        if got_i == int(parents[i]) and got_i != want_i:
            hint = ": that is its parent; follow parents until parents[r] == r"
        elif want_i == -1:
            hint = ": background stays -1"
        raise Mismatch(f"uf_compress_kernel: roots[{i}] (pixel {pix(i, w)}) is {got_i}, but its "
                       f"chain of parents ends at {want_i}{hint} ({wrong.size} pixels wrong)")


def verify_union_find(got, expected, inputs, mode):
    explain_roots(got, inputs["image"], inputs["connectivity"], inputs["block"],
                  "a missing merge (or merged roots never resolved back into labels)")


def verify_scan(got, expected, inputs, mode):
    x = inputs["x"]
    n = x.size
    if np.array_equal(got, expected):
        return
    if np.array_equal(got, np.cumsum(x)):
        raise Mismatch("got the inclusive scan (out[i] includes x[i]); the exclusive scan "
                       "starts at 0 and stops before x[i]: out[i] = x[0] + ... + x[i-1]")
    wrong = np.flatnonzero(got != expected)
    i = wrong[0]
    msg = f"out[{i}]: expected {expected[i]}, got {got[i]} ({wrong.size} of {n} wrong)"
    if got[i] == -99:
        msg += "; it was never written (a bounds check too strict, or a block missing?)"
    elif i > 0 and i % 32 == 0:
        msg += (f"; elements 0..{i - 1} are right and element {i} is the first wrong one: "
                "does a new block start there, without the scanned block sums (offsets) "
                "added to it?")
    raise Mismatch(msg)


def verify_numbered(function: str):
    """The check of consecutive labels 1..K and the count that ``function`` returns."""
    def verify(got, expected, inputs, mode):
        labels, count = got
        try:
            count = int(count)
        except (TypeError, ValueError):
            raise Mismatch(f"{function} must return the number of blobs, got {count!r}") \
                from None
        explain_consecutive(labels, count, inputs["image"], inputs["connectivity"])
    return verify


verify_compaction = verify_numbered("compact_labels")
verify_block_label = verify_numbered("block_label")


def verify_stats(got, expected, inputs, mode):
    explain_stats(got, expected, inputs["labels"])


def verify_stats_block(got, expected, inputs, mode):
    explain_stats(got, expected, inputs["labels"])
    adds = inputs["area_adds"]
    if adds is None:
        return
    pairs = tile_label_pairs(inputs["labels"], inputs["tile"])
    pixels = int(np.count_nonzero(inputs["labels"]))
    if adds > pairs:
        raise Mismatch(
            f"the results are right, but the kernel made {adds} cuda.atomic.add calls on area "
            f"for {pixels} foreground pixels; per-block partials need one per blob per "
            f"{inputs['tile']}x{inputs['tile']} tile ({pairs} here): accumulate in the block's "
            "shared table first, then flush each slot once")


def verify_block_init(got, expected, inputs, mode):
    forest, links = got
    explain_block_links(forest, links, inputs["image"], inputs["connectivity"],
                        inputs["tile"] if mode == "sim" else None)
