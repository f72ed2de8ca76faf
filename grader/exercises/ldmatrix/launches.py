"""Device arrays and launches of lesson 01's kernels (one launch at a time, waited for)."""

from __future__ import annotations

import numpy as np

from grader import launch as L


def device(array):
    return L.cuda().to_device(np.ascontiguousarray(array))


def zeros(shape, dtype, fill=0):
    return L.cuda().to_device(np.full(shape, fill, dtype=dtype))


def launch(kernel, grid, block, *args):
    """Launch and wait. In the simulator the emulation's counts start again from zero, so that
    :func:`instructions.expect_instructions` and :func:`instructions.emulated_stats` see this
    launch's."""
    if L.cuda().config.ENABLE_CUDASIM:
        from workbook.sim import foreign

        foreign.reset_stats()
    kernel[grid, block](*args)
    L.cuda().synchronize()
