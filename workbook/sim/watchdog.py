"""Bound and interrupt simulated kernels.

A check runs each test case under :func:`time_limit`: when the limit passes, a
:class:`KernelTimeout` is raised in the checking thread. If a simulated block is
running then, the block scheduler (:mod:`workbook.sim.scheduler`) catches it,
records what every simulated thread is doing (:func:`describe_block`), stops the
threads (:func:`stop_threads`) and lets the timeout propagate with that diagnosis.
A ``KeyboardInterrupt`` (Jupyter's stop button) stops the threads the same way.
"""

from __future__ import annotations

import ctypes
import linecache
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

TIMEOUT_ENV = "WORKBOOK_CHECK_TIMEOUT"
DEFAULT_TIMEOUT = 20.0
STOP_WAIT_S = 3.0  # how long stopped threads get to end
COOPERATIVE_STOP_S = 0.2  # how long waiting threads get to see the abort before being raised in
RAISE_AGAIN_S = 0.5  # between two raises in a thread still alive (it may have been in C code)
LOCK_POLL_S = 0.05  # how often a thread waiting for a StoppableLock looks for an abort

_LIBRARY_DIRS = tuple({sys.prefix, sys.base_prefix, str(Path(__file__).parents[1]),
                       os.path.dirname(threading.__file__)})


class KernelTimeout(BaseException):
    """A check ran past its time limit (a BaseException: student code cannot catch it)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.diagnosis = ""  # what the simulated threads were doing, set by the scheduler


class KernelStopped(BaseException):
    """Raised inside a simulated thread to end it (timeout or interrupt); a BaseException
    so that no ``except Exception`` on the way can keep the thread alive."""


def _quiet_stopped_threads() -> None:
    """Threads ended by :class:`KernelStopped` end silently, and so does a stop that lands
    where Python cannot raise it (a weakref callback or ``__del__`` the thread happened to
    run: "Exception ignored in ..."); other errors go to the hooks installed before
    (idempotent)."""
    previous = threading.excepthook
    if not getattr(previous, "_workbook_quiet", False):
        def hook(args):
            if not issubclass(args.exc_type, KernelStopped):
                previous(args)

        hook._workbook_quiet = True
        threading.excepthook = hook
    unraisable = sys.unraisablehook
    if not getattr(unraisable, "_workbook_quiet", False):
        def unraisable_hook(args):
            if not (args.exc_type and issubclass(args.exc_type, KernelStopped)):
                unraisable(args)

        unraisable_hook._workbook_quiet = True
        sys.unraisablehook = unraisable_hook


def check_timeout() -> float:
    """Seconds a check case may run in the simulator (``WORKBOOK_CHECK_TIMEOUT``)."""
    text = os.environ.get(TIMEOUT_ENV) or str(DEFAULT_TIMEOUT)
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} must be a positive number of seconds")
    return seconds


class StoppableLock:
    """A reentrant lock for state shared by simulated threads, usable by
    :class:`threading.Condition`, whose waiters give up (raise :class:`KernelStopped`) once
    their thread is stopped.

    Stopping raises an exception inside running threads; one that lands while a thread holds
    a lock can leave the lock held by a thread that has ended. A plain lock's waiters would
    then block forever, out of reach of the stop, and stay alive after the kernel was stopped.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._owner: threading.Thread | None = None  # not an ident: those are reused
        self._count = 0

    def _take(self) -> None:
        thread = threading.current_thread()
        while not self._lock.acquire(timeout=LOCK_POLL_S):
            if getattr(thread, "abort", False):
                raise KernelStopped
        self._owner = thread

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._owner is threading.current_thread():
            self._count += 1
            return True
        if not blocking or timeout >= 0:
            if not self._lock.acquire(blocking, timeout):
                return False
            self._owner = threading.current_thread()
        else:
            self._take()
        self._count = 1
        return True

    def release(self) -> None:
        if self._owner is not threading.current_thread():
            if getattr(threading.current_thread(), "abort", False):
                return  # a stopped thread that gave up waiting for the lock holds nothing
            raise RuntimeError("cannot release a lock this thread does not hold")
        self._count -= 1
        if not self._count:
            self._owner = None
            self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()

    # the protocol threading.Condition uses to wait with a lock held
    def _is_owned(self) -> bool:
        return self._owner is threading.current_thread()

    def _release_save(self) -> int:
        count, self._count, self._owner = self._count, 0, None
        self._lock.release()
        return count

    def _acquire_restore(self, count: int) -> None:
        self._take()
        self._count = count


