"""``cuda.declare_device`` in the simulator: the declared foreign function."""

from __future__ import annotations

import threading

import numpy as np

from workbook import ptx as ptxmod
from workbook.sim.foreign.common import RET_BASE, RET_SIZE, ForeignEmulationError
from workbook.sim.foreign.execute import _execute
from workbook.sim.foreign.program import _link_items, _load_program, _Program
from workbook.sim.foreign.values import _from_float, _mask
from workbook.sim.watchdog import StoppableLock


def _pointer_address(value, name: str, index: int) -> tuple[int, tuple | None]:
    """(address, region) of an argument passed to a CPointer parameter."""
    data = getattr(value, "data", None)
    array = getattr(value, "_arr", None)
    if isinstance(value, np.ndarray) or hasattr(value, "_ary") or hasattr(
            value, "__cuda_array_interface__"):
        raise TypeError(
            f"{name}: argument {index + 1} is an array, but the parameter is a C pointer; "
            "numba does not convert arrays to pointers: pass tile[i:].ctypes (a pointer to "
            "element i) or ffi.from_buffer(tile[i:])")
    if isinstance(data, int) and array is not None:
        base = array
        while isinstance(getattr(base, "base", None), np.ndarray):
            base = base.base
        region = None
        if isinstance(base, np.ndarray) and base.flags.c_contiguous:
            host = base.__array_interface__["data"][0]
            region = (host, base.nbytes, np.asarray(base).reshape(-1).view(np.uint8),
                      "argument")
        return data, region
    try:  # a cffi pointer (ffi.from_buffer(...))
        import cffi

        ffi = cffi.FFI()
        if isinstance(value, ffi.CData):
            return int(ffi.cast("uintptr_t", value)), None
    except ImportError:
        pass
    raise TypeError(f"{name}: argument {index + 1} ({type(value).__name__}) cannot be passed to "
                    "a C pointer parameter: pass array[i:].ctypes")


def _argument_bits(value, typ, name: str, index: int) -> tuple[int, tuple | None]:
    from numba.cuda import types

    if isinstance(typ, types.CPointer):
        return _pointer_address(value, name, index)
    if isinstance(typ, types.Float):
        return _from_float(float(value), typ.bitwidth), None
    if isinstance(typ, types.Boolean):
        return int(bool(value)), None
    if isinstance(typ, types.Integer):
        if isinstance(value, (float, np.floating)):
            value = int(value)
        return _mask(int(value), typ.bitwidth), None
    raise TypeError(f"{name}: parameters of type {typ} are not emulated by the simulator")


def _return_dtype(typ):
    from numba.cuda import types

    if isinstance(typ, (types.NoneType,)) or typ == types.void:
        return None
    if isinstance(typ, types.BaseTuple):
        fields = [(f"f{i}", _return_dtype(t)) for i, t in enumerate(typ.types)]
        return np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields]},
                        align=True)
    if isinstance(typ, types.Boolean):
        return np.dtype(np.uint8)
    if isinstance(typ, (types.Integer, types.Float)):
        from numba.np import numpy_support

        return numpy_support.as_dtype(typ)
    raise TypeError(f"return type {typ} is not emulated by the simulator")


class ForeignFunction:
    """What ``cuda.declare_device`` returns in simulator mode: call it inside a kernel."""

    def __init__(self, name: str, sig, link=None, use_cooperative=False, abi="numba"):
        from numba.cuda.core import sigutils

        if abi != "numba":
            raise NotImplementedError(
                f"declare_device(..., abi={abi!r}): the simulator emulates numba's ABI only")
        argtypes, restype = sigutils.normalize_signature(sig)
        if restype is None:
            raise TypeError("Return type must be provided for device declarations")
        self.__name__ = self.name = name
        self.argtypes, self.restype = tuple(argtypes), restype
        self.link = link
        self._program: _Program | None = None
        self._lock = StoppableLock()  # taken by simulated threads
        self.return_dtype = _return_dtype(restype)
        if self.return_dtype is not None and self.return_dtype.itemsize > RET_SIZE:
            raise TypeError(f"{name}: return type {restype} is too large to emulate")

    def __repr__(self) -> str:
        args = ", ".join(str(t) for t in self.argtypes)
        return f"<foreign function {self.name}: {self.restype}({args}) (simulated)>"

    def program(self) -> _Program:
        """Compile the linked code and decode this function's PTX (once per declaration)."""
        if self._program is None:
            with self._lock:
                if self._program is None:
                    try:
                        items = tuple(_link_items(self.link))
                        self._program = _load_program(self.name, items, len(self.argtypes))
                    except ptxmod.CompileError as exc:
                        raise ForeignEmulationError(f"{self.name}: {exc}") from None
        return self._program

    def __call__(self, *args):
        thread = threading.current_thread()
        if getattr(thread, "_manager", None) is None:
            raise ForeignEmulationError(f"{self.name} can only be called inside a kernel")
        if len(args) != len(self.argtypes):
            raise TypeError(f"{self.name} takes {len(self.argtypes)} argument(s) "
                            f"({', '.join(map(str, self.argtypes))}), not {len(args)}")
        program = self.program()
        names = [name for _, name in program.fn.params]
        params = {names[0]: RET_BASE}
        regions = []
        for index, (value, typ) in enumerate(zip(args, self.argtypes)):
            bits, region = _argument_bits(value, typ, self.name, index)
            params[names[index + 1]] = bits
            if region is not None:
                regions.append(region)
        lane = _execute(program, params, regions, thread)
        if lane.status is None:
            raise ForeignEmulationError(f"{lane.where()}: returned without a status value")
        if lane.status != 0:
            raise ForeignEmulationError(
                f"{lane.where()}: returned status {lane.status}. numba's foreign functions "
                "return 0 on success (a stub that still says `return -1;` is not written yet)")
        if self.return_dtype is None:
            return None
        record = lane.ret[:self.return_dtype.itemsize].copy().view(self.return_dtype)[0]
        if self.return_dtype.names:
            return tuple(record[n][()] for n in self.return_dtype.names)
        return record[()] if hasattr(record, "shape") else record


def declare_device(name, sig, link=None, use_cooperative=False, abi="numba"):
    """The simulator's ``cuda.declare_device``: a :class:`ForeignFunction` that runs the
    linked code's PTX (see the module's docstring)."""
    return ForeignFunction(name, sig, link=link, use_cooperative=use_cooperative, abi=abi)
