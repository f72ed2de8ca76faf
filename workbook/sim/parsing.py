"""``ast.parse`` for code that simulated threads run at the same time.

CPython 3.11 and 3.12 check the AST constructor's recursion depth against a counter that all
threads share: two threads parsing at once can fail with ``SystemError: AST constructor
recursion depth mismatch`` (seen when every thread of a block reported the same skipped
barrier). One lock makes the parses take turns.
"""

from __future__ import annotations

import ast

from workbook.sim.watchdog import StoppableLock

_LOCK = StoppableLock()  # taken by simulated threads, which a stop may end holding it


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode)