def _raise_in(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Raise ``exc_type`` in the thread ``thread_id`` at its next bytecode (None: cancel)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None)


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`KernelTimeout` in this thread if the block runs past ``seconds``."""
    target = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def expire():
        with lock:
            if not state["done"]:
                state["fired"] = True
                _raise_in(target, KernelTimeout)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
            timer.cancel()
            if state["fired"]:
                _raise_in(target, None)  # a timeout not yet delivered must not leak out


def stop_threads(threads: Sequence[threading.Thread]) -> list[threading.Thread]:
    """End simulated threads: release their waits, raise :class:`KernelStopped` in them.

    Returns the threads still alive after :data:`STOP_WAIT_S` seconds (normally none).
    """
    _quiet_stopped_threads()
    for thread in threads:
        thread.abort = True
        thread.syncthreads_blocked = False
        thread.syncthreads_event.set()
    start = time.monotonic()
    live = [t for t in threads if t.is_alive()]
    # waiting threads see the abort and end by themselves: raising in them could land while
    # they hold a lock; only threads still running student code after a moment are raised in
    last_raise = start + COOPERATIVE_STOP_S - RAISE_AGAIN_S
    while live and time.monotonic() - start < STOP_WAIT_S:
        if time.monotonic() - last_raise > RAISE_AGAIN_S:
            last_raise = time.monotonic()
            frames = sys._current_frames()
            for thread in live:
                if not importing(frames.get(thread.ident)):
                    _raise_in(thread.ident, KernelStopped)
        time.sleep(0.02)
        live = [t for t in live if t.is_alive()]
    return live


def importing(frame) -> bool:
    """Whether a thread whose innermost frame is ``frame`` is inside Python's import system.
    A stop raised there can end the thread holding a module's import lock, and every thread
    that imports that module later waits for it forever, out of reach of any stop (seen:
    threads of a stopped kernel left waiting in ``_lock_unlock_module``). Such a thread is
    raised in once its import is done."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def simulated_threads(wait: float = 0.0) -> list[threading.Thread]:
    """The simulated CUDA threads still alive, after waiting up to ``wait`` seconds for
    them to end (none should outlive their kernel)."""
    from numba.cuda.simulator.kernel import BlockThread

    deadline = time.monotonic() + wait
    while True:
        live = [t for t in threading.enumerate() if isinstance(t, BlockThread) and t.is_alive()]
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.02)


def where_threads_are(threads: Sequence[threading.Thread], frames: int = 3) -> str:
    """Where each thread is now: its innermost ``frames`` frames (file:line function), a line
    per thread; for a report of threads that outlived their kernel."""
    current = sys._current_frames()
    lines = []
    for thread in threads:
        frame, stack = current.get(thread.ident), []
        while frame is not None and len(stack) < frames:
            code = frame.f_code
            stack.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
            frame = frame.f_back
        index = getattr(thread, "threadIdx", None)
        who = f"thread {tuple(index)}" if index is not None else thread.name
        lines.append(f"{who}: {' <- '.join(stack) or 'no Python frame'}"
                     f"{' (aborted)' if getattr(thread, 'abort', False) else ''}")
    return "\n".join(lines)


