"""A sanitizer for numba-cuda's CUDA simulator, in the spirit of compute-sanitizer.

The simulator runs every CUDA thread as a Python thread, and the GIL interleaves
them so politely that a kernel missing a ``cuda.syncthreads()`` usually still
gets the right answer. The sanitizer makes such kernels fail in the simulator,
with a message that names the bug. It is on by default in simulator mode;
``enable(False)`` or ``WORKBOOK_SANITIZE=0`` turns it off (the plain simulator,
plus the warp intrinsics). Its checks, named after compute-sanitizer's tools:

racecheck
    Two threads of a block access one element of shared or global memory, at
    least one of them writes, and nothing orders the two accesses: no
    ``cuda.syncthreads()`` between them, nor (for two lanes of one warp) a
    ``cuda.syncwarp()`` or a warp collective (``shfl_*_sync``, votes, match)
    that both lanes took part in. Atomics (``cuda.atomic.*``) do not race with
    each other. Blocks of one launch that conflict on an array watched with
    :func:`workbook.sim.global_races.watch` are reported too. The report's hint
    follows from the kind of race (:func:`race_hint`): a write and a read in
    different statements of one barrier interval want a barrier; many threads
    running one store or read-modify-write on one element, or a plain update of an
    element that others update atomically, want an atomic; blocks want an atomic or
    a second kernel launch, since no barrier orders them.
initcheck
    A read of shared memory that no thread of the block has written since the
    block began; and the use of a value that a shuffle read from a lane that does not
    exist or is not in its mask (:mod:`workbook.sim.shuffle_reads`). Shared memory is
    fresh for every block (it no longer keeps the previous block's values), arrays
    declared on one line no longer share storage, and new shared memory holds a poison
    value: NaN for floats, the bytes of ``0x7FADBEEF`` for other types (see
    :mod:`workbook.sim.shared_memory`).
synccheck
    A ``cuda.syncthreads()`` that not every thread of the block reaches: threads
    that wait at different ``cuda.syncthreads()`` calls, or a thread that exited
    (returned) while others wait at a barrier. On a GPU both are undefined
    behaviour (a hang, or a barrier that does not wait); the plain simulator
    lets them pass.

Plug-ins
    The core (this module: the access log, barriers, warp clocks, reports) knows no
    memory space. Detectors register with :func:`register` -- shared memory
    (:mod:`workbook.sim.shared_memory`), global memory (:mod:`workbook.sim.global_races`)
    -- and :func:`install` installs them; clients that access memory in ways the
    simulator cannot see element by element, such as the PTX emulation
    (:mod:`workbook.sim.foreign`), look a memory space up with :func:`memory_space` and
    report their accesses to it. No module here imports a detector or a client.

A finding is raised as a :class:`SanitizerError` (:class:`RaceError`,
:class:`UninitializedReadError` or :class:`BarrierError`) in a thread of the
block, so the kernel launch fails with it. A read of never-written shared
memory is reported once the threads that could still write it have passed the
next barrier or exited: until then a write by another thread makes it the data
race that it really is.
"""

from __future__ import annotations

import contextlib
import dis
import linecache
import operator
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbook.sim import warp
from workbook.sim.branches import enclosing_if
from workbook.sim.watchdog import StoppableLock

__all__ = [
    "ENV",
    "BarrierError",
    "Memory",
    "RaceError",
    "SanitizerError",
    "UninitializedReadError",
    "disabled",
    "enable",
    "install",
    "is_enabled",
    "labelled_site",
    "memory_space",
    "race_hint",
    "register",
    "report_undefined",
    "same_instruction",
    "same_statement",
    "student_frame",
]

ENV = "WORKBOOK_SANITIZE"
WARP_SIZE = 32
READ, WRITE, ATOMIC = 0, 1, 2
_WORDS = {READ: "read", WRITE: "write", ATOMIC: "atomic update"}
_BARRIERS = "_workbook_barriers"  # barriers a thread has entered, counted by workbook.sim.warp
BLOCK = "_wb_block"  # attribute of a running thread: its _Block, None without the sanitizer
ATOMIC_SITE = "_wb_atomic_site"  # attribute of a thread running a cuda.atomic.* function
_NO_EXIT = sys.maxsize


class SanitizerError(RuntimeError):
    """A bug the simulator sanitizer found in a kernel."""


