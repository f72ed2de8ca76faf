"""Warp-level intrinsics for numba-cuda's CUDA simulator.

The simulator runs every thread of a block as a Python thread but knows nothing
of warps. :func:`install` adds the warp intrinsics to the simulated ``cuda``
module: ``shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync``,
``syncwarp``, ``ballot_sync``, ``all_sync``, ``any_sync``, ``eq_sync``,
``match_any_sync``, ``match_all_sync``, ``activemask`` and ``lanemask_lt``.

Warps
    Thread ``t = x + bdx * (y + bdy * z)`` of a block is lane ``t % 32`` of warp
    ``t // 32``. Lanes past the end of the block (a partial last warp) do not
    exist and are dropped from every mask.

Rendezvous
    Every intrinsic except ``activemask`` and ``lanemask_lt`` is a collective:
    all lanes named in the mask must call the same intrinsic with the same mask
    before any of them returns, and each result is computed from all of their
    arguments. Where a GPU would hang or give undefined results the simulator
    raises :class:`WarpCollectiveError` instead: the caller is not in its own
    mask, a named lane waits in ``cuda.syncthreads()``, two lanes that name
    each other called different intrinsics or masks, or a named lane did not
    arrive while ``WORKBOOK_WARP_TIMEOUT`` seconds (default 20) pass without any
    other lane arriving. A named lane
    that exited is an error too: a GPU leaves it out of votes, but a shuffle
    reads an undefined value from it. The error names the root first (the lane that
    exited, with the line where it left the kernel, or the lanes that called different
    collectives, with their lines), then the lanes left waiting for it.

Undefined values
    A shuffle that reads from a lane that does not exist or is not in the mask
    returns the caller's own value; in sanitized launches, a poison value that
    reports its first use (:mod:`workbook.sim.shuffle_reads`). ``shfl_up_sync`` and
    ``shfl_down_sync`` past the ends of the warp give the caller's own value, as on a
    GPU. As in PTX, only the low 5 bits of a shuffle's lane or offset operand are used.

Active lanes
    The simulator cannot see branch divergence, so ``activemask`` waits until
    every other lane of the warp has exited or waits somewhere (in a warp
    intrinsic, ``activemask`` or ``cuda.syncthreads()``), and counts as active
    the lanes waiting in the same ``activemask`` call: the lanes that would run
    it together on a GPU.

Argument types
    As the GPU compiler does, the shuffles and votes reject a mask or a shuffle's lane
    or offset that is not an integer (a float, a bool), a vote's predicate that is a
    float, and a shuffled value that is not a 32- or 64-bit int or float (a bool,
    a float16, a tuple): :class:`WarpTypeError`, a ``TypeError`` with the compiler's words.

Return types
    Shuffles return the source lane's value object unchanged. Masks are
    ``np.uint32`` (on a GPU ``ballot_sync`` and ``match_any_sync`` give an
    int32 with the same bits); predicates are ``bool``; ``match_all_sync``
    gives ``(mask, True)`` or ``(0, False)``.
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
import threading
import time

import numpy as np

from workbook.sim.watchdog import StoppableLock

__all__ = ["DEFAULT_TIMEOUT", "INTRINSICS", "TIMEOUT_ENV", "WarpCollectiveError", "WarpTypeError",
           "collective", "install"]

WARP_SIZE = 32
FULL_MASK = 0xFFFFFFFF
TIMEOUT_ENV = "WORKBOOK_WARP_TIMEOUT"
DEFAULT_TIMEOUT = 20.0
_POLL_S = 0.05
_INSTALLED = "_workbook_warp_installed"
_WARPS = "_workbook_warps"
_BARRIERS = "_workbook_barriers"
_state_lock = StoppableLock()  # taken by simulated threads, which a stop may end holding it
_SYNC_HOOKS: list = []  # called as hook(warp, lanes) when lanes complete a collective together
_UNDEFINED_HOOKS: list = []  # called as hook(thread, value, what) on an undefined shuffle read
_KERNEL_FRAME = "_workbook_kernel_frame"  # attribute of a thread: its kernel's frame
_ROOT = "_workbook_warp_root"  # attribute of a lane stopped by a warp error: (root, waiters)
_UNORDERED: set = set()  # collectives that do not order memory (see collective())


def add_sync_hook(hook) -> None:
    """Call ``hook(warp, lanes)`` whenever the lanes ``lanes`` (a tuple) of ``warp`` complete
    a collective together: they are synchronised at that point (used by the sanitizer)."""
    if hook not in _SYNC_HOOKS:
        _SYNC_HOOKS.append(hook)


def add_undefined_hook(hook) -> None:
    """Call ``hook(thread, value, what)`` in a lane whose shuffle read a lane that does not
    exist or is not in the mask; ``value`` is the lane's own value and ``what`` says which
    lane it read and why that is undefined. A hook that returns something other than None
    gives the lane that value (used by the sanitizer: a poison value, reported later)."""
    if hook not in _UNDEFINED_HOOKS:
        _UNDEFINED_HOOKS.append(hook)


class WarpCollectiveError(RuntimeError):
    """A warp collective was used in a way that hangs or is undefined on a GPU."""


class WarpTypeError(TypeError):
    """A warp intrinsic called with an argument type that the GPU compiler rejects."""


# ---------------------------------------------------------------------------
# Argument types, checked as numba-cuda's typing of the intrinsics does


def _type_name(value) -> str:
    """The numba type name of a simulated value: ``float64`` for a Python float."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "ndim", 0) == 0:
        return "bool" if dtype == np.bool_ else str(dtype)
    return type(value).__name__


