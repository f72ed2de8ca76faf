"""A simulated kernel, sent to a process where ``numba.cuda`` is the real compiler.

In simulator mode ``@cuda.jit`` makes a ``FakeCUDAKernel`` that runs its function as
Python. :func:`pack` pickles the kernel with numba's cloudpickle (:mod:`grader.pickling`):
its function by value (code, the globals and closure cells it uses, the default
arguments), and with it every device function, foreign function and constant it reaches.
What only the simulator has is replaced by what the GPU build has:

* a ``FakeCUDAKernel`` by ``cuda.jit(fn, device=..., fastmath=...)`` (or, where it is a
  module's attribute, e.g. ``workbook.vector.load4``, by that attribute: the workbook's
  GPU versions of its device functions);
* a simulated ``cuda.declare_device`` function by the real declaration, its CUDA C or PTX
  (a ``.cu`` file is read now) kept for linking (:func:`unpack` returns it);
* anything else of the simulator's ``numba.cuda`` (a warp intrinsic the workbook
  replaced) by the real ``numba.cuda``'s attribute of the same name.

An object that cannot be sent raises :class:`Unsendable`. :func:`unpack` runs in the
compiler's process; both sides import this module.
"""

from __future__ import annotations

import io
import linecache
import pickle
import sys
import types

_FOREIGN: list[tuple[str, str, str]] = []  # (kind, text, label) met by the current unpack


class Unsendable(Exception):
    """The kernel reaches an object that cannot be rebuilt in the compiler's process."""


def pack(kernel) -> tuple[bytes, dict[str, str]]:
    """The pickled kernel, and the source text of each file its functions come from (for
    the compiler's messages)."""
    from grader import pickling

    buffer = io.BytesIO()
    pickler = pickling.pickler(buffer, _simulator_reduce)
    try:
        pickler.dump(kernel)
    except Unsendable:
        raise
    except Exception as exc:  # noqa: BLE001  (whatever cloudpickle cannot pickle)
        raise Unsendable(f"{type(exc).__name__}: {exc}") from None
    sources = {name: "".join(linecache.getlines(name)) for name in sorted(pickler.filenames)}
    return buffer.getvalue(), {name: text for name, text in sources.items() if text}


def unpack(data: bytes, sources: dict[str, str]):
    """``(kernel, foreign code)`` in the compiler's process: the real dispatcher and the
    ``(kind, text, label)`` of the foreign functions it reaches."""
    for name, text in sources.items():
        lines = text.splitlines(True)
        linecache.cache[name] = (len(text), None, lines, name)
    _FOREIGN.clear()
    kernel = pickle.loads(data)
    return kernel, list(_FOREIGN)


# --- the simulator's side ---------------------------------------------------------------

def _simulator_reduce(obj):
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from workbook.sim.foreign.function import ForeignFunction

    if isinstance(obj, FakeCUDAKernel):
        where = _module_attribute(obj, getattr(obj.fn, "__module__", None))
        if where:
            return _import_attribute, where
        return _jit, (obj.fn, bool(obj._device), bool(obj._fastmath))
    if isinstance(obj, ForeignFunction):
        from workbook.sim.foreign.program import _link_items

        try:
            items = tuple((kind, text, f"{obj.name}.{kind}" if label.startswith("<") else label)
                          for kind, text, label in _link_items(obj.link))
        except Exception as exc:  # noqa: BLE001  (an unreadable .cu: the simulator says so)
            raise Unsendable(f"{obj.name}: {exc}") from None
        return _declare_device, (obj.name, obj.restype, obj.argtypes, items)
    if _from_simulator(obj):
        name = _cuda_names().get(id(obj))
        if name is None:
            raise Unsendable(f"{obj!r} exists in the CUDA simulator only")
        return _cuda_attribute, (name,)
    return None


def _from_simulator(obj) -> bool:
    module = getattr(obj, "__module__", None) or type(obj).__module__ or ""
    if isinstance(obj, type | types.ModuleType):
        return False
    return module.startswith(("numba.cuda.simulator", "workbook.sim"))


def _module_attribute(obj, module_name) -> tuple[str, str] | None:
    """``(module, name)`` where ``obj`` is an attribute of a module of the workbook, the
    grader or an installed package (the compiler's process imports it: a student's or a
    test's module is sent by value instead)."""
    module = sys.modules.get(module_name or "__main__")
    installed = str(getattr(module, "__file__", "") or "").startswith(sys.prefix)
    if module is None or not (installed or module_name.split(".")[0] in ("workbook", "grader")):
        return None
    for name, value in vars(sys.modules[module_name]).items():
        if value is obj:
            return module_name, name
    return None


_CUDA_NAMES: dict[int, str] = {}


def _cuda_names() -> dict[int, str]:
    """id -> name of the simulator's ``numba.cuda`` attributes."""
    if not _CUDA_NAMES:
        import numba.cuda

        _CUDA_NAMES.update({id(v): k for k, v in vars(numba.cuda).items()
                            if not k.startswith("_")})
    return _CUDA_NAMES


# --- the compiler's side ----------------------------------------------------------------

def _import_attribute(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


def _jit(fn, device: bool, fastmath: bool):
    from numba import cuda

    return cuda.jit(fn, device=device, fastmath=fastmath)


def _declare_device(name: str, restype, argtypes, items):
    from numba import cuda

    _FOREIGN.extend(items)
    return cuda.declare_device(name, restype(*argtypes))


def _cuda_attribute(name: str):
    import numba.cuda

    return getattr(numba.cuda, name)


__all__ = ["Unsendable", "pack", "unpack"]
