"""Simulator-only watches on the student's launches: races between blocks on the device
arrays a kernel is given, and a count of the global atomics on one array."""

from __future__ import annotations

import contextlib
import inspect


class WatchedKernel:
    """Stands in for a kernel in the notebook namespace while the student's host code runs:
    each launch watches every device array it is given for races between blocks."""

    def __init__(self, kernel):
        self._kernel = kernel
        try:
            self._names = list(inspect.signature(kernel.py_func).parameters)
        except (AttributeError, TypeError, ValueError):
            self._names = []

    def __getitem__(self, config):
        from workbook.sim.global_races import watch

        launcher = self._kernel[config]

        def launch(*args):
            watched = []
            for k, arg in enumerate(args):
                if hasattr(arg, "copy_to_host") and hasattr(arg, "__dict__"):
                    name = self._names[k] if k < len(self._names) else f"argument {k}"
                    watched.append((arg, arg.__dict__.get("_wb_log")))
                    watch(arg, name)
            try:
                return launcher(*args)
            finally:
                for arg, previous in watched:
                    if previous is None:
                        arg.__dict__.pop("_wb_log", None)
                    else:
                        arg.__dict__["_wb_log"] = previous

        return launch

    def __getattr__(self, attr):
        return getattr(self._kernel, attr)


@contextlib.contextmanager
def watching(ns, kernel_names, mode: str):
    """While the student's host code runs, launches of ``kernel_names`` (a name or several)
    are race-checked."""
    names = [kernel_names] if isinstance(kernel_names, str) else list(kernel_names)
    names = [name for name in names if name in ns] if mode == "sim" else []
    originals = {name: ns[name] for name in names}
    for name, kernel in originals.items():
        ns[name] = WatchedKernel(kernel)
    try:
        yield
    finally:
        ns.update(originals)


@contextlib.contextmanager
def counting_atomic_adds(array, counter: list):
    """Count the cuda.atomic.add calls on ``array`` (simulator only)."""
    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAAtomic
    add = cls.add

    def counted(self, ary, index, val):
        if getattr(ary, "__dict__", {}).get("_item") is array:  # shared arrays: numpy
            counter[0] += 1
        return add(self, ary, index, val)

    cls.add = counted
    try:
        yield
    finally:
        cls.add = add
