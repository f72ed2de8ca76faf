"""A bool predicate for ``cuda.syncthreads_count``/``_and``/``_or``: rejected by the simulator
as by the GPU compiler.

numba-cuda 0.30.4 compiles these barriers for an integer predicate only: with ``changed`` a
bool, ``cuda.syncthreads_or(changed)`` fails to compile for sm_90 ("No implementation of
function ... syncthreads_or(bool)", seen on an H100 on 2026-11-26), while the plain simulator
runs it. :func:`install` makes the simulated barriers raise :class:`BarrierPredicateError`
with the fix instead, before any thread waits.
"""

from __future__ import annotations

import numpy as np

BARRIERS = ("syncthreads_count", "syncthreads_and", "syncthreads_or")
_INSTALLED = "_workbook_barrier_predicates"


class BarrierPredicateError(TypeError):
    """A barrier's predicate that the GPU compiler does not accept (a bool)."""


def _checked(name: str, barrier):
    def checked(self, predicate):
        if isinstance(predicate, bool | np.bool_):
            raise BarrierPredicateError(
                f"cuda.{name}({predicate!r}): on a GPU the predicate must be an integer "
                f"(numba-cuda compiles cuda.{name} for no bool); pass `1 if condition else 0`")
        return barrier(self, predicate)

    checked.__name__ = name
    return checked


def install() -> None:
    """Check the predicates of the simulator's barriers (idempotent)."""
    from numba.cuda.simulator import kernelapi

    module = kernelapi.FakeCUDAModule
    if getattr(module, _INSTALLED, False):
        return
    for name in BARRIERS:
        setattr(module, name, _checked(name, getattr(module, name)))
    setattr(module, _INSTALLED, True)
