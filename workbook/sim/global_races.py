"""Global memory for the simulator sanitizer: races within a block, and between blocks.

Every element access to a device array inside a kernel goes through the
sanitizer's access log (:func:`workbook.sim.sanitizer.access`), so two threads
of one block that touch one element of global memory with nothing ordering
them (a missing ``cuda.syncthreads()``) are reported, as in shared memory.

Between blocks: the simulator runs one block after another, so a kernel whose
blocks update the same output element without an atomic still gets the right
answer there -- and a wrong, varying one on a GPU, where blocks run
concurrently. ``watch(array)`` marks a device array; during each launch every
access to it is logged by (block, thread), and an element written without an
atomic by one block and touched by another block of the same launch raises
:class:`GlobalRaceError`. Atomic operations (``cuda.atomic.*``) are never races
with each other. (Only watched arrays are checked across blocks: a kernel may
legitimately hand data from block to block with fences and flags.) No barrier orders
blocks, so the report suggests an atomic (for updates) or a second kernel launch (for a
block that reads what another writes).
"""

from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from workbook.sim import sanitizer
from workbook.sim.sanitizer import ATOMIC, READ, WRITE, RaceError

_launches = itertools.count()
_current_launch = [0]
_installed = False


class GlobalRaceError(RaceError):
    """Two blocks of one launch conflict on a global-memory element."""


class AccessLog:
    """Per-element record of which blocks touched a watched array in the current launch.

    Like the sanitizer's access log it takes no lock (see workbook.sim.sanitizer): dict
    operations are atomic under the GIL, and a lost update can only hide a race.
    """

    def __init__(self, name: str):
        self.name = name
        # element -> block -> (thread, kind, site, site of the block's read before its write)
        self.by_block: dict[int, dict[tuple, tuple]] = {}
        self.launch = -1

    def record(self, index: int, kind: str, block: tuple, thread: tuple, site=None) -> None:
        """Log one access; ``kind`` is "read", "write" or "atomic"; ``site`` is where it is
        (see :func:`workbook.sim.sanitizer.caller_site`)."""
        if self.launch != _current_launch[0]:
            self.by_block = {}  # before the launch number: no thread logs into a stale dict
            self.launch = _current_launch[0]
        blocks = self.by_block.get(index)
        if blocks is None:
            blocks = self.by_block.setdefault(index, {})
        for other, entry in list(blocks.items()):
            if other != block and _conflict(entry[1], kind):
                self._race(index, (other, *entry), (block, thread, kind, site, None))
        previous = blocks.get(block)
        if previous is None or previous[1] == "read":
            read_site = previous[2] if previous is not None and kind == "write" else None
            blocks[block] = (thread, kind, site, read_site)

    def _race(self, index, first, second):
        """``first`` and ``second``: ``(block, thread, kind, site, read site)``."""
        (block_a, thread_a, kind_a, *_), (block_b, thread_b, kind_b, *_) = first, second
        raise GlobalRaceError(
            f"racecheck: data race on {self.name}[{index}] between blocks: {_WORDS[kind_a]} by "
            f"block {block_a} thread {thread_a}, and {_WORDS[kind_b]} by block {block_b} thread "
            f"{thread_b} in the same launch. Blocks run concurrently and in any order on a GPU, "
            "and no barrier can help: cuda.syncthreads() orders the threads of one block only. "
            + _between_blocks_hint(first, second)
        )


def _between_blocks_hint(first, second) -> str:
    """What fixes a race between blocks, from its kind (see the module's docstring)."""
    kinds = {first[2], second[2]}
    same = sanitizer.same_statement(first[1:], second[1:])
    if kinds == {"read", "write"} and not same:
        return ("A block may read before or after another block writes: read in a second "
                "kernel launch (a launch ends when all its blocks have, so the next one sees "
                "every write), or read a copy that no block writes (two buffers, swapped "
                "between launches).")
    return ("Combine results across blocks with cuda.atomic.* (cuda.atomic.add for +=, "
            "min / max), or give each block its own element and combine them in a second "
            "kernel launch.")


_WORDS = {"read": "read", "write": "written without an atomic", "atomic": "updated atomically"}
_KIND_NAMES = {READ: "read", WRITE: "write", ATOMIC: "atomic"}


def _conflict(kind_a: str, kind_b: str) -> bool:
    """Two accesses from different blocks race unless both are reads or both atomics."""
    if kind_a == kind_b:
        return kind_a == "write"
    return "write" in (kind_a, kind_b) or "read" in (kind_a, kind_b)


