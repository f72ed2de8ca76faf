"""Choose between the CUDA simulator and a real GPU, before numba.cuda is imported.

The choice comes from ``WORKBOOK_MODE`` (``auto``, ``sim`` or ``gpu``; default
``auto``). ``auto`` uses the GPU when the CUDA driver reports at least one
device and the simulator otherwise. Numba reads ``NUMBA_ENABLE_CUDASIM`` once,
when ``numba.cuda`` is first imported, so :func:`select_mode` must run first.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import cache

MODES = ("auto", "sim", "gpu")
ENV_VAR = "WORKBOOK_MODE"


class ModeError(RuntimeError):
    """The requested mode cannot be used on this machine."""


@cache
def gpu_count() -> int:
    """Number of CUDA devices the driver reports (0 without a driver or GPU).

    Asks ``libcuda`` directly through ctypes so that numba is not imported.
    """
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def resolve(requested: str | None = None) -> str:
    """Return ``"sim"`` or ``"gpu"`` for a requested mode (default: the environment)."""
    requested = (requested or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if requested not in MODES:
        raise ModeError(f"{ENV_VAR}={requested!r} is not one of {', '.join(MODES)}")
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and requested != "gpu":
        return "sim"
    if requested == "auto":
        return "gpu" if gpu_count() > 0 else "sim"
    if requested == "gpu" and gpu_count() == 0:
        raise ModeError(
            "gpu mode was requested but the CUDA driver reports no GPU on this machine; "
            f"use {ENV_VAR}=sim (or --mode sim) to run in the CUDA simulator"
        )
    return requested


def select_mode(requested: str | None = None) -> str:
    """Resolve the mode and configure numba for it; call before importing numba.cuda."""
    mode = resolve(requested)
    want_sim = mode == "sim"
    if "numba.cuda" in sys.modules:
        from numba.cuda import config

        if bool(config.ENABLE_CUDASIM) != want_sim:
            raise ModeError(
                f"numba.cuda was already imported in {'sim' if not want_sim else 'gpu'} mode; "
                "import workbook before numba (or restart the kernel) to switch modes"
            )
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if want_sim else "0"
    return mode


def current_mode() -> str:
    """The mode numba.cuda is running in (``sim`` or ``gpu``)."""
    from numba import cuda

    return "sim" if cuda.config.ENABLE_CUDASIM else "gpu"