class RaceError(SanitizerError):
    """racecheck: two unordered accesses to one element, at least one a write."""


class UninitializedReadError(SanitizerError):
    """initcheck: a read of shared memory that no thread of the block has written, or the
    use of a value that a shuffle read from outside its group."""


class BarrierError(SanitizerError):
    """synccheck: a ``cuda.syncthreads()`` that not all threads of the block reach."""


# ---------------------------------------------------------------------------
# Switch


def _from_env() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


_state = {"enabled": _from_env()}


def enable(on: bool = True) -> None:
    """Turn the sanitizer on or off for the kernel launches that follow."""
    _state["enabled"] = bool(on)


def is_enabled() -> bool:
    """Whether kernel launches are sanitized (``WORKBOOK_SANITIZE``, then :func:`enable`)."""
    return _state["enabled"]


@contextlib.contextmanager
def disabled():
    """Run the enclosed kernel launches without the sanitizer."""
    before = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = before


# ---------------------------------------------------------------------------
# Plug-ins: detectors and clients


@dataclass(frozen=True)
class Plugin:
    """A detector or client of the sanitizer: ``install()`` patches the simulator (it is
    called once by :func:`install`); ``memory`` is the memory space it checks, if any."""

    name: str
    install: Callable[[], None]
    memory: Memory | None = None


_plugins: dict[str, Plugin] = {}


def register(name: str, install_fn: Callable[[], None], memory: Memory | None = None) -> None:
    """Plug a detector into the sanitizer under ``name`` (e.g. ``"shared"``): its
    ``install_fn`` runs when the sanitizer is installed (now, if it already is)."""
    _plugins[name] = Plugin(name, install_fn, memory)
    if _installed():
        install_fn()


def memory_space(name: str) -> Memory | None:
    """The memory space registered under ``name`` (``"shared"``, ``"global"``), if any."""
    plugin = _plugins.get(name)
    return None if plugin is None else plugin.memory


# ---------------------------------------------------------------------------
# Source locations


def _library_dirs() -> tuple[str, ...]:
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).parents[1])}
    return tuple(sorted(d for d in dirs if d))


_LIBRARY = _library_dirs()
_library_file: dict[str, bool] = {}


def _is_library(filename: str) -> bool:
    flag = _library_file.get(filename)
    if flag is None:
        flag = _library_file[filename] = (filename.startswith(_LIBRARY)
                                           or filename.startswith("<frozen"))
    return flag


# Sites (where an access happens) are small ints, indices into _sites of
# ``(code, bytecode offset)`` pairs: cheap to take, store and compare; the line number
# is worked out only for a message.
_sites: list[tuple] = []
_site_ids: dict[int, int] = {}  # id(code) * 2**24 + offset -> site (codes in _sites live on)
_sites_lock = StoppableLock()  # taken by simulated threads, which a stop may end holding it


def site_id(code, offset: int) -> int:
    """The site of the instruction at bytecode ``offset`` of ``code``."""
    key = id(code) * 16777216 + offset
    site = _site_ids.get(key)
    if site is None:
        with _sites_lock:
            site = _site_ids.get(key)
            if site is None:
                _sites.append((code, offset))
                site = _site_ids[key] = len(_sites) - 1
    return site