def watch(device_array, name: str = "output"):
    """Check accesses to ``device_array`` across blocks in later launches; returns the array."""
    device_array.__dict__["_wb_log"] = AccessLog(name)
    return device_array


# ---------------------------------------------------------------------------
# Access hooks


class _Global(sanitizer.Memory):
    space = "global memory"

    def describe(self, array, index, site):
        item = array.__dict__["_item"]
        frame = sanitizer.frame_of(site)
        names = [] if frame is None else [n for n, v in frame.f_locals.items() if v is array]
        log = item.__dict__.get("_wb_log")
        name = (names or [log.name if log else "array"])[0]
        text = ", ".join(str(_normal(i, n)) for i, n in zip(_as_tuple(index), item._ary.shape))
        return f"{name}[{text}]", ""


GLOBAL = _Global()


def _layout(item):
    """``(address, shape, strides, step)`` of a simulated device array, cached on it;
    ``step`` is the stride of a 1-D array, else None."""
    layout = item.__dict__.get("_wb_layout")
    if layout is None:
        ary = item.__dict__["_ary"]
        step = ary.strides[0] if ary.ndim == 1 else None
        layout = (ary.__array_interface__["data"][0], ary.shape, ary.strides, step)
        item.__dict__["_wb_layout"] = layout
    return layout


def _log(wrapper, thread, block, index, kind, site) -> None:
    item = wrapper.__dict__["_item"]
    address, shape, strides, step = _layout(item)
    if step is not None and type(index) is int:
        offset = step * (index if index >= 0 else index + shape[0])
    else:
        offset = sanitizer.element_offset(shape, strides, index)
        if offset is None:  # a slice assignment: every element it writes
            for position in _positions(shape, index):
                _log(wrapper, thread, block, position, kind, site)
            return
    sanitizer.access(thread, block, address + offset, kind, site, GLOBAL, wrapper, index)
    log = item.__dict__.get("_wb_log")
    if log is not None:
        if thread.__dict__.get(sanitizer.ATOMIC_SITE) is not None:
            kind = ATOMIC
        flat = sum(_normal(i, n) * s for i, n, s in zip(_as_tuple(index), shape,
                                                         _c_steps(shape)))
        log.record(flat, _KIND_NAMES[kind], tuple(thread.blockIdx), tuple(thread.threadIdx),
                   thread.__dict__.get(sanitizer.ATOMIC_SITE) or site)


def _as_tuple(index):
    return index if isinstance(index, tuple) else (index,)


def _normal(i, n) -> int:
    i = int(i)
    return i + n if i < 0 else i


def _c_steps(shape) -> list[int]:
    steps, step = [], 1
    for n in reversed(shape):
        steps.append(step)
        step *= n
    return steps[::-1]


def _positions(shape, index):
    grid = np.arange(int(np.prod(shape))).reshape(shape)[index]
    return [tuple(int(i) for i in np.unravel_index(flat, shape)) if len(shape) > 1 else int(flat)
            for flat in np.ravel(grid).tolist()]


def install() -> None:
    """Patch the simulator's in-kernel arrays and launches (idempotent)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray as Wrapped

    get, put = Wrapped.__getitem__, Wrapped.__setitem__

    current_thread, caller_site, getframe = threading.current_thread, sanitizer.caller_site, \
        sys._getframe
    access, block_attr = sanitizer.access, sanitizer.BLOCK

    def getitem(self, idx):
        value = get(self, idx)
        thread = current_thread()
        block = thread.__dict__.get(block_attr)
        if block is not None and not isinstance(value, Wrapped):
            item = self.__dict__["_item"]
            layout = item.__dict__.get("_wb_layout") or _layout(item)
            if type(idx) is int and layout[3] is not None and "_wb_log" not in item.__dict__:
                # the common case, made fast: a 1-D array, not watched across blocks
                address = layout[0] + layout[3] * (idx if idx >= 0 else idx + layout[1][0])
                access(thread, block, address, READ, caller_site(getframe(1)), GLOBAL, self, idx)
            else:
                _log(self, thread, block, idx, READ, caller_site(getframe(1)))
        return value

    def setitem(self, idx, val):
        put(self, idx, val)
        thread = current_thread()
        block = thread.__dict__.get(block_attr)
        if block is not None:
            _log(self, thread, block, idx, WRITE, caller_site(getframe(1)))

    Wrapped.__getitem__, Wrapped.__setitem__ = getitem, setitem

    push = sim_kernel._push_kernel_context

    def push_and_count(mod):
        _current_launch[0] = next(_launches) + 1
        return push(mod)

    sim_kernel._push_kernel_context = push_and_count
    _installed = True


sanitizer.register("global", install, GLOBAL)
