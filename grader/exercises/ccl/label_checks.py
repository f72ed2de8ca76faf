"""Diagnoses of wrong labels and statistics: each check raises :class:`Mismatch` with a
message that names the first wrong pixel or blob and the likely cause."""

from __future__ import annotations

import numpy as np

from grader.exercise import Mismatch
from grader.exercises.ccl.references import (
    STAT_FILL,
    STAT_NAMES,
    first_pixel_labels,
    scipy_labels,
)

FORWARD = {4: ((0, 1), (1, 0)), 8: ((0, 1), (1, 0), (1, 1), (1, -1))}


def pix(flat_index: int, width: int) -> str:
    """``(row,column)`` of a flat pixel index, as the messages write it."""
    return f"({flat_index // width},{flat_index % width})"


def _block_of(y: int, x: int, block) -> tuple[int, int]:
    return (int(x) // block[0], int(y) // block[1])


def _where(p, q, block) -> str:
    if block is None:
        return ""
    bp, bq = _block_of(*p, block), _block_of(*q, block)
    if bp != bq:
        return (f" (they lie in different thread blocks, {bp} and {bq} as (x, y) with "
                f"BLOCK = {tuple(block)}: a merge lost at a block boundary?)")
    return f" (both in thread block {bp} with BLOCK = {tuple(block)})"


def explain_partition(got: np.ndarray, image: np.ndarray, connectivity: int, background: int,
                      block=None, missing_hint: str = "a missing merge") -> None:
    """Raise Mismatch unless ``got`` (2-D) groups the foreground exactly like scipy does.

    ``background`` is the value background pixels must hold.
    """
    fg = image != 0
    h, w = image.shape
    bad = np.argwhere(~fg & (got != background))
    if bad.size:
        y, x = bad[0]
        raise Mismatch(f"background pixel ({y},{x}) got label {int(got[y, x])}; background must "
                       f"stay {background} ({len(bad)} such pixels)")
    bad = np.argwhere(fg & (got == background))
    if bad.size:
        y, x = bad[0]
        raise Mismatch(f"foreground pixel ({y},{x}) holds {background}, the background value: "
                       f"it was never labelled ({len(bad)} such pixels)")
    for dy, dx in FORWARD[connectivity]:
        ys = slice(0, h - dy)
        xa = slice(max(0, -dx), w - max(0, dx))
        xb = slice(max(0, dx), w - max(0, -dx))
        a, b = got[ys, xa], got[dy:, xb]
        both = fg[ys, xa] & fg[dy:, xb]
        split = np.argwhere(both & (a != b))
        if split.size:
            y, x = (int(v) for v in split[0])
            x += max(0, -dx)
            p, q = (y, x), (y + dy, x + dx)
            raise Mismatch(
                f"pixels {p} and {q} (row, column) are both foreground and "
                f"{connectivity}-adjacent but got labels {int(got[p])} and {int(got[q])}: "
                f"{missing_hint}{_where(p, q, block)}")
    ref, _ = scipy_labels(image, connectivity)
    values = got[fg].astype(np.int64)
    refs = ref[fg].astype(np.int64)
    pairs = np.unique(np.stack([values, refs], axis=1), axis=0)
    shared, counts = np.unique(pairs[:, 0], return_counts=True)
    if (counts > 1).any():
        label = shared[counts > 1][0]
        blobs = pairs[pairs[:, 0] == label, 1][:2]
        p = tuple(int(v) for v in np.argwhere((ref == blobs[0]) & (got == label))[0])
        q = tuple(int(v) for v in np.argwhere((ref == blobs[1]) & (got == label))[0])
        why = "a merge across background, or one label given to two roots?"
        if connectivity == 4:
            ref8, _ = scipy_labels(image, 8)
            if ref8[p] == ref8[q]:
                why = ("they connect only through diagonal steps: 8-neighbours used under "
                       "4-connectivity?")
        raise Mismatch(f"pixels {p} and {q} are in different blobs under {connectivity}-"
                       f"connectivity but both got label {int(label)}: {why}")


UNRESOLVED = ("after the final resolve every label must point straight at its root "
              "({count} pixels do not; is the last resolve/compress pass missing?)")


def explain_roots(labels: np.ndarray, image: np.ndarray, connectivity: int, block=None,
                  missing_hint: str = "a missing merge", unresolved: str = UNRESOLVED) -> None:
    """Check union-find style labels: flat, -1 for background, each foreground pixel holding
    the index of its blob's first pixel."""
    h, w = image.shape
    n = h * w
    flat = np.asarray(labels).reshape(-1)
    fg = image.reshape(-1) != 0
    out_of_range = np.flatnonzero(fg & ((flat < 0) | (flat >= n)))
    if out_of_range.size:
        i = out_of_range[0]
        raise Mismatch(f"foreground pixel {pix(i, w)} holds {flat[i]}, not a pixel index in "
                       f"0..{n - 1}: it was never labelled ({out_of_range.size} such pixels)")
    safe = np.where(fg, flat, 0)
    not_root = np.flatnonzero(fg & (flat[safe] != safe))
    if not_root.size:
        i = not_root[0]
        v = flat[i]
        raise Mismatch(
            f"pixel {pix(i, w)} holds {v}, but pixel {v} {pix(v, w)} holds {flat[v]}: "
            + unresolved.format(count=not_root.size))
    explain_partition(flat.reshape(h, w), image, connectivity, -1, block, missing_hint)
    want = first_pixel_labels(image, connectivity)
    wrong = np.flatnonzero(flat != want)
    if wrong.size:
        i = wrong[0]
        raise Mismatch(
            f"pixel {pix(i, w)}: its blob's root is pixel {flat[i]} {pix(flat[i], w)}, but the "
            f"blob's first pixel (smallest index) is {want[i]} {pix(want[i], w)}: link the larger "
            "root below the smaller one, so that the root is always the smallest index")


def explain_consecutive(got: np.ndarray, count, image: np.ndarray, connectivity: int) -> None:
    """Check compacted labels: exactly scipy's (1..K in raster order of the first pixel)."""
    ref, want_count = scipy_labels(image, connectivity)
    h, w = image.shape
    got = np.asarray(got).reshape(h, w)
    fg = image != 0
    if fg.any() and np.array_equal(got[fg], ref[fg] - 1):
        raise Mismatch("every label is one less than scipy's: blob labels start at 1 "
                       "(0 is the background), i.e. rank + 1")
    if fg.any() and np.array_equal(got[fg], ref[fg] + 1):
        raise Mismatch("every label is one more than scipy's: an inclusive scan where the "
                       "exclusive one is needed (a root's rank counts the roots before it)?")
    explain_partition(got, image, connectivity, 0)
    wrong = np.argwhere(got != ref)
    if wrong.size:
        y, x = wrong[0]
        raise Mismatch(
            f"pixel ({y},{x}): expected label {ref[y, x]}, got {got[y, x]} "
            f"({len(wrong)} pixels differ). Blobs are numbered 1..K in raster order of their "
            "first pixel: the rank of each root among all roots, plus one")
    if int(count) != want_count:
        raise Mismatch(f"the labels are right but the returned count is {count}, expected "
                       f"{want_count} blobs")


def explain_stats(got: dict, want: dict, labels: np.ndarray) -> None:
    count = len(want["area"])
    for name in STAT_NAMES:
        g = np.asarray(got[name]).reshape(-1)
        if g.shape != want[name].shape:
            raise Mismatch(f"{name}: expected {count} entries, got {g.shape}")
        wrong = np.flatnonzero(g != want[name])
        if wrong.size:
            k = wrong[0]
            ys, xs = np.nonzero(labels == k + 1)
            hint = ""
            if name in ("area", "xsum", "ysum") and (g[wrong] < want[name][wrong]).all():
                hint = (" Every wrong value is too small: lost updates (a plain += where "
                        "cuda.atomic.add is needed, or a partial never added)?")
            elif name in ("xmin", "ymin", "xmax", "ymax") and \
                    (g[wrong] == STAT_FILL[name]).all():
                hint = " The value was never updated."
            raise Mismatch(
                f"{name} of blob {k + 1} (first pixel ({ys[0]},{xs[0]}), {len(ys)} pixels): "
                f"expected {want[name][k]}, got {g[k]} ({wrong.size} of {count} blobs "
                f"wrong).{hint}")
