"""Helpers the exercise specs use to launch student kernels safely.

What lies past a test buffer's data is poisoned: NaN for floating-point types, and
for integers the bytes ``0x7FADBEEF`` (cut or repeated to the element's size, as the
simulator's sanitizer fills fresh shared memory: ``0x7FADBEEF`` in int32, ``0xEF`` in
uint8), a value no test puts in its data. In the simulator a read past the end of a
view raises IndexError; on a GPU nothing checks it, and the read returns the poison,
so a bound off by one (``i <= n``) spoils the result instead of reading a harmless
neighbour. Matrices get the same treatment row by row (:func:`padded_rows`): each row
is followed by 16 bytes of poison, so that a read one past the end of a row does not
land on the first element of the next row.

The profile functions (``grader/exercises/*/profiles.py``) make their warm-up launches in
:func:`unprofiled`, outside the profiled range that :func:`profiled_segment` opens for ncu.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

import numpy as np

GUARD = 1024  # elements of poison placed after each guarded input on the device
PAD_BYTES = 16  # poison after each row of a padded matrix: one 16-byte pack
POISON_WORD = 0x7FADBEEF


def cuda():
    """numba.cuda, imported after the workbook has chosen the mode."""
    from numba import cuda as _cuda

    import workbook  # noqa: F401  (selects sim or gpu before numba.cuda loads)

    return _cuda


def poison_value(dtype):
    """The poison of ``dtype`` (see the module docstring), as a numpy scalar."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return dtype.type(np.nan)
    if dtype.kind == "b":
        return dtype.type(True)
    raw = (POISON_WORD.to_bytes(4, "little") * 2)[:dtype.itemsize]
    return np.frombuffer(raw, dtype.newbyteorder("<"))[0].astype(dtype)


def poisoned(shape, dtype) -> np.ndarray:
    """A host array of ``shape`` holding the poison of ``dtype`` everywhere."""
    return np.full(shape, poison_value(dtype), dtype=dtype)


def guarded_input(x: np.ndarray):
    """Copy ``x`` to the device followed by GUARD poison elements; return a view of length n.

    In the simulator an out-of-bounds read raises IndexError; on a GPU it reads
    the poison (NaN for floats), so a missing bounds check shows up in the result.
    """
    padded = poisoned(x.size + GUARD, x.dtype)
    padded[: x.size] = x.reshape(-1)
    return cuda().to_device(padded)[: x.size]


def row_pad(dtype) -> int:
    """Elements of poison after each row of a padded matrix of ``dtype`` (16 bytes' worth):
    a row whose length is a multiple of the 16-byte pack stays 16-byte aligned."""
    return max(1, PAD_BYTES // np.dtype(dtype).itemsize)


def padded_rows(x: np.ndarray, guard_rows: int = 0, fill=None):
    """``x`` (rows, cols) on the device in padded rows; returns ``(view, full)``.

    ``full`` has ``rows + guard_rows`` rows of ``cols + row_pad`` elements, all poison
    (or ``fill``) but ``x``; ``view`` is its ``(rows, cols)`` corner, the array a kernel
    gets: its row stride is ``cols + row_pad`` elements, so ``x[r, cols]`` on a GPU reads
    the poison after row ``r`` and not ``x[r + 1, 0]``.
    """
    rows, cols = x.shape
    host = poisoned((rows + guard_rows, cols + row_pad(x.dtype)), x.dtype) if fill is None \
        else np.full((rows + guard_rows, cols + row_pad(x.dtype)), fill, dtype=x.dtype)
    host[:rows, :cols] = x
    full = cuda().to_device(host)
    return full[:rows, :cols], full


def padded_output(shape, fill, dtype, guard_rows: int = 0):
    """An output matrix of ``shape`` filled with ``fill``, in padded rows (see
    :func:`padded_rows`) that hold ``fill`` too; returns ``(view, full)``. After the
    launch, :func:`outside_changes` tells whether the kernel wrote past the view."""
    return padded_rows(np.full(shape, fill, dtype=dtype), guard_rows, fill=fill)


def outside_changes(host_full: np.ndarray, shape, fill) -> tuple[list[int], list[int]]:
    """Where a padded output (copied to the host whole) changed outside its view:
    ``(rows whose padding after the end changed, guard rows that changed)``."""
    rows, cols = shape

    def changed(block):
        if np.isnan(fill):
            return ~np.isnan(block)
        return block != fill

    pads = np.nonzero(changed(host_full[:rows, cols:]).any(axis=1))[0]
    guards = np.nonzero(changed(host_full[rows:]).any(axis=1))[0] + rows
    return [int(r) for r in pads], [int(r) for r in guards]


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


_BUILT: list = []  # the cache of every built_once function


def built_once(make):
    """``make`` (a profile's host inputs from a seeded generator) built once per process and
    returned read-only after: a profile job makes each exercise's profiling launches twice
    (see :func:`grader.runner.profile_job`), and the second time, inside ncu's profiled
    segment, only the launches should take time."""
    @functools.cache
    def remembered(*args):
        made = make(*args)
        for value in made.values() if isinstance(made, dict) else (made,):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        return made

    _BUILT.append(remembered)
    return functools.wraps(make)(remembered)


def forget_built() -> None:
    """Drop what every :func:`built_once` function built (hundreds of MB at GPU sizes)."""
    for remembered in _BUILT:
        remembered.cache_clear()


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

    It wraps, for the block's duration, every path by which a kernel launch reaches the
    driver: numba's (``kernel[grid, block](...)``, a ``forall``, a specialised kernel: each
    ends in ``_Kernel.launch``), a prepared launch's own driver call
    (:meth:`workbook.launch._DriverLaunch.try_launch`), and the simulator's launch. A launch
    is recorded once it returned: one that raised may not have reached the GPU (the parent
    compares the names with ncu's report and does not split a report that disagrees)."""
    names: list[str] = []
    originals = []
    try:
        for owner, attribute, wrap in _launch_paths():
            originals.append((owner, attribute, owner.__dict__.get(attribute)))
            setattr(owner, attribute, wrap(getattr(owner, attribute), names.append))
        yield names
    finally:
        for owner, attribute, original in reversed(originals):
            if original is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


def _launch_paths():
    """``(class, method, wrapper)`` of each launch path of this mode (see
    :func:`recorded_launches`); ``wrapper(method, note)`` calls ``note(kernel name)`` after
    each launch inside the profiled range."""
    from workbook.launch import _DriverLaunch

    paths = [(_DriverLaunch, "try_launch", _recording_driver_launch)]
    if cuda().config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        return [*paths, (FakeCUDAKernel, "__call__", _recording_simulated_launch)]
    from numba.cuda.dispatcher import _Kernel

    return [*paths, (_Kernel, "launch", _recording_numba_launch)]


def _recording_numba_launch(launch, note):
    @functools.wraps(launch)
    def recorded(self, *args, **kwargs):
        result = launch(self, *args, **kwargs)
        if in_profiled_range():
            note(kernel_name(self))
        return result

    return recorded


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


def _recording_driver_launch(try_launch, note):
    @functools.wraps(try_launch)
    def recorded(self, args):
        launched = try_launch(self, args)
        if launched and in_profiled_range():
            note(self.kernel_name)
        return launched

    return recorded


def _recording_simulated_launch(call, note):
    from numba.cuda.simulator import kernel as simulated

    @functools.wraps(call)
    def recorded(self, *args):
        launch = not self._device and simulated._get_kernel_context() is None
        result = call(self, *args)
        if launch and in_profiled_range():
            note(self.fn.__name__)
        return result

    return recorded