def _student_frame(frame):
    """The innermost frame of the student's code (a kernel or device function)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<") or not name.startswith(_LIBRARY_DIRS):
            return frame
        frame = frame.f_back
    return None


def _warp_wait(frame) -> str | None:
    """The warp collective a thread waits in, if any."""
    while frame is not None:
        if frame.f_code.co_name == "_wait" and frame.f_code.co_filename.endswith("warp.py"):
            arrival = frame.f_locals.get("arrival")
            return getattr(arrival, "op", "a warp collective")
        frame = frame.f_back
    return None


def _thread_state(thread, frame) -> tuple[str, str]:
    """(what the thread does, where) for one simulated thread."""
    student = _student_frame(frame)
    where = ""
    if student is not None:
        filename = student.f_code.co_filename
        line = linecache.getline(filename, student.f_lineno).strip()
        where = f"{filename} line {student.f_lineno}" + (f": {line}" if line else "")
    if not thread.is_alive():
        return "exited", ""
    if thread.syncthreads_blocked:
        return "waiting at cuda.syncthreads()", where
    op = _warp_wait(frame)
    if op:
        return f"waiting in {op}", where
    return "running", where


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _ranges(ids: list[int]) -> str:
    ids = sorted(ids)
    parts, start = [], ids[0]
    for prev, cur in zip(ids, [*ids[1:], None]):
        if cur != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(parts)


def describe_block(threads: Sequence[threading.Thread], barriers: int = 0) -> str:
    """What each simulated thread of a block is doing, grouped, with the likely causes.

    ``barriers``: how many times the block has passed ``cuda.syncthreads()`` so far.
    """
    frames = sys._current_frames()
    groups: dict[tuple[str, str], list[int]] = {}
    for thread in threads:
        state = _thread_state(thread, frames.get(thread.ident))
        groups.setdefault(state, []).append(thread.thread_id)
    block = tuple(threads[0].blockIdx) if threads else ()
    lines = [f"what the simulated threads of block {block} were doing "
             f"({_plural(len(threads), 'thread')}, {_plural(barriers, 'barrier')} passed; "
             f"threads by linear index):"]
    for (state, where), ids in sorted(groups.items(), key=lambda kv: min(kv[1])):
        at = f" at {where}" if where else ""
        lines.append(f"  {'thread' if len(ids) == 1 else 'threads'} {_ranges(ids)}: {state}{at}")
    states = {state for state, _ in groups}
    causes = _causes(states, looping=barriers > LOOPING_BARRIERS)
    return "\n".join([*lines, "likely causes:", *("  - " + c for c in causes)])


LOOPING_BARRIERS = 1000  # more barriers than any tree over a block: the threads loop
# the two ways a kernel never ends (on a GPU too, where nobody can see the threads)
LOOP_CAUSE = ("a loop whose exit condition never becomes true: a stride, step or index that "
              "is never updated (e.g. a forgotten `stride *= 2`), or updated by only some "
              "threads")
BARRIER_CAUSE = ("threads wait at a barrier or warp collective that the others never reach: "
                 "a cuda.syncthreads() or *_sync call inside a branch or loop that not every "
                 "thread runs the same number of times")


def _causes(states: set[str], looping: bool) -> list[str]:
    causes = []
    waiting = {s for s in states if s.startswith("waiting")}
    if "running" in states or looping:
        causes.append(LOOP_CAUSE)
    if waiting and (states - waiting - {"exited"} or "exited" in states) and not looping:
        causes.append(BARRIER_CAUSE)
    causes.append(f"if the kernel is merely slow in the simulator, set {TIMEOUT_ENV} to a "
                  f"larger number of seconds")
    return causes


__all__ = ["BARRIER_CAUSE", "DEFAULT_TIMEOUT", "KernelStopped", "KernelTimeout", "LOOP_CAUSE",
           "StoppableLock", "TIMEOUT_ENV", "check_timeout", "describe_block", "simulated_threads",
           "stop_threads", "time_limit"]
