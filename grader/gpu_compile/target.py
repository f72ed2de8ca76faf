"""numba-cuda's real compiler for sm_90, on a machine without a GPU.

NVVM comes with the ``numba-cuda[cu13]`` wheels, and NVRTC and nvJitLink with
``cuda-bindings``: compiling, and linking CUDA C into a kernel, need no driver and no
device. numba chooses the simulator or the compiler once per process, so this module
is used in a process that has not imported ``numba.cuda`` in simulator mode: the compile
worker (:mod:`grader.gpu_compile.worker`) and ``tests/sm90_compile.py``.

:func:`use_real_compiler` first, then :func:`compile_kernel`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CC = (9, 0)


class CudaCError(Exception):
    """NVRTC rejected the CUDA C linked to a foreign function (``declare_device``)."""

    def __init__(self, label: str, source: str, log: str):
        super().__init__(f"{label}: {log}")
        self.label, self.source, self.log = label, source, log


class LinkError(Exception):
    """nvJitLink could not link the kernel with its CUDA C (undefined or doubly defined
    functions, PTX that ptxas rejects)."""


def use_real_compiler() -> None:
    """Import the workbook in gpu mode although the driver reports no GPU, so that
    ``numba.cuda`` is the compiler (and the workbook's device functions are the GPU's)."""
    if "numba.cuda" in sys.modules:
        from numba.cuda import config

        if config.ENABLE_CUDASIM:
            raise RuntimeError("numba.cuda was imported in simulator mode in this process")
    os.environ["WORKBOOK_MODE"] = "gpu"
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    if "workbook.mode" not in sys.modules:
        spec = importlib.util.spec_from_file_location("workbook.mode", ROOT / "workbook/mode.py")
        mode = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mode)
        mode.gpu_count = lambda: 1
        sys.modules["workbook.mode"] = mode
    import workbook

    assert workbook.MODE == "gpu"
    from numba.cuda import dispatcher

    class Device:  # device functions compile for the current device's cc: this one
        compute_capability = CC

    dispatcher.get_current_device = Device


def compile_kernel(py_func, signature, fastmath: bool = False, foreign=()) -> str:
    """The kernel's PTX for sm_90; numba's exceptions when the compiler rejects it.

    ``signature``: a signature string or a tuple of argument types. ``foreign``: the
    ``(kind, text, label)`` code (``cu`` or ``ptx``) of the foreign functions the kernel
    may call; it is compiled with NVRTC and linked with the kernel by nvJitLink, as numba
    links it on a GPU (:class:`CudaCError`, :class:`LinkError`).
    """
    from numba import cuda

    ptx, _ = cuda.compile_ptx(py_func, signature, cc=CC, fastmath=fastmath)
    if foreign:
        unique = {(kind, text): label for kind, text, label in foreign}  # one copy of each
        link([ptx, *(_foreign_ptx(kind, text, label) for (kind, text), label in unique.items())])
    return ptx


def _foreign_ptx(kind: str, text: str, label: str) -> str:
    from workbook import ptx as ptxmod

    if kind != "cu":
        return text
    try:
        return ptxmod.compile_ptx(text, CC, name=label)
    except ptxmod.CompileError as exc:
        raise CudaCError(label, text, str(exc).split("\n", 1)[-1]) from None


def link(modules: list[str]) -> int:
    """Link PTX modules into a cubin for sm_90 with nvJitLink; its size. :class:`LinkError`
    with nvJitLink's log if it cannot."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch=sm_{CC[0]}{CC[1]}"])
    try:
        try:
            for index, text in enumerate(modules):
                data = text.encode()
                name = "kernel.ptx" if index == 0 else f"foreign{index}.ptx"
                nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            text = log.rstrip(b"\x00").decode(errors="replace").strip()
            raise LinkError(text or str(exc)) from None
        return nvjitlink.get_linked_cubin_size(handle)
    finally:
        nvjitlink.destroy(handle)


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)|\bat (\S.*?) \((\d+)\)$', re.M)


def error_location(exc: BaseException, is_student) -> tuple[tuple | None, tuple | None]:
    """``((file, line), (file, line))``: where in the student's code the compiler stopped,
    and the call of the device function holding that line, if any (else None).

    The place is the first one numba's message names in a file ``is_student(file)``
    accepts, else the innermost in the compiler's own frames (some of numba's errors name
    none); the call is the last other student line in those frames before it.
    """
    trace, calls = [], set()  # student places in the compiler's frames, outermost first
    tb = exc.__traceback__
    while tb is not None:
        for name, value in list(tb.tb_frame.f_locals.items()):
            loc = value if type(value).__name__ == "Loc" else getattr(value, "loc", None)
            if (name != "interp" and type(loc).__name__ == "Loc"  # interp: a def's line
                    and isinstance(getattr(loc, "line", None), int)
                    and is_student(str(loc.filename))):
                place = (str(loc.filename), loc.line)
                if not trace or trace[-1] != place:
                    trace.append(place)
                if _is_call(value):
                    calls.add(place)
        tb = tb.tb_next
    where = None
    for match in _FILE_LINE.finditer(str(exc)):
        filename, line = (match.group(1), match.group(2)) if match.group(1) else match.group(3, 4)
        if is_student(filename):
            where = (filename, int(line))
            break
    where = where or (trace[-1] if trace else None)
    if where not in trace:
        return where, None
    before = [p for p in trace[:len(trace) - trace[::-1].index(where)]
              if p != where and p in calls]
    return where, (before[-1] if before else None)


def _is_call(value) -> bool:
    """Whether a compiler object stands for a call (a call's typing constraint, a call
    expression, an assignment of one)."""
    if type(value).__name__ in ("CallConstraint", "IntrinsicCallConstraint"):
        return True
    try:  # numba's IR expressions raise KeyError for attributes they lack
        expr = value.value if type(value).__name__ == "Assign" else value
        return type(expr).__name__ == "Expr" and expr.op == "call"
    except Exception:  # noqa: BLE001
        return False


__all__ = ["CC", "CudaCError", "LinkError", "compile_kernel", "error_location", "link",
           "use_real_compiler"]
