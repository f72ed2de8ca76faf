"""Shared memory for the simulator sanitizer: fresh and poisoned in every block, and logged.

numba-cuda's simulator keys ``cuda.shared.array`` by source line, once per
launch: block 1 sees the values block 0 left, and two arrays declared on one
line are one array. With the sanitizer on, every block gets its own shared
memory, each ``cuda.shared.array`` call (not line) its own array, and dynamic
shared memory (``shape`` 0, sized by the launch's fourth parameter) one buffer
per block that all its shape-0 arrays view. New shared memory holds a poison
value (:func:`poison`): NaN for floating-point types, ``0x7FADBEEF`` cut or
repeated to the element size for others (``0xBEEF`` in a uint16); dynamic shared
memory holds the bytes of ``0x7FADBEEF`` repeated (NaN as float32).

The arrays are :class:`SharedArray`, a numpy ``ndarray`` subclass, so ``len``,
``.shape``, ``.size``, ``.dtype`` and arithmetic on elements behave as before;
reading or writing an element goes through the sanitizer's access log
(:func:`workbook.sim.sanitizer.access`).
"""

from __future__ import annotations

import linecache
import operator
import re
import sys
import threading

import numpy as np
from numba.cuda import types
from numba.cuda.np import numpy_support

from workbook.sim import array_shapes, sanitizer
from workbook.sim.sanitizer import BLOCK, READ, WRITE, access, caller_site

_current_thread = threading.current_thread

POISON_WORD = 0x7FADBEEF
_POISON_BYTES = POISON_WORD.to_bytes(4, "little")
_nd_getitem, _nd_setitem = np.ndarray.__getitem__, np.ndarray.__setitem__


