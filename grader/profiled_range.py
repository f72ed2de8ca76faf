"""ncu's profiled range in the profile process: the grader's profiled segments, the warm-up
launches kept outside them, and the names of the kernels launched inside.

The profile functions (``grader/exercises/*/profiles.py``) make their warm-up launches in
:func:`unprofiled`, outside the range that :func:`profiled_segment` opens for ncu; the runner
records the launches of each segment (:func:`recorded_launches`), by which the parent splits
ncu's report (:func:`grader.profiling.split_report`).
"""

from __future__ import annotations

from contextlib import contextmanager

from grader.launch import cuda
from grader.launch_hooks import on_launch

# How the profile functions' warm-up launches are made: outside ncu's profiled range. A
# report made before this held them inside (see grader.profiling.WARM_UPS_PROFILED_SKIP); the
# reference-profile cache key names it (grader.reference_profiles).
WARM_UPS = "unprofiled"


class _Range:
    """Whether a profiled segment is open, and whether a warm-up has paused it."""

    segment = False
    paused = False


@contextmanager
def profiled_segment():
    """ncu's profiled range (``cuda.profile_start`` to ``cuda.profile_stop``) around the
    launches inside: the grader's profiled segment, in which :func:`unprofiled` works."""
    cuda().profile_start()
    _Range.segment = True
    try:
        yield
    finally:
        _Range.segment = _Range.paused = False
        cuda().profile_stop()


@contextmanager
def unprofiled():
    """Launches outside ncu's profiled range: a profile function's warm-up launch.

    Only inside a profiled segment does it stop the range (after the launches before it
    have finished) and start it again (after the launches inside have finished); elsewhere
    (the unprofiled first pass of a profile job, the check) it does nothing."""
    if not _Range.segment or _Range.paused:
        yield
        return
    cuda().synchronize()
    cuda().profile_stop()
    _Range.paused = True
    try:
        yield
        cuda().synchronize()
    finally:
        _Range.paused = False
        cuda().profile_start()


def in_profiled_range() -> bool:
    """Whether a launch made now would be inside ncu's profiled range."""
    return _Range.segment and not _Range.paused


# How the profiled segments are told apart in ncu's report: by the kernels the profiled
# process records launching inside each (:func:`recorded_launches`), or by a marker kernel
# launched at the start of each (the fallback, and every report made before the recording).
# The reference-profile cache key names it (grader.reference_profiles).
RECORDED_SEGMENTS = "recorded launches"
MARKED_SEGMENTS = "marker kernels"


@contextmanager
def recorded_launches():
    """The names of the kernels launched inside ncu's profiled range while the block runs, in
    launch order: a list that grows with each launch.

    It hooks, for the block's duration, every path by which a kernel launch reaches the
    driver (:func:`grader.launch_hooks.on_launch`). A launch is recorded once it returned:
    one that raised may not have reached the GPU (the parent compares the names with ncu's
    report and does not split a report that disagrees)."""
    names: list[str] = []

    def note(launched) -> None:
        if in_profiled_range():
            names.append(launched_name(launched))

    with on_launch(note):
        yield names


def launched_name(launched) -> str:
    """The Python name of what :func:`grader.launch_hooks.on_launch` reports: a prepared
    launch's kernel, a simulated kernel's function, or numba's compiled kernel."""
    from workbook.launch import _DriverLaunch

    if isinstance(launched, _DriverLaunch):
        return launched.kernel_name
    if cuda().config.ENABLE_CUDASIM:
        return launched.fn.__name__
    return kernel_name(launched)


def kernel_name(kernel) -> str:
    """The Python name of a compiled numba kernel (``_Kernel``). One loaded from numba's disk
    cache (:mod:`grader.kernel_cache`) has no ``py_func``: its name is the last part of the
    nested name in its mangled entry point, ``_ZN<len><part>...<len><name>`` followed by
    ``B`` (an ABI tag) or ``E``."""
    py_func = getattr(kernel, "py_func", None)
    if py_func is not None:
        return py_func.__name__
    return function_of_entry(kernel.entry_name)


def function_of_entry(entry: str) -> str:
    """The last name of an Itanium-mangled nested name (``_ZN8__main__6kernelB2v1E...`` ->
    ``kernel``); ``entry`` itself if it is not one."""
    if not entry.startswith("_ZN"):
        return entry
    at, last = 3, entry
    while at < len(entry) and entry[at].isdigit():
        end = at
        while entry[end].isdigit():
            end += 1
        length = int(entry[at:end])
        last, at = entry[end:end + length], end + length
    return last