def _is_integer(value) -> bool:
    return type(value) is int or (isinstance(value, int | np.integer)
                                  and not isinstance(value, bool | np.bool_))


def _reject(op: str, problem: str, value, fix: str):
    raise WarpTypeError(f"cuda.{op}(): {problem}. Got {_type_name(value)}. The GPU compiler "
                        f"rejects this call (a TypingError): {fix}")


def _check_mask(op: str, mask) -> None:
    if not _is_integer(mask):
        _reject(op, "Mask type must be an integer", mask, "pass an integer mask such as "
                "0xFFFFFFFF")


def _check_shuffle(op: str, mask, value, lane) -> None:
    _check_mask(op, mask)
    if type(value) not in (float, int, np.float32, np.float64, np.int32, np.int64) and (
            isinstance(value, bool | np.bool_ | np.floating | np.complexfloating | complex)
            or not isinstance(value, int | float | np.integer)):
        _reject(op, "shfl_sync only supports 32- and 64-bit ints and floats", value,
                "convert the value first, e.g. float32(x) or int32(flag)")
    if not _is_integer(lane):
        _reject(op, "the lane or offset must be an integer", lane, "pass an int")


def _check_vote(op: str, mask, predicate) -> None:
    _check_mask(op, mask)
    if not (_is_integer(predicate) or isinstance(predicate, bool | np.bool_)):
        _reject(op, "Predicate must be an integer or boolean", predicate,
                "compare first, e.g. x > 0")


# ---------------------------------------------------------------------------
# Per-block state


class _Arrival:
    """One lane's call of a collective, waiting for the rest of its group."""

    __slots__ = ("op", "raw_mask", "mask", "lane", "value", "arg", "result", "done", "frame")

    def __init__(self, op, raw_mask, mask, lane, value, arg, frame=None):
        self.op = op
        self.raw_mask = raw_mask
        self.mask = mask  # raw_mask restricted to the lanes that exist
        self.lane = lane
        self.value = value
        self.arg = arg
        self.result = None
        self.done = False
        self.frame = frame  # the frame that called the intrinsic, for messages

    def joins(self, other: _Arrival) -> bool:
        return self.op == other.op and self.mask == other.mask

    def describe(self) -> str:
        if self.op == "activemask":
            return "activemask"
        return f"{self.op} with mask {self.raw_mask:#010x}"


