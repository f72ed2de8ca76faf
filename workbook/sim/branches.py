"""Which ``if`` of a kernel's source a line sits in: for advice about a barrier that some
threads skip (a ``cuda.syncthreads()`` inside a branch they do not take)."""

from __future__ import annotations

import ast
import linecache
from functools import cache

from workbook.sim.parsing import parse


def enclosing_if(filename: str, line: int) -> tuple[int, str] | None:
    """The innermost ``if`` (or ``elif``/``else``) whose body holds ``line``: its first line's
    number and text; None if the line is in no branch or the source cannot be read."""
    branches = _branches(filename, "".join(linecache.getlines(filename)))
    inside = [(start, end) for start, body_start, end in branches if body_start <= line <= end]
    if not inside:
        return None
    start = max(inside)[0]
    return start, linecache.getline(filename, start).strip()


@cache
def _branches(filename: str, source: str) -> tuple[tuple[int, int, int], ...]:
    """``(if line, first body line, last line)`` of every ``if`` statement in ``source``."""
    try:
        tree = parse(source, filename)
    except (SyntaxError, ValueError):
        return ()
    return tuple((node.lineno, node.body[0].lineno, node.end_lineno)
                 for node in ast.walk(tree) if isinstance(node, ast.If))
