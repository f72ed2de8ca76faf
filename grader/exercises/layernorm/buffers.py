"""Lesson 04's device buffers: inputs with poison after each row, outputs that start as
markers of never written, and reading the outputs back."""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises.layernorm.messages import rows_text

UNWRITTEN_BITS = 0x7FC0DEAD  # the NaN mean and rstd start as: a payload no arithmetic makes
PAD_FILL = 7.0  # what the padding after each row of y holds (no normalised value is exactly 7.0)


def unwritten(n: int) -> np.ndarray:
    """``n`` float32 NaN whose bits (:data:`UNWRITTEN_BITS`) tell an element never written
    from a NaN that a kernel computed and stored."""
    return np.full(n, UNWRITTEN_BITS, np.uint32).view(np.float32)


def never_written(array: np.ndarray) -> np.ndarray:
    """Where a float32 array still holds :func:`unwritten`'s NaN."""
    return np.ascontiguousarray(array, np.float32).view(np.uint32) == UNWRITTEN_BITS


def device_args(inputs: dict, padded: bool = False):
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


def read_outputs(args, inputs: dict | None = None):
    """``(y, mean, rstd)`` on the host; with the padded y of ``inputs``, after checking that
    no store went past the end of a row."""
    y_full = (inputs or {}).get("y_full")
    if y_full is None or y_full is args[5]:
        return tuple(a.copy_to_host() for a in args[5:])
    cols = args[5].shape[1]
    host = y_full.copy_to_host()
    pads, _ = L.outside_changes(host, args[5].shape, PAD_FILL)
    if pads:
        which = rows_text(np.array(pads), len(host))
        raise Mismatch(f"the kernel wrote past the end of rows {which} of y (the padding after "
                       f"column {cols - 1} changed): check the column bound (col < cols) of "
                       "every store")
    return (np.ascontiguousarray(host[:, :cols]), args[6].copy_to_host(), args[7].copy_to_host())

