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
change. (It therefore keeps the last arguments alive until the next call.)
Arguments of another kind (a host array, another dtype or layout) take numba's
ordinary path, so a prepared launch is never wrong, at worst not faster. In
simulator mode it simply calls the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbook.mode import current_mode


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


class _DriverLaunch:
    """The compiled kernel, its launch configuration and one argument packer per parameter."""

    def __init__(self, kernel, grid, block, shared, args):
        from cuda.core import LaunchConfig, launch
        from numba.cuda.cudadrv import driver

        from workbook.occupancy import compiled

        overload = compiled(kernel, args)
        self.packers = [_packer(t) for t in overload.argument_types]
        self.function = overload._codelibrary.get_cufunc().kernel
        self.stream = driver._to_core_stream(0)
        self.config = LaunchConfig(grid=_dim3(grid), block=_dim3(block), shmem_size=shared)
        self._launch = launch
        self._last_args: tuple = ()
        self._last_values: list = []
        if not self.accepts(args):
            raise TypeError("the example arguments do not match the compiled kernel")

    def accepts(self, args) -> bool:
        return len(args) == len(self.packers) and all(
            p.accepts(a) for p, a in zip(self.packers, args))

    def same_as_last(self, args) -> bool:
        """The very objects of the last launch (they were accepted then)."""
        last = self._last_args
        return len(args) == len(last) and all(a is b for a, b in zip(args, last))

    def try_launch(self, args) -> bool:
        """Launch if ``args`` are of the compiled kinds; False (nothing launched) if not."""
        if not self.same_as_last(args):
            if not self.accepts(args):
                return False
            values: list = []
            for packer, arg in zip(self.packers, args):
                packer.pack(arg, values)
            self._last_args, self._last_values = tuple(args), values
        self._launch(self.stream, self.config, self.function, *self._last_values)
        return True


def _packer(numba_type):
    from numba import types

    if isinstance(numba_type, types.Array):
        return _ArrayPacker(numba_type)
    if isinstance(numba_type, types.Boolean):
        return _ScalarPacker(bool, None)
    if isinstance(numba_type, types.Integer | types.Float) and numba_type.bitwidth in (32, 64):
        import ctypes

        kind = int if isinstance(numba_type, types.Integer) else float
        name = f"c_{'u' if kind is int and not numba_type.signed else ''}" + (
            f"int{numba_type.bitwidth}" if kind is int else
            ("float" if numba_type.bitwidth == 32 else "double"))
        return _ScalarPacker(kind, getattr(ctypes, name))
    raise TypeError(f"no fast path for an argument of type {numba_type}")


class _ScalarPacker:
    def __init__(self, kind, ctype):
        self.kind, self.ctype = kind, ctype

    def accepts(self, value) -> bool:
        import numpy as np

        if self.kind is bool:
            return isinstance(value, bool | np.bool_)
        if self.kind is int:
            return isinstance(value, int | np.integer) and not isinstance(value, bool)
        return isinstance(value, float | np.floating)

    def pack(self, value, out: list) -> None:
        out.append(bool(value) if self.ctype is None else self.ctype(value))


class _ArrayPacker:
    """Numba's array argument: meminfo, parent, size, itemsize, data, shape, strides."""

    def __init__(self, numba_type):
        import numpy as np

        self.dtype = np.dtype(str(numba_type.dtype))
        self.ndim = numba_type.ndim
        self.layout = numba_type.layout

    def accepts(self, array) -> bool:
        if not hasattr(array, "device_ctypes_pointer") or getattr(array, "ndim", -1) != self.ndim:
            return False
        if array.dtype != self.dtype:
            return False
        if self.layout == "C":
            return bool(array.flags["C_CONTIGUOUS"])
        if self.layout == "F":
            return bool(array.flags["F_CONTIGUOUS"])
        return True

    def pack(self, array, out: list) -> None:
        out += (0, 0, array.size, array.dtype.itemsize, array.device_ctypes_pointer.value or 0,
                *array.shape, *array.strides)
