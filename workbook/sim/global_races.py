"""Detect data races between blocks on watched global arrays (simulator mode).

The simulator runs one block after another, so a kernel whose blocks update the
same output element without an atomic still gets the right answer there -- and
a wrong, varying one on a GPU, where blocks run concurrently. ``watch(array)``
marks a device array; during each launch every access to it is logged by
(block, thread), and an element written without an atomic by one block and
touched by another block of the same launch raises :class:`GlobalRaceError`.
Atomic operations (``cuda.atomic.*``) are never races with each other.
"""

from __future__ import annotations

import functools
import itertools
import threading

import numpy as np

_tls = threading.local()
_launches = itertools.count()
_current_launch = [0]
_installed = False


class GlobalRaceError(RuntimeError):
    """Two blocks of one launch conflict on a global-memory element."""


class AccessLog:
    """Per-element record of which blocks touched a watched array in the current launch."""

    def __init__(self, name: str):
        self.name = name
        self.launch = -1
        self.by_block: dict[int, dict[tuple, tuple]] = {}  # element -> block -> (thread, kind)
        self.lock = threading.Lock()

    def record(self, index: int, kind: str, block: tuple, thread: tuple) -> None:
        """Log one access; ``kind`` is "read", "write" or "atomic"."""
        with self.lock:
            if self.launch != _current_launch[0]:
                self.launch, self.by_block = _current_launch[0], {}
            blocks = self.by_block.setdefault(index, {})
            for other, (other_thread, other_kind) in blocks.items():
                if other != block and _conflict(other_kind, kind):
                    self._race(index, other, other_thread, other_kind, block, thread, kind)
            previous = blocks.get(block)
            if previous is None or previous[1] == "read":
                blocks[block] = (thread, kind)

    def _race(self, index, block_a, thread_a, kind_a, block_b, thread_b, kind_b):
        raise GlobalRaceError(
            f"data race on {self.name}[{index}]: {_WORDS[kind_a]} by block {block_a} thread "
            f"{thread_a}, and {_WORDS[kind_b]} by block {block_b} thread {thread_b} in the "
            "same launch. Blocks run concurrently and in any order on a GPU: combine results "
            "across blocks with cuda.atomic.* (or give each block its own element)."
        )


_WORDS = {"read": "read", "write": "written without an atomic", "atomic": "updated atomically"}


def _conflict(kind_a: str, kind_b: str) -> bool:
    """Two accesses from different blocks race unless both are reads or both atomics."""
    if kind_a == kind_b:
        return kind_a == "write"
    return "write" in (kind_a, kind_b) or "read" in (kind_a, kind_b)


def watch(device_array, name: str = "output"):
    """Log accesses to ``device_array`` in later launches; returns the array."""
    device_array.__dict__["_wb_log"] = AccessLog(name)
    return device_array


def _log_of(wrapper):
    return wrapper.__dict__["_item"].__dict__.get("_wb_log")


def _flat(wrapper, idx) -> int:
    shape = wrapper.__dict__["_item"]._ary.shape
    idx = idx if isinstance(idx, tuple) else (idx,)
    return int(np.ravel_multi_index(tuple(int(i) for i in idx), shape))


def _record(wrapper, idx, kind):
    log = _log_of(wrapper)
    if log is None:
        return
    if getattr(_tls, "atomic", False):
        kind = "atomic"
    thread = threading.current_thread()
    log.record(_flat(wrapper, idx), kind, tuple(thread.blockIdx), tuple(thread.threadIdx))


def _atomic(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _tls.atomic = True
        try:
            return fn(*args, **kwargs)
        finally:
            _tls.atomic = False

    return wrapper


def install() -> None:
    """Patch the simulator's in-kernel arrays, atomics and launches (idempotent)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray as Wrapped

    get, put = Wrapped.__getitem__, Wrapped.__setitem__

    def getitem(self, idx):
        _record(self, idx, "read")
        return get(self, idx)

    def setitem(self, idx, val):
        _record(self, idx, "write")
        return put(self, idx, val)

    Wrapped.__getitem__, Wrapped.__setitem__ = getitem, setitem
    for name, fn in vars(kernelapi.FakeCUDAAtomic).items():
        if callable(fn) and not name.startswith("__"):
            setattr(kernelapi.FakeCUDAAtomic, name, _atomic(fn))

    push = sim_kernel._push_kernel_context

    def push_and_count(mod):
        _current_launch[0] = next(_launches) + 1
        return push(mod)

    sim_kernel._push_kernel_context = push_and_count
    _installed = True
