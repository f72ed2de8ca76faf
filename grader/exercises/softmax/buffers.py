"""The device buffers of lesson 03's checks, and what they show of stray reads and writes.

Every output array starts filled with 7.0 (no softmax or log-softmax value), with
``GUARD_ROWS`` guard rows after the last: an element left at 7.0 was never written,
and a changed guard row means a write past the end. The input has guard rows of NaN
after it (on a GPU a read past the end reads NaN; in the simulator it raises). The
kernel exercises also pad every row of the input with 16 bytes of NaN and every row of
the output with 7.0 (the arrays the kernel gets are views with a longer row stride):
on a GPU a read one past the end of a row reads NaN, and a write there is seen.
"""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader.exercise import Mismatch

SENTINEL = 7.0
GUARD_ROWS = 4  # rows after the input and the output that a kernel must not touch


def rows_text(rows) -> str:
    """Row numbers for a message: the first 8, and how many there are."""
    rows = [int(r) for r in rows]
    head = ", ".join(map(str, rows[:8]))
    return head + (f", ... ({len(rows)} rows)" if len(rows) > 8 else "")


def device_input(x: np.ndarray, padded: bool = False, exact: bool = False):
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


def device_output(shape, dtype, padded: bool = False, exact: bool = False):
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


def finish(full, rows: int, cols: int | None = None) -> np.ndarray:
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
        raise Mismatch(f"the kernel wrote past the end of rows {rows_text(pads)} of y (the "
                       f"padding after column {cols - 1} changed): check the column bound "
                       "(col < cols) of every store")
    return np.ascontiguousarray(host[:rows, :cols])
