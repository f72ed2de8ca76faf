"""Kernel launches with less Python on the host per call.

``kernel[grid, block, 0, shared](x, y)`` costs about 24 us of host time with
numba-cuda 0.30 (measured on an H200 machine, see ``benchmarks/README.md``): numba
types every argument, looks up the compiled overload and builds a launch
configuration on every call. A kernel that runs for 5 us is then bound by its
launch, and torch (about 5 us per launch) wins on small tensors.

``prepare(kernel, grid, block, shared, args)`` does that work once, for arguments
like ``args``, and returns a :class:`PreparedLaunch`. Calling it with new arrays
of the same kind only reads their pointers, shapes and strides and hands them to
the driver in the layout numba itself uses for array arguments; called again with
the very same objects (the usual case: buffers reused from call to call), it reuses
what it handed over last time, since a device array's pointer and shape never
change. (It holds the last arrays by weak reference only: a prepared launch cached per
shape never keeps a caller's arrays alive.)
Arguments of another kind (a host array, another dtype or layout) take numba's
ordinary path, so a prepared launch is never wrong, at worst not faster. In
simulator mode it simply calls the kernel.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from workbook.mode import current_mode

KNOWN_ARRAYS = 8  # arrays a parameter remembers as accepted (with their pointers)


def _dim3(value) -> tuple[int, int, int]:
    dims = tuple(value) if isinstance(value, tuple | list) else (value,)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


@dataclass
class PreparedLaunch:
    """``kernel[grid, block, 0, shared]`` with its per-call Python work done once."""

    kernel: object
    grid: object
    block: object
    shared: int = 0
    fast: object = field(default=None, repr=False)
    why_not_fast: str = ""

    def __call__(self, *args) -> None:
        if self.fast is None or not self.fast.try_launch(args):
            self.kernel[self.grid, self.block, 0, self.shared](*args)


def prepare(kernel, grid, block, shared: int = 0, args=()) -> PreparedLaunch:
    """A launch of ``kernel`` for arguments like ``args`` (compiles it if needed)."""
    prepared = PreparedLaunch(kernel, grid, block, shared)
    if current_mode() == "sim":
        prepared.why_not_fast = "simulator mode"
        return prepared
    try:
        prepared.fast = _DriverLaunch(kernel, grid, block, shared, args)
    except Exception as exc:  # numba internals moved: keep the ordinary launch
        prepared.why_not_fast = f"{type(exc).__name__}: {exc}"
    return prepared


class CudaLaunchError(RuntimeError):
    """``cuLaunchKernel`` returned an error code."""


def _driver_launch_function():
    """``cuLaunchKernel`` of the NVIDIA CUDA Python bindings (``cuda.bindings``, which numba-cuda
    runs on): it returns ``(CUresult,)``. About 3.7 us per call on an H100, 5.5 us through
    ctypes (measured 2026-11-26)."""
    from cuda.bindings import driver

    return driver.cuLaunchKernel


class _DriverLaunch:
    """The compiled kernel, its launch configuration and one argument slot per parameter.

    ``cuLaunchKernel`` takes the kernel's parameters as an array of pointers to their
    values. The array and the ctypes values it points to are built once here; a launch
    writes the new values into them and calls the driver (a few microseconds; numba's
    launch path through ``cuda.core`` costs over 10).
    """

    def __init__(self, kernel, grid, block, shared, args):
        import ctypes
        import functools

        from workbook.occupancy import compiled

        self.kernel_name = kernel.__name__  # what the grader's launch recording names
        overload = self.overload = compiled(kernel, args)  # the grader reads its code
        self.packers = [_packer(t) for t in overload.argument_types]
        slots = [slot for packer in self.packers for slot in packer.slots]
        self.params = (ctypes.c_void_p * len(slots))(*(ctypes.addressof(s) for s in slots))
        handle = _function_handle(overload._codelibrary.get_cufunc().handle)
        self._launch = functools.partial(_driver_launch_function(), handle, *_dim3(grid),
                                         *_dim3(block), shared, _default_stream(),
                                         ctypes.addressof(self.params), 0)
        self._last_args: list | None = None  # per argument: "what its slots hold?"
        if not self.accepts(args):
            raise TypeError("the example arguments do not match the compiled kernel")

    def accepts(self, args) -> bool:
        return len(args) == len(self.packers) and all(
            p.accepts(a) for p, a in zip(self.packers, args))

    def same_as_last(self, args) -> bool:
        """The very arrays, and equal scalars, of the last launch (accepted then)."""
        last = self._last_args
        return last is not None and len(args) == len(last) and all(
            memo is not None and _is_same(memo, a) for memo, a in zip(last, args))

    def try_launch(self, args) -> bool:
        """Launch if ``args`` are of the compiled kinds; False (nothing launched) if not.
        Only the arguments that changed since the last launch are checked and written (a
        function called in a loop usually changes its arrays only, or some of them)."""
        packers, last = self.packers, self._last_args
        if len(args) != len(packers):
            return False
        if last is None:
            last = self._last_args = [None] * len(args)
        for k, arg in enumerate(args):
            memo = last[k]  # _is_same, inline: this loop runs on every call
            if memo is not None:
                if memo.__class__ is tuple:
                    if memo[0] is arg.__class__ and memo[1] == arg:
                        continue
                elif memo() is arg:
                    continue
            if not packers[k].take(arg):
                return False  # numba's path launches; the slots written so far stay valid
            last[k] = _remember(arg)
        (status,) = self._launch()
        if status:
            self._last_args = None
            raise CudaLaunchError(f"cuLaunchKernel failed with CUresult {status}")
        return True


def _function_handle(handle):
    """The compiled kernel as the bindings' ``CUfunction`` (numba may hand over either)."""
    from cuda.bindings import driver

    return handle if isinstance(handle, driver.CUfunction) else driver.CUfunction(int(handle))


