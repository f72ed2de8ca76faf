"""Timing GPU code the way it should be timed: CUDA events, warm-up, median of repeats.

``time_gpu(fn)`` runs ``fn()`` (which launches work) ``warmup`` times, then
``repeat`` times between CUDA events, flushing the L2 cache before each timed
run unless told otherwise, and returns a :class:`Timing` (median and 20/80 %
quantiles in milliseconds). ``bandwidth_gbs`` turns bytes and time into GB/s.

Launching a numba kernel costs tens of microseconds of Python on the host; when
the GPU is idle meanwhile, that time lands between the events. For kernels that
take less than a few hundred microseconds pass ``inner=k``: ``fn()`` is then
called k times back to back between the events (the launches queue up while the
GPU works) and the time is divided by k. Use it only where the data is much
larger than L2, since only the first of the k runs starts with a cold cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbook.mode import current_mode

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 cache


class NeedsGPU(RuntimeError):
    """Timing was asked for in simulator mode."""


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    repeat: int

    def gbs(self, nbytes: float) -> float:
        return bandwidth_gbs(nbytes, self.median_ms)


def bandwidth_gbs(nbytes: float, ms: float) -> float:
    """Effective bandwidth in GB/s (10^9 bytes per second)."""
    return nbytes / (ms * 1e-3) / 1e9


_flush_buffer = None


def flush_l2() -> None:
    """Overwrite a buffer larger than L2 so the next kernel starts with a cold cache."""
    global _flush_buffer
    from numba import cuda

    if _flush_buffer is None:
        _flush_buffer = cuda.device_array(L2_FLUSH_BYTES // 4, dtype=np.int32)
    _flush_buffer[:] = 0  # a device-side memset


def time_gpu(fn, warmup: int = 3, repeat: int = 20, flush: bool = True, inner: int = 1) -> Timing:
    """Median time of one ``fn()`` on the GPU, measured with CUDA events."""
    if current_mode() != "gpu":
        raise NeedsGPU("timing needs a real GPU; in simulator mode lessons show recorded numbers")
    from numba import cuda

    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(repeat):
        if flush:
            flush_l2()
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / inner)
    p20, med, p80 = np.percentile(times, [20, 50, 80])
    return Timing(float(med), float(p20), float(p80), repeat)


def device_name() -> str:
    """The GPU's name, or a note that this is the simulator."""
    if current_mode() != "gpu":
        return "CUDA simulator (no GPU)"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)