class _Warp:
    """Rendezvous state of one warp of one block, guarded by ``cond``."""

    def __init__(self, index: int, existing: int):
        self.index = index
        self.existing = existing
        self.cond = threading.Condition(StoppableLock())  # stopped waiters give up
        self.pending: dict[int, _Arrival] = {}
        self.at_activemask: dict[int, _Arrival] = {}
        self.threads: dict[int, threading.Thread] = {}
        self.exited = 0


def _make_warps(nthreads: int) -> list[_Warp]:
    count = -(-nthreads // WARP_SIZE)
    sizes = [min(WARP_SIZE, nthreads - w * WARP_SIZE) for w in range(count)]
    return [_Warp(w, (1 << size) - 1) for w, size in enumerate(sizes)]


def _warps_of(manager) -> list[_Warp]:
    warps = getattr(manager, _WARPS, None)
    if warps is None:
        with _state_lock:
            warps = getattr(manager, _WARPS, None)
            if warps is None:
                warps = _make_warps(int(np.prod(manager._block_dim)))
                setattr(manager, _WARPS, warps)
    return warps


def _locate(thread) -> tuple[_Warp, int]:
    tid = thread.thread_id
    return _warps_of(thread._manager)[tid // WARP_SIZE], tid % WARP_SIZE


def _current(op: str):
    thread = threading.current_thread()
    if getattr(thread, "_manager", None) is None:
        raise WarpCollectiveError(f"cuda.{op}() can only be called inside a kernel")
    warp, lane = _locate(thread)
    return thread, warp, lane


def _barriers(thread) -> int:
    return getattr(thread, _BARRIERS, 0)


@functools.cache
def _lanes(mask: int) -> tuple[int, ...]:
    return tuple(lane for lane in range(WARP_SIZE) if mask >> lane & 1)


def _timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV) or str(DEFAULT_TIMEOUT)
    try:
        return float(text)
    except ValueError:
        raise WarpCollectiveError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None


# ---------------------------------------------------------------------------
# Messages


def _where(warp: _Warp, lane: int, thread) -> str:
    block = ",".join(str(i) for i in thread.blockIdx)
    return f"lane {lane} of warp {warp.index} (block ({block}))"


def _line(frame) -> str:
    """``file:line in function`` and the line's text, for a frame of kernel code."""
    if frame is None:
        return "an unknown line"
    code, line = frame.f_code, frame.f_lineno
    text = linecache.getline(code.co_filename, line).strip()
    where = f"{code.co_filename}:{line} in {code.co_name}"
    return f"{where}\n        {text}" if text else where


def _caller(frame):
    """The first frame of ``frame`` and its callers that runs kernel code (not the
    simulator's, the workbook's or the standard library's)."""
    from workbook.sim.sanitizer import student_frame  # imported late: it imports this module

    return student_frame(frame)


def _waiter(warp: _Warp, arrival: _Arrival) -> str:
    """A lane left waiting in a collective, briefly: ``lane 3 (shfl_down_sync, line 12)``."""
    frame = _caller(arrival.frame)
    line = "" if frame is None else f", line {frame.f_lineno}"
    return f"lane {arrival.lane} ({arrival.op}{line})"


def _stop(thread, root: str, waiters: list[str], error_type=None):
    """The error of a lane that stops because of ``root``, a problem in another lane (or its
    own): the root first, then the lanes left waiting for it, nearest first. It is kept on
    the lane, so that lanes waiting for this one report the same root."""
    thread.__dict__[_ROOT] = (root, waiters)
    shown = waiters[:4] + ([f"{len(waiters) - 4} more"] if len(waiters) > 4 else [])
    message = root + (f"\n  Lanes stopped waiting for it: {', '.join(shown)}." if shown else "")
    if error_type is not None:
        # Keep the type of the error that stopped the root lane, so that whichever thread
        # the simulator reports, the launch fails with that error.
        try:
            return error_type(message)
        except Exception:
            pass
    return WarpCollectiveError(message)


def _exit_error(warp, lane, thread, arrival):
    """The error of a lane whose collective names ``lane``, which ended without reaching it."""
    other = warp.threads.get(lane)
    exc = other.exception[0] if other is not None and other.exception else None
    me = _waiter(warp, arrival)
    if exc is None:
        left = other.__dict__.get(_KERNEL_FRAME) if other is not None else None
        root = (f"{_where(warp, lane, thread)} exited without reaching {arrival.describe()}, "
                f"which names it: it left the kernel at {_line(left)}\n"
                f"  while lane {arrival.lane} waits in {arrival.op} at "
                f"{_line(_caller(arrival.frame))}\n"
                "  Every lane named in a collective's mask must reach it: on a GPU a shuffle "
                "then reads an undefined value, and a syncwarp or vote may hang. Call the "
                "collective where every lane of the mask reaches it (before an early return, "
                "outside an `if` that only some lanes take), or name only the lanes that "
                "reach it in the mask.")
        return _stop(thread, root, [me])
    stored = other.__dict__.get(_ROOT)
    if stored is not None:
        return _stop(thread, stored[0], [*stored[1], me], type(exc))
    # the error that stopped the lane is the root: its own message first (without the
    # simulator's thread prefix), then who was waiting for that lane
    text = _THREAD_PREFIX.sub("", str(exc), count=1)
    root = f"{text}\n  (raised in {_where(warp, lane, thread)}, named in {arrival.describe()})"
    return _stop(thread, root, [me], type(exc))


_THREAD_PREFIX = re.compile(r"^tid=\[[^\]]*\] ctaid=\[[^\]]*\]: ")


def _doing(warp: _Warp, lane: int) -> str:
    other = warp.pending.get(lane)
    if other is not None:
        return f"lane {lane} (waiting in {other.describe()})"
    if lane in warp.at_activemask:
        return f"lane {lane} (waiting in activemask)"
    if lane not in warp.threads:
        return f"lane {lane} (not started)"
    return f"lane {lane} (running)"


# ---------------------------------------------------------------------------
# Rendezvous


def _check_abort(thread, op: str) -> None:
    if getattr(thread, "abort", False):
        raise WarpCollectiveError(f"{op} abandoned: another thread of the block raised an error")


def _missing(warp: _Warp, arrival: _Arrival) -> list[int]:
    if arrival.op == "activemask":
        return _running(warp, arrival.arg)
    return [
        lane
        for lane in _lanes(arrival.mask)
        if not (lane in warp.pending and warp.pending[lane].joins(arrival))
    ]


def _check_missing(warp: _Warp, arrival: _Arrival, thread) -> list[int]:
    """The lanes ``arrival`` still waits for; raise if one of them can never arrive."""
    missing = _missing(warp, arrival)
    for lane in missing:
        other = warp.pending.get(lane)
        if other is not None:
            if other.mask >> arrival.lane & 1:
                raise WarpCollectiveError(
                    f"{_where(warp, arrival.lane, thread)} called {arrival.describe()} at "
                    f"{_line(_caller(arrival.frame))}\n  but lane {lane}, which it names, "
                    f"called {other.describe()} at {_line(_caller(other.frame))}\n"
                    "  The lanes of a mask must all call the same collective with the same "
                    "mask."
                )
        elif warp.exited >> lane & 1:
            raise _exit_error(warp, lane, thread, arrival)
        elif _barriers(warp.threads.get(lane)) > _barriers(thread):
            other_frame = warp.threads.get(lane).__dict__.get(_KERNEL_FRAME)
            raise WarpCollectiveError(
                f"{_where(warp, lane, thread)} is named in {arrival.describe()} "
                f"but waits in cuda.syncthreads() at {_line(other_frame)}\n  which cannot "
                f"finish while lane {arrival.lane} waits in {arrival.op} at "
                f"{_line(_caller(arrival.frame))}\n  This deadlocks."
            )
    return missing


def _complete_if_ready(warp: _Warp, arrival: _Arrival) -> None:
    """If every lane of ``arrival``'s group has arrived, hand out all results."""
    group = {}
    for lane in _lanes(arrival.mask):
        other = warp.pending.get(lane)
        if other is None or not other.joins(arrival):
            return
        group[lane] = other
    results = _RESULTS[arrival.op](group, arrival.mask)
    if arrival.op not in _UNORDERED:
        for hook in _SYNC_HOOKS:
            hook(warp, tuple(group))
    for lane, member in group.items():
        member.result = results[lane]
        member.done = True
        del warp.pending[lane]
    warp.cond.notify_all()


def _running(warp: _Warp, level: int) -> list[int]:
    """Lanes that may still reach a warp intrinsic, for a waiter past ``level`` barriers."""
    return [
        lane
        for lane in _lanes(warp.existing & ~warp.exited)
        if lane not in warp.pending
        and lane not in warp.at_activemask
        and _barriers(warp.threads.get(lane)) <= level
    ]


def _settle_activemask(warp: _Warp) -> None:
    """Once no lane of the warp runs, give each ``activemask`` caller its group's mask."""
    waiting = warp.at_activemask
    if not waiting or _running(warp, next(iter(waiting.values())).arg):
        return
    sites: dict[object, int] = {}
    for lane, arrival in waiting.items():
        sites[arrival.value] = sites.get(arrival.value, 0) | 1 << lane
    for arrival in waiting.values():
        arrival.result = np.uint32(sites[arrival.value])
        arrival.done = True
    waiting.clear()
    warp.cond.notify_all()


def _wait(warp: _Warp, arrival: _Arrival, thread) -> None:
    """Wait for the group; give up after ``timeout`` seconds in which no missing lane came.

    The clock restarts whenever another lane arrives: on a busy machine the lanes of a
    big block (Python threads) may take long to get there, yet they are not stuck.
    """
    timeout = _timeout()
    deadline = time.monotonic() + timeout
    missing = len(_missing(warp, arrival))
    while not arrival.done:
        _check_abort(thread, arrival.op)
        still_missing = len(_check_missing(warp, arrival, thread))
        if still_missing < missing:
            missing, deadline = still_missing, time.monotonic() + timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            lanes = ", ".join(_doing(warp, lane) for lane in _missing(warp, arrival))
            raise WarpCollectiveError(
                f"{_where(warp, arrival.lane, thread)} waited {timeout:g} s in "
                f"{arrival.describe()} without another lane arriving; still missing: "
                f"{lanes} (set {TIMEOUT_ENV} to wait longer)"
            )
        warp.cond.wait(min(_POLL_S, remaining))


def _collective(op: str, mask, value=None, arg=None):
    thread, warp, lane = _current(op)
    _check_abort(thread, op)
    raw_mask = int(mask) & FULL_MASK
    if not raw_mask >> lane & 1:
        raise WarpCollectiveError(
            f"{_where(warp, lane, thread)} called {op} with mask {raw_mask:#010x}, "
            f"which does not include lane {lane}"
        )
    arrival = _Arrival(op, raw_mask, raw_mask & warp.existing, lane, value, arg,
                       sys._getframe(2))
    with warp.cond:
        warp.pending[lane] = arrival
        try:
            _complete_if_ready(warp, arrival)
            _settle_activemask(warp)
            _wait(warp, arrival, thread)
        except WarpCollectiveError as error:  # this lane is the root of what follows
            if _ROOT not in thread.__dict__ and not getattr(thread, "abort", False):
                thread.__dict__[_ROOT] = (str(error), [])
            raise
        finally:
            if warp.pending.get(lane) is arrival:
                del warp.pending[lane]
    result = arrival.result
    if type(result) is _Undefined:
        return _undefined_read(thread, warp, arrival, result.source)
    return result


class _Undefined:
    """The result of a shuffle that read lane ``source``, which does not exist or is not in
    the mask: undefined on a GPU (see :func:`_undefined_read`)."""

    __slots__ = ("source",)

    def __init__(self, source: int):
        self.source = source


def _undefined_read(thread, warp: _Warp, arrival: _Arrival, source: int):
    """What a lane gets from a shuffle that read lane ``source``, outside its group: the
    value of an undefined-read hook (the sanitizer's poison), else the lane's own value."""
    if not _UNDEFINED_HOOKS:
        return arrival.value
    if not warp.existing >> source & 1:
        lanes = warp.existing.bit_length()
        why = (f"lane {source} does not exist: the block has "
               f"{int(np.prod(thread._manager._block_dim))} threads, so warp {warp.index} has "
               f"lanes 0-{lanes - 1} only")
    else:
        why = (f"lane {source} is not in the mask {arrival.raw_mask:#010x}, so it takes no "
               "part in the shuffle")
    what = (f"{_where(warp, arrival.lane, thread)} read lane {source} in "
            f"{arrival.describe()}, and {why}")
    for hook in _UNDEFINED_HOOKS:
        value = hook(thread, arrival.value, what)
        if value is not None:
            return value
    return arrival.value


def collective(op: str, value, results, mask=FULL_MASK, orders: bool = True):
    """Join the calling lane to the warp collective ``op``; return this lane's result.

    A hook for warp-wide instructions emulated elsewhere (see
    :mod:`workbook.sim.foreign`). ``results(group, mask)`` gets ``{lane: arrival}``
    (each ``arrival.value`` is what that lane passed) and returns ``{lane: result}``;
    it runs once, in the last lane to arrive. Lanes join only lanes calling the same
    ``op`` (registered with its ``results`` on first use) with the same mask.
    ``orders=False``: the op does not order the lanes' memory accesses (the sync hooks
    are not told), as ``ldmatrix`` / ``stmatrix`` / ``mma`` on a GPU.
    """
    _RESULTS.setdefault(op, results)
    if not orders:
        _UNORDERED.add(op)
    return _collective(op, mask, value)


def _activemask(site):
    thread, warp, lane = _current("activemask")
    _check_abort(thread, "activemask")
    # value: the call site, which tells groups apart; arg: barriers passed so far.
    arrival = _Arrival("activemask", 0, 0, lane, site, _barriers(thread), sys._getframe(2))
    with warp.cond:
        warp.at_activemask[lane] = arrival
        try:
            _settle_activemask(warp)
            _wait(warp, arrival, thread)
        finally:
            if warp.at_activemask.get(lane) is arrival:
                del warp.at_activemask[lane]
    return arrival.result


# ---------------------------------------------------------------------------
# Results: each takes {lane: arrival} and the group's mask, returns {lane: result}


def _shuffle(source):
    """Results of a shuffle whose lane ``lane`` reads from ``source(lane, b & 31)``."""

    def results(group, mask):
        out = {}
        for lane, arrival in group.items():
            j = source(lane, int(arrival.arg) & (WARP_SIZE - 1))
            src = group.get(j)
            if src is not None:
                out[lane] = src.value
            elif 0 <= j < WARP_SIZE:  # a lane outside the group: undefined
                out[lane] = _Undefined(j)
            else:  # up / down past the warp's ends: the lane's own value, as defined
                out[lane] = arrival.value
        return out

    return results


def _ballot_bits(group) -> int:
    return sum(1 << lane for lane, arrival in group.items() if arrival.value)


def _vote(decide):
    def results(group, mask):
        result = decide(_ballot_bits(group), mask)
        return dict.fromkeys(group, result)

    return results


def _match_keys(group) -> dict[int, object]:
    """Values compared as a GPU does: by their bits, floats as float64 if any is a float."""
    values = {lane: arrival.value for lane, arrival in group.items()}
    if any(isinstance(v, float | np.floating) for v in values.values()):
        return {lane: np.float64(v).view(np.int64).item() for lane, v in values.items()}
    return {lane: int(v) if isinstance(v, int | np.integer) else v for lane, v in values.items()}


def _match_any(group, mask):
    keys = _match_keys(group)
    bits: dict[object, int] = {}
    for lane, key in keys.items():
        bits[key] = bits.get(key, 0) | 1 << lane
    return {lane: np.uint32(bits[key]) for lane, key in keys.items()}


def _match_all(group, mask):
    same = len(set(_match_keys(group).values())) == 1
    return dict.fromkeys(group, (np.uint32(mask), True) if same else (np.uint32(0), False))


_RESULTS = {
    "shfl_sync": _shuffle(lambda lane, b: b),
    "shfl_up_sync": _shuffle(lambda lane, b: lane - b),
    "shfl_down_sync": _shuffle(lambda lane, b: lane + b),
    "shfl_xor_sync": _shuffle(lambda lane, b: lane ^ b),
    "syncwarp": lambda group, mask: dict.fromkeys(group),
    "ballot_sync": _vote(lambda bits, mask: np.uint32(bits)),
    "all_sync": _vote(lambda bits, mask: bits == mask),
    "any_sync": _vote(lambda bits, mask: bits != 0),
    "eq_sync": _vote(lambda bits, mask: bits in (0, mask)),
    "match_any_sync": _match_any,
    "match_all_sync": _match_all,
}


# ---------------------------------------------------------------------------
# The intrinsics, as methods of the simulator's fake ``cuda`` module


def _used(value):
    """``value``, or if it is a value that a shuffle read from outside its group (see
    :func:`add_undefined_hook`), what it stands for, its use reported."""
    use = getattr(type(value), "_workbook_use", None)
    return value if use is None else use(value, sys._getframe(1))


class _WarpIntrinsics:
    """Methods copied onto ``FakeCUDAModule`` by :func:`install`."""

    def shfl_sync(self, mask, value, src_lane):
        """Value of ``value`` in lane ``src_lane & 31``."""
        mask, value, src_lane = _used(mask), _used(value), _used(src_lane)
        _check_shuffle("shfl_sync", mask, value, src_lane)
        return _collective("shfl_sync", mask, value, src_lane)

    def shfl_up_sync(self, mask, value, delta):
        """Value of ``value`` in lane ``laneid - (delta & 31)``; the caller's own below 0."""
        mask, value, delta = _used(mask), _used(value), _used(delta)
        _check_shuffle("shfl_up_sync", mask, value, delta)
        return _collective("shfl_up_sync", mask, value, delta)

    def shfl_down_sync(self, mask, value, delta):
        """Value of ``value`` in lane ``laneid + (delta & 31)``; the caller's own above 31."""
        mask, value, delta = _used(mask), _used(value), _used(delta)
        _check_shuffle("shfl_down_sync", mask, value, delta)
        return _collective("shfl_down_sync", mask, value, delta)

    def shfl_xor_sync(self, mask, value, lane_mask):
        """Value of ``value`` in lane ``laneid ^ (lane_mask & 31)``."""
        mask, value, lane_mask = _used(mask), _used(value), _used(lane_mask)
        _check_shuffle("shfl_xor_sync", mask, value, lane_mask)
        return _collective("shfl_xor_sync", mask, value, lane_mask)

    def syncwarp(self, mask=FULL_MASK):
        """Wait until every lane in ``mask`` reaches ``syncwarp``."""
        _collective("syncwarp", _used(mask))

    def ballot_sync(self, mask, predicate):
        """``np.uint32`` mask of the lanes in ``mask`` whose predicate is true."""
        mask, predicate = _used(mask), _used(predicate)
        _check_vote("ballot_sync", mask, predicate)
        return _collective("ballot_sync", mask, predicate)

    def all_sync(self, mask, predicate):
        """True if the predicate is true in every lane of ``mask``."""
        mask, predicate = _used(mask), _used(predicate)
        _check_vote("all_sync", mask, predicate)
        return _collective("all_sync", mask, predicate)

    def any_sync(self, mask, predicate):
        """True if the predicate is true in some lane of ``mask``."""
        mask, predicate = _used(mask), _used(predicate)
        _check_vote("any_sync", mask, predicate)
        return _collective("any_sync", mask, predicate)

    def eq_sync(self, mask, predicate):
        """True if the predicate is true in all lanes of ``mask`` or in none."""
        mask, predicate = _used(mask), _used(predicate)
        _check_vote("eq_sync", mask, predicate)
        return _collective("eq_sync", mask, predicate)

    def match_any_sync(self, mask, value):
        """``np.uint32`` mask of the lanes in ``mask`` whose value equals the caller's."""
        return _collective("match_any_sync", _used(mask), _used(value))

    def match_all_sync(self, mask, value):
        """``(mask, True)`` if every lane in ``mask`` has the same value, else ``(0, False)``."""
        return _collective("match_all_sync", _used(mask), _used(value))

    def activemask(self):
        """``np.uint32`` mask of the lanes that call this ``activemask`` together.

        Waits until no other lane of the warp runs (see the module's docstring).
        """
        caller = sys._getframe(1)
        return _activemask((caller.f_code, caller.f_lasti))

    def lanemask_lt(self):
        """``np.uint32`` mask of the lanes below the caller's."""
        _, _, lane = _current("lanemask_lt")
        return np.uint32((1 << lane) - 1)


INTRINSICS = tuple(name for name in vars(_WarpIntrinsics) if not name.startswith("_"))


# ---------------------------------------------------------------------------
# Installation


def _track_threads(block_thread) -> None:
    """Record when each simulated thread starts, exits and enters ``syncthreads``."""
    run, syncthreads = block_thread.run, block_thread.syncthreads

    @functools.wraps(run)
    def tracked_run(self):
        warp, lane = _locate(self)
        with warp.cond:
            warp.threads[lane] = self
        try:
            run(self)
        finally:
            with warp.cond:
                warp.exited |= 1 << lane
                warp.cond.notify_all()
                _settle_activemask(warp)

    @functools.wraps(syncthreads)
    def counted_syncthreads(self):
        warp, _ = _locate(self)
        with warp.cond:
            setattr(self, _BARRIERS, _barriers(self) + 1)
            if warp.pending:
                warp.cond.notify_all()
            _settle_activemask(warp)
        syncthreads(self)

    block_thread.run = tracked_run
    block_thread.syncthreads = counted_syncthreads


def _keep_kernel_frame(thread, frame) -> None:
    """Keep, on ``thread``, the frame of the kernel function it runs (``frame`` or one of
    its callers), to name the line where a lane left the kernel: a finished frame keeps
    its last line. Called once per thread, at its first ``threadIdx`` or ``laneid``."""
    code = getattr(getattr(thread, "_manager", None), "_f", None)
    code = getattr(code, "__code__", None)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    thread.__dict__[_KERNEL_FRAME] = frame  # None if not found: not looked for again


def _track_kernel_frames(module) -> None:
    """``threadIdx`` and ``laneid`` of the fake ``cuda`` module, which keep the kernel's
    frame at a thread's first use (nearly every kernel asks one of them early)."""

    def thread_idx(self):
        thread = threading.current_thread()
        if _KERNEL_FRAME not in thread.__dict__:
            _keep_kernel_frame(thread, sys._getframe(1))
        return thread.threadIdx

    def laneid(self):
        thread = threading.current_thread()
        if _KERNEL_FRAME not in thread.__dict__:
            _keep_kernel_frame(thread, sys._getframe(1))
        return thread.thread_id % WARP_SIZE

    module.threadIdx = property(thread_idx, doc=module.threadIdx.__doc__)
    module.laneid = property(laneid, doc=module.laneid.__doc__)


def install() -> None:
    """Add the warp intrinsics to the simulator's ``cuda`` module (idempotent)."""
    from numba.cuda.simulator import kernel, kernelapi

    block_thread = kernel.BlockThread
    if getattr(block_thread, _INSTALLED, False):
        return
    _track_threads(block_thread)
    _track_kernel_frames(kernelapi.FakeCUDAModule)
    for name in INTRINSICS:
        setattr(kernelapi.FakeCUDAModule, name, getattr(_WarpIntrinsics, name))
    setattr(block_thread, _INSTALLED, True)