def student_frame(frame):
    """``frame`` or, if it runs library code (numba's simulator, the workbook, the standard
    library), its first caller that does not: the kernel or device function."""
    while frame is not None and _is_library(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def caller_site(frame):
    """The site (see :func:`site_id`) of ``frame`` or, if ``frame`` runs library code
    (numba's simulator, the workbook, the standard library), of the first caller that
    does not: the kernel or device function that made the call."""
    while frame is not None:
        code = frame.f_code
        flag = _library_file.get(code.co_filename)
        if flag is None:
            flag = _is_library(code.co_filename)
        if not flag:
            site = _site_ids.get(id(code) * 16777216 + frame.f_lasti)
            return site_id(code, frame.f_lasti) if site is None else site
        frame = frame.f_back
    return None


_labelled: dict[tuple[int, str], int] = {}


def labelled_site(site, label: str):
    """``site`` with a note that messages print after it, e.g. which row of an ``ldmatrix``
    a lane read: for accesses that one source line makes many of."""
    if site is None:
        return None
    key = (site, label)
    labelled = _labelled.get(key)
    if labelled is None:
        with _sites_lock:
            labelled = _labelled.get(key)
            if labelled is None:
                _sites.append((*_sites[site][:2], label))
                labelled = _labelled[key] = len(_sites) - 1
    return labelled


def frame_of(site):
    """The frame on the calling thread's stack that runs ``site``'s code, if any."""
    code = None if site is None else _sites[site][0]
    frame = sys._getframe(1)
    while frame is not None and (code is None or frame.f_code is not code):
        frame = frame.f_back
    return frame


def line_of(code, offset: int) -> int:
    """The source line of the instruction at bytecode ``offset`` of ``code``."""
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno


def describe_site(site) -> str:
    """``file:line in function`` and the line's text, for a site from :func:`caller_site`."""
    if site is None:
        return "an unknown line"
    code, offset, *label = _sites[site]
    line = line_of(code, offset)
    text = linecache.getline(code.co_filename, line).strip()
    where = f"{code.co_filename}:{line} in {code.co_name}"
    if label:
        where += f" ({label[0]})"
    return f"{where}\n        {text}" if text else where


def _call_stack(frame) -> tuple:
    """Identity of a call site, device-function calls included: ``((code, offset), ...)``."""
    sites = []
    while frame is not None:
        if not _is_library(frame.f_code.co_filename):
            sites.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(sites)


def _stack_site(stack):
    """The site of the innermost call of a stack from :func:`_call_stack`."""
    return site_id(*stack[0]) if stack else None


# ---------------------------------------------------------------------------
# Blocks


class _Block:
    """Sanitizer state of one thread block: its shared memory and its access log."""

    def __init__(self, manager, index):
        self.lock = StoppableLock()  # for rare events only: see "Access log" below
        self.index = tuple(index)
        dims = tuple(manager._block_dim)
        self.dim = dims + (1,) * (3 - len(dims))
        self.size = int(np.prod(dims))
        self.log: dict[int, tuple] = {}  # shared memory: address -> access record (see below)
        self.intervals: dict[int, dict] = {}  # global memory: epoch -> {address -> record}
        # address (or another key) -> (epoch, report) of the first read of it, never written
        self.pending: dict = {}
        self.clocks: dict[int, np.ndarray] = {}  # warp -> vector clocks of its lanes
        self.shared: dict = {}  # (code, offset) of a cuda.shared.array call -> its array
        self.dynamic = None  # the block's dynamic shared memory (bytes)
        self.barriers: dict[int, tuple] = {}  # k -> (call stack, thread) of the k-th barrier
        self.min_exit = _NO_EXIT  # fewest barriers entered by a thread that returned
        self.exit_tid = -1
        self.finished = 0  # threads that returned or failed
        self.failed = False  # a thread raised: its error is the report

    def where(self) -> str:
        return f"block {self.index}"


def describe_thread(block: _Block, tid: int) -> str:
    bx, by, _ = block.dim
    x, rest = tid % bx, tid // bx
    warp, lane = divmod(tid, WARP_SIZE)
    return f"thread ({x}, {rest % by}, {rest // by}) (warp {warp}, lane {lane})"


_blocks_lock = StoppableLock()


def _block_for(thread) -> _Block:
    manager = thread._manager
    block = manager.__dict__.get(BLOCK)
    if block is None:
        with _blocks_lock:
            block = manager.__dict__.get(BLOCK)
            if block is None:
                block = manager.__dict__[BLOCK] = _Block(manager, thread.blockIdx)
    return block


def current_block():
    """The running simulated thread and its block's state (None without the sanitizer)."""
    thread = threading.current_thread()
    return thread, thread.__dict__.get(BLOCK)


# ---------------------------------------------------------------------------
# Warp synchronisation: vector clocks of the lanes of each warp
#
# Row ``l`` of a warp's matrix is lane ``l``'s clock: entry ``m`` is the last
# tick of lane ``m`` that lane ``l`` is ordered after. A lane's own tick starts
# at 1 and advances at every collective it takes part in; the members of a
# collective learn each other's ticks. Before a warp's first collective the
# matrix is the identity (nobody knows anybody), and is not stored.


def _on_warp_sync(warp, lanes) -> None:
    """Hook called by workbook.sim.warp when the lanes ``lanes`` of ``warp`` complete a
    collective together (``syncwarp``, a shuffle, a vote, a match)."""
    thread = warp.threads.get(lanes[0])
    block = None if thread is None else thread.__dict__.get(BLOCK)
    if block is None:
        return
    clocks = block.clocks.get(warp.index)
    if clocks is None:
        clocks = block.clocks[warp.index] = np.eye(WARP_SIZE, dtype=np.int64)
    rows = list(lanes)
    clocks[rows] = clocks[rows].max(axis=0)
    clocks[rows, rows] += 1


# ---------------------------------------------------------------------------
# Access log
#
# One record per element touched in the block (for global memory, in the current
# barrier interval only: initcheck needs the history of shared memory alone), a tuple
#   (writer thread, writer epoch, writer tick, writer site, writer kind,
#    epoch of the reads, reads, writer's own read site)
# with writer _NOBODY when nobody wrote the element, and reads None, one reader
# packed into an int (see _reader), or {thread: packed reader} when several threads
# read it. The writer's own read site is where the writer read the element before it
# wrote it (a read-modify-write), or None: kept apart from the reads, which the
# writer's later reads of the element replace. Sites are ints too: a record is a tuple
# of plain ints, which the garbage collector stops tracking at its first pass (tuples
# holding other tuples, and dicts, would stay tracked, and every collection would walk
# all the records again).
#
# An epoch is the number of cuda.syncthreads() a thread has entered: the threads
# that run at one time all have the same epoch, and an access of an earlier epoch is
# ordered before every access of a later one (synccheck makes sure every thread takes part in
# every barrier). Within an epoch, lanes of one warp are ordered by their clocks.
#
# The log takes no lock (a lock held by a thread that the GIL preempts stalls all
# the others): records are immutable and replaced whole, and dict operations are
# atomic under the GIL. A record that another thread replaces while this one
# checks it is still a record of real accesses, so the checks never report a
# race that did not happen; in rare interleavings they can miss one. An element
# whose write was missed that way holds a written value, not the poison, and
# initcheck looks at the value before it reports anything.

_NOBODY, _UNSEEN = -1, -2  # writers: nobody wrote it; code the sanitizer does not see did


class Memory:
    """A memory space as the access log sees it (see shared_memory and global_races)."""

    space = "memory"
    initcheck = False  # whether reads of never-written elements are reported

    def describe(self, array, index, site) -> tuple[str, str]:
        """``(expression, note)`` for messages, e.g. ``("partial[3]", " (declared ...)")``."""
        return f"array[{index}]", ""

    def untouched(self, array, index) -> bool:
        """Whether ``array[index]`` still holds its poison value (for initcheck)."""
        return False


def element_offset(shape, strides, index):
    """Byte offset of element ``index`` of an array, or None if ``index`` does not name
    one element (a slice, an array of indices). Negative indices count from the end."""
    if isinstance(index, tuple):
        if len(index) != len(shape):
            return None
        offset = 0
        for i, n, stride in zip(index, shape, strides):
            try:
                i = operator.index(i)
            except TypeError:
                return None
            offset += (i + n if i < 0 else i) * stride
        return offset
    if len(shape) != 1:
        return None
    try:
        i = operator.index(index)
    except TypeError:
        return None
    return (i + shape[0] if i < 0 else i) * strides[0]


def access(thread, block: _Block, address: int, kind: int, site, memory: Memory, array,
           index) -> None:
    """Check and log one access of ``thread`` to the element ``array[index]``, which is
    at ``address``; ``site`` is where the access is (see :func:`caller_site`)."""
    state = thread.__dict__
    atomic_site = state.get(ATOMIC_SITE)
    if atomic_site is not None:
        kind, site = ATOMIC, atomic_site
    epoch = state.get(_BARRIERS, 0)
    tid = thread.thread_id
    clocks = block.clocks.get(tid >> 5) if block.clocks else None
    tick = 1 if clocks is None else int(clocks[tid & 31, tid & 31])
    if memory.initcheck:
        log = block.log
    else:  # global memory: only accesses of this barrier interval matter
        log = block.intervals.get(epoch)
        if log is None:
            log = block.intervals.setdefault(epoch, {})
    record = log.get(address)
    if record is None:
        record = log.setdefault(address, (_NOBODY, -1, 0, None, READ, epoch, None, None))
    writer = record[0]
    if writer == _NOBODY and kind != WRITE and memory.initcheck:
        if not memory.untouched(array, index):  # code the log does not see wrote it
            record = log[address] = (_UNSEEN, -1, 0, None, READ) + record[5:]
        elif address not in block.pending:
            expr, note = memory.describe(array, index, site)
            block.pending.setdefault(address, (epoch, _initcheck_text(
                block, tid, kind, site, expr, note)))
    if (writer >= 0 and writer != tid and record[1] == epoch
            and not (kind == ATOMIC and record[4] == ATOMIC)
            and not _ordered(clocks, tid, writer, record[2])):
        own = _my_read(state, record, epoch, address, tid) if kind == WRITE else None
        _race(block, (memory, array, index),
              (writer, record[4], record[3], record[7]),
              (tid, kind, site, own))
    if kind == READ:
        state[_LAST_READ] = (address, epoch, site)
        mine = tid | tick << 12 | (-1 if site is None else site) << 44  # see _reader
        reads = record[6] if record[5] == epoch else None
        if reads is None or (type(reads) is int and reads & 0xFFF == tid):
            log[address] = record[:5] + (epoch, mine) + record[7:]
        elif type(reads) is int:
            log[address] = record[:6] + ({reads & 0xFFF: reads, tid: mine},) + record[7:]
        else:
            reads[tid] = mine
        return
    reads = record[6] if record[5] == epoch else None
    mine = None  # this thread's own read of the element in this interval, if any
    if reads is not None:
        for packed in (reads,) if type(reads) is int else list(reads.values()):
            reader, their_tick, their_site = _reader(packed)
            if reader == tid:
                mine = packed
            elif not _ordered(clocks, tid, reader, their_tick):
                own = _my_read(state, record, epoch, address, tid) if kind == WRITE else None
                _race(block, (memory, array, index), (reader, READ, their_site, None),
                      (tid, kind, site, own))
    if kind != WRITE:
        mine = None
    elif mine is None:
        last = state.get(_LAST_READ)
        if last is not None and last[0] == address and last[1] == epoch:
            mine = tid | tick << 12 | (-1 if last[2] is None else last[2]) << 44
        elif writer == tid and record[1] == epoch and record[4] == ATOMIC:
            mine = tid | tick << 12 | (-1 if record[3] is None else record[3]) << 44  # atomic
    # a plain write keeps the writer's own read (or atomic access) of the element in this
    # interval: a read-modify-write, which race hints tell apart (see race_hint)
    log[address] = (tid, epoch, tick, site, kind, epoch, mine,
                    None if mine is None else _reader(mine)[2])


_LAST_READ = "_wb_last_read"  # attribute of a thread: (address, epoch, site) of its last read


def _my_read(state, record, epoch: int, address: int, tid: int):
    """The site of the running thread's read of ``address`` in this interval before its
    write: its last read (kept on the thread: the lock-free log can lose a read), else the
    one in ``record``."""
    last = state.get(_LAST_READ)
    if last is not None and last[0] == address and last[1] == epoch:
        return last[2]
    return _own_read(record, epoch, tid)


def _own_read(record, epoch: int, tid: int):
    """The site of thread ``tid``'s latest read of the element of ``record`` in this interval,
    or None: for a thread about to write the element, the read of its read-modify-write
    (``a[i] += 1``)."""
    reads = record[6] if record[5] == epoch else None
    packed = reads if type(reads) is int else None if reads is None else reads.get(tid)
    if packed is None or packed & 0xFFF != tid:
        return None
    return _reader(packed)[2]


def _reader(packed: int) -> tuple:
    """``(thread, tick, site)`` of a read packed into one int: thread in the low 12 bits,
    tick in the next 32, site above (-1: unknown)."""
    site = packed >> 44
    return packed & 0xFFF, packed >> 12 & 0xFFFFFFFF, None if site < 0 else site


def _ordered(clocks, tid: int, other: int, tick: int) -> bool:
    """Whether the access of thread ``other`` at ``tick`` is ordered before ``tid``'s now:
    they are lanes of one warp, and a collective since then tells ``tid`` so."""
    if clocks is None or other >> 5 != tid >> 5:
        return False
    return clocks[tid & 31, other & 31] >= tick


# ---------------------------------------------------------------------------
# Reports


def _race(block, target, first, second) -> None:
    """Raise a :class:`RaceError` for two unordered accesses, each ``(thread, kind, site,
    own read site)``; its hint follows from the kind of race (see :func:`race_hint`)."""
    if block.failed:
        return
    memory, array, index = target
    (tid_a, kind_a, site_a, _), (tid_b, kind_b, site_b, _) = first, second
    expr, note = memory.describe(array, index, site_b)
    one_warp = tid_a >> 5 == tid_b >> 5
    if one_warp:
        order = "no cuda.syncthreads(), cuda.syncwarp() or warp collective that both took part in"
    else:
        order = "no cuda.syncthreads()"
    raise RaceError(
        f"racecheck: data race on {memory.space} {expr}{note} in {block.where()}:\n"
        f"  {_WORDS[kind_a]} by {describe_thread(block, tid_a)} at {describe_site(site_a)}\n"
        f"  {_WORDS[kind_b]} by {describe_thread(block, tid_b)} at {describe_site(site_b)}\n"
        f"  with {order} between them: {race_hint(expr, first, second, one_warp)}"
    )


def same_instruction(site_a, site_b) -> bool:
    """Whether two sites (see :func:`caller_site`) are one instruction of the source."""
    if site_a is None or site_b is None:
        return False
    (code_a, offset_a, *_), (code_b, offset_b, *_) = _sites[site_a], _sites[site_b]
    return code_a is code_b and _instruction(code_a, offset_a) == _instruction(code_b, offset_b)


_CACHE = dis.opmap.get("CACHE", -1)


def _instruction(code, offset: int) -> int:
    """The offset of the instruction that bytecode ``offset`` belongs to: a frame's last
    offset points into an instruction's inline caches once the interpreter has specialised
    it (``a[i]`` read through a Python ``__getitem__``: BINARY_SUBSCR, then its caches)."""
    raw = code.co_code
    while offset > 0 and offset < len(raw) and raw[offset] == _CACHE:
        offset -= 2
    return offset


def same_statement(first, second) -> bool:
    """Whether two accesses ``(thread, kind, site, own read site)`` are the same statement
    run by two threads: the same instruction, or one of them the read with which the other
    thread began its read-modify-write (``a[i] += 1``, ``old = a[i]; a[i] = f(old)``)."""
    sites_a = [s for s in first[2:] if s is not None]
    sites_b = [s for s in second[2:] if s is not None]
    return any(same_instruction(a, b) for a in sites_a for b in sites_b)


def _same_line(site_a, site_b) -> bool:
    if site_a is None or site_b is None:
        return False
    (code_a, offset_a, *_), (code_b, offset_b, *_) = _sites[site_a], _sites[site_b]
    return code_a is code_b and line_of(code_a, offset_a) == line_of(code_b, offset_b)


def race_hint(expr: str, first, second, one_warp: bool = False) -> str:
    """What fixes a race between two threads of one block, from its kind. ``first`` and
    ``second`` are ``(thread, kind, site, own read site)``; the own read site is where a
    writer read the element before writing it (None if it did not).

    * A plain read-modify-write of an element that another thread updates atomically, or
      many threads running one statement on one element (the same store, or the same
      read-modify-write): no barrier separates them, an atomic does (a flag that every
      thread sets to the same value is benign in practice, and the hint says so).
    * Otherwise a write and a read (or two writes) in different statements of one barrier
      interval: a ``cuda.syncthreads()`` between them orders them.
    """
    kinds = {first[1], second[1]}
    rmw = any(access[1] == WRITE and access[3] is not None for access in (first, second))
    if ATOMIC in kinds and rmw:
        return (f"{expr} is updated atomically by one thread, and read then written back "
                "with a plain store by the other: an atomic operation is atomic only with "
                "respect to other atomics, so the plain store can undo an atomic update. A "
                "barrier does not fix this: make the update atomic too (cuda.atomic.min / "
                "max / add, or cuda.atomic.cas).")
    if same_statement(first, second):
        if rmw:
            return (f"both threads run the same read-modify-write of {expr} (read, then "
                    "write back), and one update can overwrite the other. A barrier cannot "
                    "order threads that run one statement together: make the update one "
                    "atomic operation (cuda.atomic.add for +=, cuda.atomic.min / max, "
                    "cuda.atomic.cas to claim a slot).")
        return (f"both threads store to {expr} in the same statement. If every thread stores "
                "the same value on purpose (a flag such as changed[0] = 1), the result is "
                "right on a GPU in practice, though the CUDA memory model still calls it a "
                "race: cuda.atomic.max(changed, 0, 1) says what is meant. If the values "
                "differ, whichever store lands last wins: use an atomic (cuda.atomic.min, "
                "max or exch), or let one thread store. No barrier helps here.")
    warp = (" (the two threads are lanes of one warp: cuda.syncwarp() also orders them)"
            if one_warp else "")
    if ATOMIC in kinds:
        return (f"missing cuda.syncthreads()?{warp} An atomic and a plain access of one "
                "element are not ordered: if the plain access belongs to another step "
                "(setting the element up, or reading the final value), put a "
                "cuda.syncthreads() between the steps; if it belongs to the same step, make "
                "it atomic too.")
    if READ in kinds:
        what = ("The write and the read can come in either order: put a cuda.syncthreads() "
                "between the two statements (in a loop, also before the next step overwrites "
                "what this step reads).")
    else:
        what = ("The two writes can land in either order: a cuda.syncthreads() between the "
                "two statements orders them.")
    hint = f"missing cuda.syncthreads()?{warp} {what}"
    if _same_line(first[2], second[2]):
        hint += (" If both belong to one step, no two threads of a step may touch one "
                 "element: check the index and the bound.")
    return hint


def _initcheck_text(block, tid, kind, site, expr, note) -> str:
    return (
        f"initcheck: read of uninitialised shared memory {expr}{note} in {block.where()}:\n"
        f"  {_WORDS[kind]} by {describe_thread(block, tid)} at {describe_site(site)}\n"
        f"  No thread of this block wrote {expr} before this read. Shared memory starts out "
        "undefined in every block (the simulator fills it with NaN, or 0x7FADBEEF bytes for "
        "integers): write it first, with a cuda.syncthreads() between the write and the "
        "reads by other threads."
    )


def report_undefined(thread, key, report: str) -> bool:
    """Report a read of an undefined value by ``thread`` (not of memory: a shuffle's, say)
    as initcheck reports a read of never-written shared memory: once the block's threads
    have passed the next barrier or exited. ``key`` tells reads apart (one report per key);
    ``report`` is the message. Returns whether the thread runs in a sanitized launch."""
    block = thread.__dict__.get(BLOCK)
    if block is None:
        return False
    block.pending.setdefault(key, (thread.__dict__.get(_BARRIERS, 0), report))
    return True


def _uninitialised(block, before: int = _NO_EXIT):
    """The first read of an undefined value (never-written shared memory, or a shuffle's
    from a lane outside its group) made before barrier ``before``, as an exception (None if
    there is none)."""
    first = next((read for read in list(block.pending.values()) if read[0] < before), None)
    if first is None:
        return None
    return UninitializedReadError(first[1])


def _barrier_error(block, message: str) -> None:
    if not block.failed:
        raise BarrierError(f"synccheck: {message}")


def _check_pending(block, k: int) -> None:
    """After barrier ``k``: every thread has left the interval before it, so a read there of
    shared memory that nobody wrote is final."""
    if block.pending and not block.failed:
        error = _uninitialised(block, before=k)
        if error is not None:
            raise error


def _check_exits(block, thread, k: int, stack) -> None:
    if block.min_exit < k:
        _barrier_error(
            block,
            f"{describe_thread(block, block.exit_tid)} of {block.where()} returned after "
            f"{block.min_exit} cuda.syncthreads() call(s), while "
            f"{describe_thread(block, thread.thread_id)} waits at cuda.syncthreads() number "
            f"{k}, at {describe_site(_stack_site(stack))}\n" + _skipped_barrier_advice(stack),
        )


def _skipped_barrier_advice(stack) -> str:
    """Why a thread can end without a barrier others wait at: the barrier sits in a branch
    it did not take, or (no branch around it) the thread returned early."""
    code, offset = stack[0] if stack else (None, 0)
    branch = code and enclosing_if(code.co_filename, line_of(code, offset))
    if branch:
        return (f"  This cuda.syncthreads() is inside `{branch[1]}` (line {branch[0]}): threads "
                "that do not take that branch never reach it. Move the barrier out of the "
                "branch (keep only the work under the if), so that every thread of the block "
                "reaches it; on a GPU a barrier that only some threads reach is undefined "
                "behaviour (a hang, or a barrier that does not wait).")
    return ("  Every thread of a block that has not exited must reach every "
            "cuda.syncthreads(); on a GPU an early return before a barrier is undefined "
            "behaviour (a hang, or a barrier that does not wait). Instead of returning early, "
            "put the work under an if, and let every thread reach the barrier.")


def _check_same_barrier(block, thread, first, stack) -> None:
    if first[0] != stack:
        _barrier_error(
            block,
            f"divergent cuda.syncthreads() in {block.where()}: "
            f"{describe_thread(block, first[1])} waits at "
            f"{describe_site(_stack_site(first[0]))}\n"
            f"  while {describe_thread(block, thread.thread_id)} waits at "
            f"{describe_site(_stack_site(stack))}\n"
            "  All threads of a block must reach the same cuda.syncthreads(); a barrier "
            "inside a branch that only some threads take is undefined behaviour on a GPU.",
        )


# ---------------------------------------------------------------------------
# Threads: start, barriers, exit


def _finish(block, thread) -> None:
    """Book-keeping when a thread of the block returns or fails."""
    with block.lock:
        block.finished += 1
        if thread.exception is not None:
            error, _tb = thread.exception
            if block.pending and not block.failed and not isinstance(error, SanitizerError):
                # The kernel failed after reading never-written shared memory, likely
                # because of it: report that read first.
                report = _uninitialised(block)
                thread.exception = (type(report)(f"{report}\n  (afterwards {error})"), None)
            block.failed = True
            return
        count = thread.__dict__.get(_BARRIERS, 0)
        if count < block.min_exit:
            block.min_exit, block.exit_tid = count, thread.thread_id
        if block.finished == block.size and block.pending and not block.failed:
            block.failed = True
            thread.exception = (_uninitialised(block), None)


def _wrap_thread(block_thread) -> None:
    run, syncthreads = block_thread.run, block_thread.syncthreads

    def sanitized_run(self):
        block = _block_for(self) if _state["enabled"] else None
        self.__dict__[BLOCK] = block
        try:
            run(self)
        finally:
            if block is not None:
                _finish(block, self)

    def sanitized_syncthreads(self):
        block = self.__dict__.get(BLOCK)
        if block is None:
            return syncthreads(self)
        k = self.__dict__.get(_BARRIERS, 0) + 1
        stack = _call_stack(sys._getframe(1))
        first = block.barriers.setdefault(k, (stack, self.thread_id))  # atomic: no lock
        block.barriers.pop(k - 2, None)
        _check_same_barrier(block, self, first, stack)
        _check_exits(block, self, k, stack)
        syncthreads(self)
        for epoch in list(block.intervals):  # every thread has left these intervals
            if epoch < k:
                block.intervals.pop(epoch, None)
        _check_pending(block, k)
        _check_exits(block, self, k, stack)

    block_thread.run = sanitized_run
    block_thread.syncthreads = sanitized_syncthreads


def _wrap_atomics(atomic_class) -> None:
    def wrap(fn):
        def atomic(self, *args, **kwargs):
            thread = threading.current_thread()
            if thread.__dict__.get(BLOCK) is None:
                return fn(self, *args, **kwargs)
            thread.__dict__[ATOMIC_SITE] = caller_site(sys._getframe(1))
            try:
                return fn(self, *args, **kwargs)
            finally:
                thread.__dict__[ATOMIC_SITE] = None

        atomic.__name__, atomic.__doc__ = fn.__name__, fn.__doc__
        return atomic

    for name, fn in list(vars(atomic_class).items()):
        if callable(fn) and not name.startswith("__"):
            setattr(atomic_class, name, wrap(fn))


_INSTALLED = "_workbook_sanitizer_installed"


def install() -> None:
    """Attach the sanitizer to the simulator (idempotent); installs the warp intrinsics
    (:mod:`workbook.sim.warp`) first, whose barrier counts it uses, then every detector
    registered with :func:`register`."""
    from numba.cuda.simulator import kernel, kernelapi

    if getattr(kernel.BlockThread, _INSTALLED, False):
        return
    warp.install()
    _wrap_thread(kernel.BlockThread)
    _wrap_atomics(kernelapi.FakeCUDAAtomic)
    warp.add_sync_hook(_on_warp_sync)
    setattr(kernel.BlockThread, _INSTALLED, True)
    _state["installed"] = True
    for plugin in list(_plugins.values()):
        plugin.install()


def _installed() -> bool:
    return _state.get("installed", False)
