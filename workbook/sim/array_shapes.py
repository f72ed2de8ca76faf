"""Array shapes that the GPU compiler rejects are rejected in the simulator too.

numba-cuda compiles ``cuda.local.array(shape, dtype)`` and ``cuda.shared.array(shape,
dtype)`` only when each extent of ``shape`` is a constant of the kernel: an integer literal,
arithmetic on literals alone (``2 * 4``), a global or closure variable, or an element of a
global tuple. Arithmetic on variables (``R * N``, ``n // 2``, ``-n``) or a call
(``len(t)``, ``int(n)``) is typed as a run-time integer and rejected: ``No implementation of
function ... array(int64, ...)`` (numba-cuda 0.30.4 compiling for sm_90). The simulator
evaluates the expression and runs; :func:`check` reads the call's source instead and raises
:class:`ArrayShapeError` with the fix. Each call site is read once.

A shape held in a local variable of the kernel (``n = R * N`` first) is rejected by the
compiler too but is not recognised here: only the call's own text is read.
"""

from __future__ import annotations

import ast
import linecache
import sys

from workbook.sim import sanitizer
from workbook.sim.parsing import parse


class ArrayShapeError(TypeError):
    """An array's shape that the GPU compiler does not accept as a constant."""


_verdicts: dict[tuple, str | None] = {}  # (code, offset) of a call -> problem or None


def check(kind: str) -> None:
    """Raise :class:`ArrayShapeError` if the kernel's ``cuda.<kind>.array(...)`` call that
    is running now has a shape the GPU compiler rejects (``kind``: local or shared)."""
    frame = sanitizer.student_frame(sys._getframe(1))
    if frame is None:
        return
    key = (frame.f_code, frame.f_lasti)
    if key not in _verdicts:
        _verdicts[key] = _problem(frame, kind)
    if _verdicts[key]:
        raise ArrayShapeError(_verdicts[key])


def _call_source(frame) -> str | None:
    """The text of the call the frame is making (its whole expression, over lines)."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if index >= len(positions):
        return None
    first, last, start, end = positions[index]
    if None in (first, last, start, end):
        return None
    lines = [linecache.getline(frame.f_code.co_filename, n) for n in range(first, last + 1)]
    if not all(lines):
        return None
    if first == last:
        return lines[0][start:end]
    return "".join([lines[0][start:], *lines[1:-1], lines[-1][:end]])


def _problem(frame, kind: str) -> str | None:
    source = _call_source(frame)
    try:
        call = parse(source.strip(), mode="eval").body if source else None
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    shape = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "shape"), None)
    if shape is None:
        return None
    extents = shape.elts if isinstance(shape, ast.Tuple) else [shape]
    bad = next((e for e in extents if not _constant(e)), None)
    if bad is None:
        return None
    text = ast.unparse(bad)
    return (f"{ast.unparse(call)}: on a GPU the shape of a {kind} array must be a constant of "
            f"the kernel (a literal, or a global or closure variable), and numba-cuda's "
            f"compiler rejects the expression `{text}` (typed as a run-time integer). "
            f"Compute it outside the kernel, e.g. `SIZE = {text}` beside the other "
            f"constants, then `cuda.{kind}.array(SIZE, ...)`.")


def _constant(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant | ast.Name | ast.Attribute | ast.Subscript):
        return True
    if isinstance(node, ast.BinOp | ast.UnaryOp):  # arithmetic on literals alone
        return all(isinstance(n, ast.Constant) for n in ast.walk(node)
                   if isinstance(n, ast.expr) and not isinstance(n, ast.BinOp | ast.UnaryOp))
    return False


__all__ = ["ArrayShapeError", "check"]
