"""Helpers the exercise specs use to launch student kernels safely."""

from __future__ import annotations

import numpy as np

GUARD = 1024  # elements of NaN placed after each guarded input on the device


def cuda():
    """numba.cuda, imported after the workbook has chosen the mode."""
    from numba import cuda as _cuda

    import workbook  # noqa: F401  (selects sim or gpu before numba.cuda loads)

    return _cuda


def guarded_input(x: np.ndarray):
    """Copy ``x`` to the device followed by NaN guard elements; return a view of length n.

    In the simulator an out-of-bounds read raises IndexError; on a GPU it reads
    the NaN guard, so a missing bounds check shows up as a NaN result.
    """
    padded = np.full(x.size + GUARD, np.nan, dtype=x.dtype)
    padded[: x.size] = x
    return cuda().to_device(padded)[: x.size]


def output(n: int, fill, dtype, name: str = "output"):
    """A device output array filled with ``fill``.

    In simulator mode it is watched for races between blocks (see
    :mod:`workbook.sim.global_races`), which the simulator would otherwise hide.
    """
    array = cuda().to_device(np.full(n, fill, dtype=dtype))
    if cuda().config.ENABLE_CUDASIM:
        from workbook.sim.global_races import watch

        watch(array, name)
    return array


def launch(kernel, grid: int, block: int, *args) -> None:
    """Launch and wait, so errors surface here and not at the next copy."""
    kernel[grid, block](*args)
    cuda().synchronize()


def blocks_for(n: int, per_block: int) -> int:
    return max(1, -(-n // per_block))