def _default_stream():
    """The default stream (handle 0, where numba launches too) as the bindings' ``CUstream``,
    made once: given the integer 0, ``cuLaunchKernel`` builds a ``CUstream`` on every call
    (up to 0.9 us per launch on an H100 host, measured 2026-11-26)."""
    from cuda.bindings import driver

    return driver.CUstream(0)


def _remember(arg):
    """What :func:`_is_same` needs to recognise ``arg``: a weak reference to an array (a plan
    cache must not keep a caller's arrays alive), or a scalar's type and value."""
    try:
        return weakref.ref(arg)
    except TypeError:
        return (arg.__class__, arg)


def _is_same(memo, arg) -> bool:
    """Whether ``arg`` is the remembered array itself, or an equal scalar of the same type."""
    if memo.__class__ is tuple:
        return memo[0] is arg.__class__ and bool(memo[1] == arg)
    return memo() is arg


def _packer(numba_type):
    import ctypes

    from numba import types

    if isinstance(numba_type, types.Array):
        return _ArrayPacker(numba_type)
    if isinstance(numba_type, types.Boolean):
        return _ScalarPacker(bool, ctypes.c_bool)
    if isinstance(numba_type, types.Integer | types.Float) and numba_type.bitwidth in (32, 64):
        kind = int if isinstance(numba_type, types.Integer) else float
        name = f"c_{'u' if kind is int and not numba_type.signed else ''}" + (
            f"int{numba_type.bitwidth}" if kind is int else
            ("float" if numba_type.bitwidth == 32 else "double"))
        return _ScalarPacker(kind, getattr(ctypes, name))
    raise TypeError(f"no fast path for an argument of type {numba_type}")


class _ScalarPacker:
    def __init__(self, kind, ctype):
        self.kind = kind
        self.slots = [ctype()]

    def accepts(self, value) -> bool:
        import numpy as np

        if self.kind is bool:
            return isinstance(value, bool | np.bool_)
        if self.kind is int:
            return isinstance(value, int | np.integer) and not isinstance(value, bool)
        return isinstance(value, float | np.floating)

    def write(self, value) -> None:
        self.slots[0].value = self.kind(value)

    def take(self, value) -> bool:
        """Write ``value`` if it is of this parameter's kind; whether it was."""
        if not self.accepts(value):
            return False
        self.write(value)
        return True


class _ArrayPacker:
    """Numba's array argument: meminfo, parent, size, itemsize, data, shape, strides
    (each an 8-byte parameter of the compiled kernel)."""

    def __init__(self, numba_type):
        import ctypes

        import numpy as np

        self.dtype = np.dtype(str(numba_type.dtype))
        self.ndim = numba_type.ndim
        self.layout = numba_type.layout
        self.slots = [ctypes.c_int64() for _ in range(5 + 2 * self.ndim)]
        self.slots[3].value = self.dtype.itemsize
        self.written = None, None  # the shape and strides in the slots
        self.known: dict = {}  # id -> (weak reference, pointer) of arrays accepted lately

    def accepts(self, array) -> bool:
        known = self.known.get(id(array))
        if known is not None and known[0]() is array:
            return True  # accepted before (a loop alternating between a few arrays)
        if not hasattr(array, "device_ctypes_pointer") or getattr(array, "ndim", -1) != self.ndim:
            return False
        if array.dtype != self.dtype:
            return False
        if self.layout == "C" and not array.flags["C_CONTIGUOUS"]:
            return False
        if self.layout == "F" and not array.flags["F_CONTIGUOUS"]:
            return False
        if len(self.known) >= KNOWN_ARRAYS:
            self.known.clear()
        # a device array's pointer never changes: read once
        self.known[id(array)] = (weakref.ref(array), array.device_ctypes_pointer.value or 0)
        return True

    def take(self, array) -> bool:
        """Write ``array`` if it is of this parameter's kind (its pointer, and its shape and
        strides if they changed); whether it was. An array accepted lately (a loop alternating
        between a few) is found with one lookup."""
        known = self.known.get(id(array))
        if known is None or known[0]() is not array:
            if not self.accepts(array):
                return False
            known = self.known[id(array)]
        slots = self.slots
        slots[4].value = known[1]
        shape, strides = array.shape, array.strides
        if shape == self.written[0] and strides == self.written[1]:
            return True  # the usual case in a loop: only the pointer is new
        slots[2].value = array.size
        for k, extent in enumerate(shape):
            slots[5 + k].value = extent
        for k, stride in enumerate(strides):
            slots[5 + self.ndim + k].value = stride
        self.written = shape, strides
        return True
