"""initcheck for warp shuffles: a read of a lane that does not exist or is not in the mask.

On a GPU, ``shfl_sync`` / ``shfl_xor_sync`` / ``shfl_up_sync`` / ``shfl_down_sync`` that
read a lane past the end of a partial warp, or a lane outside their mask, get an undefined
value (up and down past the ends of the warp are defined: the caller's own value). The
plain simulator hands back the caller's own value, with which a kernel can pass in the
simulator and fail on a GPU.

In sanitized launches the lane gets an :class:`Undefined` instead: the poison value of its
value's type (NaN, or ``0x7FADBEEF`` bytes: :func:`workbook.sim.shared_memory.poison`)
that reports its first use -- arithmetic, a comparison, a conversion, a store to memory, a
warp collective -- as an :class:`~workbook.sim.sanitizer.UninitializedReadError` naming the
lanes, the shuffle's line and the line of the use, as initcheck reports a read of
never-written shared memory (once the block has passed its next barrier or ended). A value
read that way and never used, as in ``other = shfl_down_sync(mask, v, d)`` followed by
``if lane + d < width: v += other``, is correct code and is not reported. After its first
use the poison flows on as a plain value (NaN spreads through float arithmetic).
"""

from __future__ import annotations

import math
import operator
import sys
import threading

import numpy as np

from workbook.sim import sanitizer, warp
from workbook.sim.shared_memory import poison

_INT64_POISON = int(poison(np.empty(1, np.int64))[0])


def poisoned(value):
    """The poison value of ``value``'s type: a Python float or int (float64, int64 in a
    kernel) stays one, a numpy scalar keeps its dtype."""
    if isinstance(value, float):
        return float("nan")
    if isinstance(value, int) and not isinstance(value, bool):
        return _INT64_POISON
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    return poison(np.empty(1, dtype))[0]


class Undefined:
    """A value that a shuffle read from outside its group: the poison ``value``, which
    reports its first use (see the module's docstring). ``what`` says which lane read which,
    ``site`` is the shuffle's site (see :func:`workbook.sim.sanitizer.caller_site`)."""

    __slots__ = ("value", "what", "site", "reader")

    def __init__(self, value, what: str, site, reader: int):
        self.value, self.what, self.site, self.reader = value, what, site, reader

    def _workbook_use(self, frame=None):
        """Report this use (once per reading lane and shuffle); return the poison value."""
        read = sanitizer.describe_site(self.site)
        used = sanitizer.describe_site(sanitizer.caller_site(frame or sys._getframe(1)))
        where = (f"  read and used at {read}" if used == read
                 else f"  read at {read}\n  used at {used}")
        report = (f"initcheck: use of an undefined value: {self.what}.\n{where}\n"
                  "  On a GPU the value read is undefined (the simulator gave the lane NaN, "
                  "or 0x7FADBEEF bytes for integers). Read only lanes that exist and are in "
                  "the mask, or leave the value unused there: launch whole warps (a "
                  "multiple of 32 threads), keep the offset inside the lanes that take part, "
                  "or guard the use (if lane + offset < width: ...).")
        sanitizer.report_undefined(threading.current_thread(),
                                   ("shuffle", self.reader, self.site), report)
        return self.value

    # numpy's ufuncs and its scalars' operators come here with the Undefined among inputs
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        frame = sys._getframe(1)
        inputs = tuple(x._workbook_use(frame) if isinstance(x, Undefined) else x
                       for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __repr__(self):
        return repr(self.value)

    def __str__(self):
        return str(self.value)

    def __format__(self, spec):
        return format(self.value, spec)

    def __float__(self):
        return float(self._workbook_use(sys._getframe(1)))

    def __int__(self):
        value = self._workbook_use(sys._getframe(1))
        return int(value) if not isinstance(value, float | np.floating) or math.isfinite(value) \
            else _INT64_POISON

    def __index__(self):
        return operator.index(self._workbook_use(sys._getframe(1)))

    def __bool__(self):
        return bool(self._workbook_use(sys._getframe(1)))

    def __hash__(self):
        return hash(self._workbook_use(sys._getframe(1)))


def _plain(value):
    return value.value if isinstance(value, Undefined) else value


def _forward(op):
    def method(self, other):
        return op(self._workbook_use(sys._getframe(1)), _plain(other))
    return method


def _reflected(op):
    def method(self, other):
        return op(other, self._workbook_use(sys._getframe(1)))
    return method


def _unary(fn):
    def method(self, *args):
        return fn(self._workbook_use(sys._getframe(1)), *args)
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift"):
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Undefined, f"__{_name}__", _forward(_op))
    setattr(Undefined, f"__r{_name}__", _reflected(_op))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Undefined, f"__{_name}__", _forward(getattr(operator, _name)))
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", abs),
                   ("invert", operator.invert), ("round", round), ("trunc", math.trunc),
                   ("floor", math.floor), ("ceil", math.ceil), ("complex", complex)):
    setattr(Undefined, f"__{_name}__", _unary(_fn))


def _undefined_read(thread, value, what: str):
    if thread.__dict__.get(sanitizer.BLOCK) is None:  # not a sanitized launch
        return None
    value = poisoned(value)
    if value is None:
        return None
    return Undefined(value, what, sanitizer.caller_site(sys._getframe(1)), thread.thread_id)


def install() -> None:
    """Give undefined shuffle reads an :class:`Undefined` in sanitized launches
    (idempotent)."""
    warp.add_undefined_hook(_undefined_read)


sanitizer.register("shuffles", install)
