"""Recognise exercise stubs: code that still raises ``NotImplementedError``."""

from __future__ import annotations

import types


def _code_of(obj) -> types.CodeType | None:
    fn = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj
    return getattr(fn, "__code__", None)


def _names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def is_stub(obj) -> bool:
    """True when ``obj`` (a function, a numba kernel or a device function) is a stub.

    A stub's body mentions ``NotImplementedError``; real submissions never do.
    Looking at the bytecode works for kernels on a real GPU too, where a raise
    inside a kernel is silently ignored unless compiled with ``debug=True``.
    """
    code = _code_of(obj)
    return code is not None and "NotImplementedError" in set(_names(code))
