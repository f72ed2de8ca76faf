"""Installation into numba-cuda's simulator: ``declare_device`` and aligned shared arrays."""

from __future__ import annotations

import struct
import sys
import traceback

import numpy as np

from workbook.sim.foreign.common import _INSTALLED
from workbook.sim.foreign.function import declare_device


def _validate_alignment(alignment) -> None:
    if not isinstance(alignment, int) or isinstance(alignment, bool):
        raise ValueError("Alignment must be an integer")
    if alignment <= 0:
        raise ValueError("Alignment must be positive")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")
    if alignment % struct.calcsize("P"):
        raise ValueError(f"Alignment must be a multiple of {struct.calcsize('P')}")


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array`` of the simulator, also accepting ``alignment`` as numba does
    on a GPU (the emulated shared window places every array on a 128-byte boundary)."""
    from numba.cuda import types
    from numba.np import numpy_support

    if alignment is not None:
        _validate_alignment(alignment)
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    # Identify allocations by the caller's file and line, as the simulator does.
    caller = traceback.extract_stack(sys._getframe())[-2][0:2]
    res = self._allocations.get(caller)
    if res is None:
        res = np.empty(shape, dtype)
        self._allocations[caller] = res
        if alignment is not None:
            if not hasattr(self, "_workbook_alignment"):
                self._workbook_alignment = {}
            self._workbook_alignment[id(res)] = alignment
    return res


def install() -> None:
    """Make ``cuda.declare_device`` and aligned shared arrays work in the simulator
    (idempotent)."""
    import numba.cuda
    from numba.cuda.simulator import api, kernelapi

    if getattr(api, _INSTALLED, False):
        return
    api.declare_device = declare_device
    numba.cuda.declare_device = declare_device
    # Only replace the simulator's own shared.array: an extension that already wraps it
    # (workbook.sim.shared_memory) handles alignment itself.
    if getattr(kernelapi.FakeCUDAShared.array, "__module__", "") == kernelapi.__name__:
        kernelapi.FakeCUDAShared.array = _shared_array
    setattr(api, _INSTALLED, True)
