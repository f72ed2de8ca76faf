"""The compile worker: ``python -m grader.gpu_compile.worker``, numba-cuda's real compiler
in a process of its own (the check's process runs the simulator).

It reads requests from stdin and writes answers to stdout, each a pickled dict behind its
length (:func:`write_frame`, :func:`read_frame`). First it answers ``{"ready": True}``
once a probe kernel compiled (NVVM is loaded then), or ``{"unavailable": reason}``; then
for each request ``{"id", "kernel", "sources", "argtypes"}`` (see
:mod:`grader.gpu_compile.payload`) ``{"id", "ok": True, "seconds"}`` or ``{"id", "ok":
False, "error": {...}}``. It ends when stdin closes.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time

_HEADER = struct.Struct(">I")


def write_frame(stream, message: dict) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream) -> dict | None:
    """The next message, or None at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


def _probe() -> None:
    from grader.gpu_compile.target import compile_kernel

    def probe(out):
        out[0] = 1.0

    compile_kernel(probe, "void(float32[::1])")


def _is_student(filename: str) -> bool:
    """A file of the student's (a cell, a notebook's or a script's file), not numba's, the
    grader's or the workbook's; numba names files relative to the working folder."""
    from grader.exercise import _is_student_frame

    return _is_student_frame(filename if filename.startswith("<") else os.path.abspath(filename))


def compile_request(request: dict) -> dict:
    """Compile one kernel; the answer to send back."""
    from grader.gpu_compile import target
    from grader.gpu_compile.payload import unpack

    start = time.monotonic()
    try:
        kernel, foreign = unpack(request["kernel"], request["sources"])
        argtypes = pickle.loads(request["argtypes"])
    except Exception as exc:  # noqa: BLE001  (reported as a skipped step, not a bug)
        return {"ok": False, "error": {"stage": "send", "message": f"{type(exc).__name__}: {exc}"}}
    fastmath = bool(getattr(kernel, "targetoptions", {}).get("fastmath"))
    try:
        target.compile_kernel(kernel.py_func, argtypes, fastmath=fastmath, foreign=foreign)
    except target.CudaCError as exc:
        error = {"stage": "cuda_c", "label": exc.label, "source": exc.source, "message": exc.log}
    except target.LinkError as exc:
        error = {"stage": "link", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001  (numba's compiler may raise anything)
        try:
            where, call = target.error_location(exc, _is_student)
        except Exception:  # noqa: BLE001  (the reason is still told, without a line)
            where = call = None
        error = {"stage": "python", "type": type(exc).__name__, "message": str(exc),
                 "where": where, "call": call}
    else:
        return {"ok": True, "seconds": round(time.monotonic() - start, 3)}
    return {"ok": False, "error": error, "seconds": round(time.monotonic() - start, 3)}


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, not into the answers
    requests = sys.stdin.buffer
    try:
        from grader.gpu_compile.target import use_real_compiler

        use_real_compiler()
        _probe()
    except Exception as exc:  # noqa: BLE001  (no compiler here: the check says why)
        write_frame(out, {"unavailable": f"{type(exc).__name__}: {exc}"})
        return 0
    write_frame(out, {"ready": True})
    while (request := read_frame(requests)) is not None:
        write_frame(out, {"id": request["id"], **compile_request(request)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