def _element_poison(itemsize: int) -> bytes:
    """``0x7FADBEEF`` as bytes, cut or repeated to one element: ``0xBEEF`` in 2 bytes."""
    return (_POISON_BYTES * (itemsize // 4 + 1))[:itemsize]


def poison(array: np.ndarray) -> np.ndarray:
    """Fill ``array`` with the poison value of its dtype; return it. NaN for floating-point
    (and complex) types; for others, every element holds the bytes of ``0x7FADBEEF``, cut
    or repeated to its size (``0x7FADBEEF`` in int32, ``0xBEEF`` in uint16,
    ``0x7FADBEEF7FADBEEF`` in int64)."""
    if array.dtype.kind in "fc":
        array.fill(np.nan)
    elif array.nbytes:
        rows = array.reshape(-1).view(np.uint8).reshape(array.size, array.dtype.itemsize)
        rows[:] = np.frombuffer(_element_poison(array.dtype.itemsize), np.uint8)
    return array


def _poison_bytes(nbytes: int) -> np.ndarray:
    """Dynamic shared memory: bytes of ``0x7FADBEEF`` repeated, which reads as NaN in a
    float32 view and as ``0x7FADBEEF`` in an int32 view."""
    return np.resize(np.frombuffer(_POISON_BYTES, np.uint8), nbytes)


def _untouched(array, offset: int, value) -> bool:
    """Whether the element at byte ``offset`` of ``array`` (read as ``value``) still holds
    the poison value, i.e. no code wrote it (not even code the log does not see)."""
    address, _step, _length, (first, _end), decl = array._wb
    raw = np.asarray(value).tobytes()
    if decl.get("dynamic"):
        phase = (address + offset - first) % 4
        return raw == (_POISON_BYTES * (len(raw) // 4 + 2))[phase:phase + len(raw)]
    if array.dtype.kind in "fc":
        return bool(np.isnan(value))
    return raw == _element_poison(len(raw))


class _Shared(sanitizer.Memory):
    space = "shared memory"
    initcheck = True

    def describe(self, array, index, site):
        decl = array._wb[4]
        frame = sanitizer.frame_of(site)
        names = [] if frame is None else [n for n, v in frame.f_locals.items() if v is array]
        name = (names or [decl.get("name") or "shared array"])[0]
        where = decl.get("site")
        declared = f" (cuda.shared.array declared at {_short(where)})" if where else ""
        return f"{name}[{_index_text(index)}]", declared

    def untouched(self, array, index):
        offset = sanitizer.element_offset(array.shape, array.strides, index)
        return _untouched(array, offset, _nd_getitem(array, index))

    def access_bytes(self, thread, host: int, nbytes: int, kind: int, site) -> None:
        """Check and log an access of ``thread`` to the ``nbytes`` bytes of shared memory at
        host address ``host``, made by code the log does not see element by element (the
        PTX emulation): one access per element of the shared array that they overlap."""
        block = thread.__dict__.get(BLOCK)
        array = None if block is None else _array_at(block, host)
        if array is None:
            return
        first, itemsize = array._wb[3][0], array.itemsize
        stop = -(-(host + nbytes - first) // itemsize)
        for flat in range((host - first) // itemsize, stop):
            index = np.unravel_index(flat, array.shape) if array.ndim > 1 else (flat,)
            index = tuple(int(i) for i in index) if array.ndim > 1 else flat
            access(thread, block, first + flat * itemsize, kind, site, SHARED, array, index)


SHARED = _Shared()


class SharedArray(np.ndarray):
    """A shared-memory array of one block; element accesses are checked by the sanitizer.

    ``_wb`` is None for an ordinary array (a copy, an arithmetic result), else
    ``(address, step, length, span, declaration)``: the address of the first
    element, the stride and length of a 1-D array (else None), the addresses
    ``(first, end)`` of the block's allocation that the array lies in, and a dict
    describing that allocation for messages.
    """

    _wb = None

    def __array_finalize__(self, obj):
        parent = getattr(obj, "_wb", None)
        if parent is None:
            self._wb = None
            return
        span, decl = parent[3], parent[4]
        address = self.__array_interface__["data"][0]
        if not span[0] <= address < span[1] and self.size:
            self._wb = None  # new memory (a copy, an arithmetic result), not shared memory
            return
        _set_layout(self, address, span, decl)

    def __getitem__(self, index):
        value = _nd_getitem(self, index)
        wb = self._wb
        if wb is not None:
            thread = _current_thread()
            block = thread.__dict__.get(BLOCK)
            if block is not None:
                if type(index) is int and wb[1] is not None:  # the common case, made fast
                    address = wb[0] + wb[1] * (index if index >= 0 else index + wb[2])
                    access(thread, block, address, READ, caller_site(sys._getframe(1)),
                           SHARED, self, index)
                elif not isinstance(value, np.ndarray):
                    _log(self, thread, block, index, READ)
                elif value._wb is None:  # advanced indexing copies: reads them all
                    _log_many(self, thread, block, index, READ)
        return value

    def __setitem__(self, index, value):
        _nd_setitem(self, index, value)
        wb = self._wb
        if wb is not None:
            thread = _current_thread()
            block = thread.__dict__.get(BLOCK)
            if block is not None:
                if type(index) is int and wb[1] is not None:
                    address = wb[0] + wb[1] * (index if index >= 0 else index + wb[2])
                    access(thread, block, address, WRITE, caller_site(sys._getframe(1)),
                           SHARED, self, index)
                else:
                    _log(self, thread, block, index, WRITE)


def _array_at(block, host: int):
    """The shared array (a whole allocation) of ``block`` that holds host address ``host``."""
    arrays = list(block.shared.values())
    if block.dynamic is not None:
        arrays.append(block.dynamic)
    for array in arrays:
        first, end = array._wb[3]
        if first <= host < end:
            return array
    return None


def _set_layout(array, address: int, span, decl) -> None:
    one_d = array.ndim == 1
    array._wb = (address, array.strides[0] if one_d else None,
                 array.shape[0] if one_d else None, span, decl)


def _log(array, thread, block, index, kind):
    offset = sanitizer.element_offset(array.shape, array.strides, index)
    if offset is None:
        _log_many(array, thread, block, index, kind)
        return
    access(thread, block, array._wb[0] + offset, kind, caller_site(sys._getframe(1)),
           SHARED, array, index)


def _log_many(array, thread, block, index, kind):
    """Slices and advanced indexing: log every element the index selects."""
    site = caller_site(sys._getframe(1))
    offsets = np.zeros(array.shape, dtype=np.int64)
    for axis, stride in enumerate(array.strides):
        shape = [1] * array.ndim
        shape[axis] = array.shape[axis]
        offsets = offsets + np.arange(array.shape[axis]).reshape(shape) * stride
    flat = np.ravel(offsets[index]) if array.ndim else offsets.reshape(1)
    for offset in flat.tolist():
        position = np.unravel_index(_position(array, offset), array.shape) if array.ndim else ()
        position = tuple(int(i) for i in position)
        access(thread, block, array._wb[0] + offset, kind, site, SHARED, array, position)


def _position(array, offset: int) -> int:
    """Flat C-order position of the element at byte ``offset`` (for messages)."""
    remaining, flat = offset, 0
    for n, stride in zip(array.shape, array.strides):
        i = remaining // stride if stride else 0
        remaining -= i * stride
        flat = flat * n + i
    return flat


def _index_text(index) -> str:
    if isinstance(index, tuple):
        return ", ".join(_index_text(i) for i in index)
    if isinstance(index, slice):
        parts = ["" if p is None else str(p) for p in (index.start, index.stop, index.step)]
        return ":".join(parts[:2] if index.step is None else parts)
    try:
        return str(operator.index(index))
    except TypeError:
        return repr(index)


def _short(site) -> str:
    code, line = site
    return f"{code.co_filename}:{line}"


_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*[\w.]*shared\.array\(")


def _declared_name(frame) -> str | None:
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    if line.count("shared.array(") != 1:
        return None
    match = _ASSIGNED.match(line)
    return match.group(1) if match else None


def _new_array(shape, dtype, decl) -> SharedArray:
    base = poison(np.empty(shape, dtype))
    array = base.view(SharedArray)
    start = base.__array_interface__["data"][0]
    _set_layout(array, start, (start, start + max(base.nbytes, 1)), decl)
    return array


def _check_alignment(alignment) -> None:
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
        raise ValueError("Alignment must be a positive integer")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")


def _register(fake_shared, key, array, alignment) -> None:
    """List a block's array where the simulator keeps shared arrays (workbook.sim.foreign
    looks for them there), with its alignment."""
    base = array.base if isinstance(array.base, np.ndarray) else array
    fake_shared._allocations[key] = base
    if alignment is not None:
        if not hasattr(fake_shared, "_workbook_alignment"):
            fake_shared._workbook_alignment = {}
        fake_shared._workbook_alignment[id(base)] = alignment


def _dynamic(block, fake_shared, dtype) -> SharedArray:
    """A view of the block's dynamic shared memory: as many elements of ``dtype`` as fit."""
    size = fake_shared._dynshared_size
    with block.lock:
        if block.dynamic is None:
            block.dynamic = _new_array(size, np.uint8, {"name": "dynamic shared memory",
                                                        "site": None, "dynamic": True})
            block.dynamic.base[:] = _poison_bytes(size)
            fake_shared._dynshared = block.dynamic.base  # where workbook.sim.foreign looks
    count = size // dtype.itemsize
    return block.dynamic[: count * dtype.itemsize].view(dtype)


class SanitizedShared:
    """What ``cuda.shared`` is in a kernel while the sanitizer is on: per-block arrays."""

    def __init__(self, fake_shared):
        self._fake = fake_shared

    def array(self, shape, dtype, alignment=None):
        """A shared array of this block, fresh and poisoned (see the module's docstring)."""
        _thread, block = sanitizer.current_block()
        if alignment is not None:
            _check_alignment(alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        dtype = np.dtype(dtype)
        if shape == 0:
            return _dynamic(block, self._fake, dtype)
        frame = sys._getframe(1)
        key = (frame.f_code, frame.f_lasti)
        result = block.shared.get(key)
        if result is None:
            with block.lock:
                result = block.shared.get(key)
                if result is None:
                    array_shapes.check("shared")
                    decl = {"name": _declared_name(frame),
                            "site": (frame.f_code, frame.f_lineno)}
                    result = block.shared[key] = _new_array(shape, dtype, decl)
                    _register(self._fake, (block.index, *key), result, alignment)
        return result


def install() -> None:
    """Route ``cuda.shared`` to :class:`SanitizedShared` in sanitized launches (idempotent).

    Without the sanitizer, kernels call the simulator's own ``cuda.shared.array``
    (or a replacement installed on it) directly: it tells arrays apart by its
    caller's line, so it must not be wrapped.
    """
    from numba.cuda.simulator import kernelapi

    module = kernelapi.FakeCUDAModule
    if getattr(module, "_workbook_sanitized", False):
        return
    plain = module.shared

    def shared(self):
        if sanitizer.current_block()[1] is None:
            return plain.fget(self)
        fake = plain.fget(self)
        proxy = fake.__dict__.get("_wb_proxy")
        if proxy is None:
            proxy = fake.__dict__["_wb_proxy"] = SanitizedShared(fake)
        return proxy

    module.shared = property(shared, doc=plain.__doc__)
    module._workbook_sanitized = True


sanitizer.register("shared", install, SHARED)
