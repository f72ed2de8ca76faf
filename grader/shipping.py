"""Send a notebook's objects to another process, by value.

A notebook's functions, kernels, device functions and classes live in ``__main__``,
which another process cannot import: :func:`dumps` pickles them by value (numba's
copy of cloudpickle, through :mod:`grader.pickling`), with the globals they use.
Kernels and device functions travel as their Python function and compile options, and
foreign functions (``cuda.declare_device``) as their declaration, so that the receiving process
rebuilds them in its own mode (GPU or simulator) and compiles them itself. The
source lines of the notebook's cells travel too: tracebacks, compiler errors and the
simulator's diagnoses in the other process quote them as in the notebook.
"""

from __future__ import annotations

import functools
import io
import linecache
import os
import pickle
import types
from collections.abc import Iterable, Mapping

from grader import pickling

MAX_BYTES = 256 << 20  # larger than any exercise's objects: a notebook's data, not code


class ShippingError(Exception):
    """An object of the notebook cannot be sent to another process; the message says which
    and why."""


def dumps(objects: Mapping[str, object], namespace: Mapping[str, object] | None = None) -> bytes:
    """``objects`` (a name -> object mapping) as bytes for :func:`loads`.

    The functions among them keep sharing one global namespace on the other side, which
    :func:`loads` returns; ``namespace`` is the one they share here (the notebook's
    globals). Raises :class:`ShippingError` naming the object that cannot be sent.
    """
    payload = dict(objects)
    if namespace is not None:  # a function without code of its own: it carries the globals
        payload[_GLOBALS] = types.FunctionType(_EMPTY_CODE, namespace, "globals_carrier")
    buffer = io.BytesIO()
    pickler = pickling.pickler(buffer, _reduce)
    for name, value in payload.items():
        try:
            pickler.dump((name, value))
        except Exception as exc:  # anything may fail to pickle; name what and why
            raise ShippingError(f"{name} cannot be sent to another process "
                                f"({type(exc).__name__}: {exc})") from None
        if buffer.tell() > MAX_BYTES:
            raise ShippingError(f"{name} makes the objects to send larger than "
                                f"{MAX_BYTES >> 20} MiB")
    return pickle.dumps({"lines": _cell_lines(pickler.filenames), "count": len(payload),
                         "objects": buffer.getvalue()}, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> tuple[dict[str, object], dict]:
    """The objects :func:`dumps` sent, and the global namespace their functions share (a
    fresh dict when none was sent)."""
    message = pickle.loads(data)
    linecache.cache.update(message["lines"])
    stream = io.BytesIO(message["objects"])
    unpickler = pickle.Unpickler(stream)  # one unpickler: shared objects stay shared
    objects = dict(unpickler.load() for _ in range(message["count"]))
    carrier = objects.pop(_GLOBALS, None)
    return objects, (carrier.__globals__ if carrier is not None else {"__name__": "__main__"})


_GLOBALS = "<globals>"
_EMPTY_CODE = compile("None", "<globals>", "eval")


def _cell_lines(filenames: Iterable[str]) -> dict[str, tuple]:
    """linecache entries of the code that exists only in this process (notebook cells)."""
    lines = {}
    for name in filenames:
        entry = linecache.cache.get(name)
        if entry is not None and len(entry) == 4 and not os.path.isfile(name):
            lines[name] = entry
    return lines


# --- reductions ------------------------------------------------------------------------------

def _reduce(obj):
    """How to rebuild ``obj`` on the other side, where it is a kernel, a foreign function or
    a notebook function's cache; None for everything else."""
    kind = type(obj)
    twin = _module_twin(obj)
    if twin is not None:
        from grader.gpu_compile.payload import _import_attribute

        return _import_attribute, twin
    if kind.__name__ == "CUDADispatcher" and kind.__module__ == "numba.cuda.dispatcher":
        options = dict(obj.targetoptions)
        return rebuild_kernel, (obj.py_func, {"device": bool(options.get("device")),
                                              "fastmath": bool(options.get("fastmath")),
                                              "debug": bool(options.get("debug")),
                                              "targetoptions": options})
    if kind.__name__ == "FakeCUDAKernel":
        return rebuild_kernel, (obj.fn, {"device": obj._device, "fastmath": obj._fastmath,
                                         "debug": obj._debug})
    if kind.__name__ == "ExternFunction" and kind.__module__ == "numba.cuda.compiler":
        return rebuild_foreign, _gpu_declaration(obj)
    if kind.__name__ == "ForeignFunction" and kind.__module__.startswith("workbook.sim"):
        from numba.core import typing

        return rebuild_foreign, (obj.name, typing.signature(obj.restype, *obj.argtypes),
                                 obj.link, False, "numba")
    if kind.__name__ in _LINKABLE and kind.__module__.startswith("numba.cuda"):
        extras = {key: getattr(obj, key) for key in ("setup_callback", "teardown_callback", "nrt")
                  if getattr(obj, key, None)}
        return rebuild_linkable, (kind.__name__, obj.data, getattr(obj, "_name", None), extras)
    if isinstance(obj, functools._lru_cache_wrapper) and _is_dynamic(obj.__wrapped__):
        parameters = obj.cache_parameters()
        return rebuild_cache, (obj.__wrapped__, parameters["maxsize"], parameters["typed"])
    return None


_COMPILED = ("CUDADispatcher", "FakeCUDAKernel", "_Intrinsic")


def _module_twin(obj) -> tuple[str, str] | None:
    """``(module, name)`` where ``obj`` is a compiled function of the workbook (e.g.
    ``workbook.vector.load4``) or of an installed package: each mode has its own, so the
    other side takes its own."""
    from grader.gpu_compile.payload import _module_attribute

    if type(obj).__name__ not in _COMPILED:
        return None
    fn = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or getattr(obj, "_defn", None)
    module = getattr(fn, "__module__", None)
    return _module_attribute(obj, module) if module and module != "__main__" else None


_LINKABLE = ("CUSource", "PTXSource", "Cubin", "Fatbin", "Archive", "Object", "LTOIR")


def _is_dynamic(fn) -> bool:
    return getattr(fn, "__module__", None) == "__main__"


def _gpu_declaration(extern) -> tuple:
    """The arguments of the ``cuda.declare_device`` call that made ``extern``, read back
    from numba-cuda's target context (0.30): the link items and the ABI."""
    from numba.cuda.descriptor import cuda_target

    try:
        (_, impl), = cuda_target.target_context._defns[extern].versions
        library, = impl.libs
        call_conv = type(impl.__defaults__[0].call_conv).__name__
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise pickle.PicklingError(f"the declaration of foreign function {extern.name} "
                                   f"cannot be read back ({exc})") from None
    abi = "c" if "CABI" in call_conv else "numba"
    return (extern.name, extern.sig, tuple(library._linking_files),
            bool(library.use_cooperative), abi)


def rebuild_kernel(py_func, options: dict):
    """A kernel or device function of this process's mode from its Python function."""
    from numba import cuda

    if cuda.config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        return FakeCUDAKernel(py_func, device=options["device"], fastmath=options["fastmath"],
                              debug=options["debug"])
    if "targetoptions" in options:
        from numba.cuda.dispatcher import CUDADispatcher

        return CUDADispatcher(py_func, dict(options["targetoptions"]))
    return cuda.jit(py_func, device=options["device"], fastmath=options["fastmath"],
                    debug=options["debug"])


def rebuild_foreign(name, sig, link, use_cooperative, abi):
    """``cuda.declare_device`` again, in this process (GPU or simulator)."""
    from numba import cuda

    link = list(link) if isinstance(link, (tuple, list, set)) else link
    if cuda.config.ENABLE_CUDASIM:
        return cuda.declare_device(name, sig, link=link)
    return cuda.declare_device(name, sig, link=link, use_cooperative=use_cooperative, abi=abi)


def rebuild_linkable(kind: str, data, name, extras: dict):
    """Code to link (``cuda.CUSource`` ...) as this process's numba.cuda (GPU or simulator)
    has it; the simulator's takes no callbacks."""
    from numba import cuda

    if cuda.config.ENABLE_CUDASIM:
        return getattr(cuda, kind)(data, name)
    return getattr(cuda, kind)(data, name=name, **extras)


def rebuild_cache(fn, maxsize, typed):
    """A notebook function decorated with ``functools.lru_cache`` (or ``cache``), empty."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(fn)


__all__ = ["MAX_BYTES", "ShippingError", "dumps", "loads", "rebuild_cache",
           "rebuild_foreign", "rebuild_kernel", "rebuild_linkable"]
