"""Output arrays handed out again once nothing else holds them: for functions called in a loop.

A lesson function that returns new arrays, ``y = softmax(x)``, allocates them on every call.
Even from the pool (:mod:`workbook.memory`) an array costs about 4 us of Python on an H100
(making the array object, then freeing it), as much as the launch itself, and PyTorch's whole
``torch.softmax`` of a short row takes 6-8 us.

``recycled(shape, dtype)`` (or ``recycled_group(key, make)`` for arrays made together) keeps
the last few arrays it handed out for each shape and dtype. When one of them is referenced by
nothing but this cache any more, it is handed out again: the same object on the same memory,
so there is nothing to allocate, and a prepared launch (:mod:`workbook.launch`) that saw it
before has little to rewrite. In a loop ``y = softmax(x)``, the ``y`` of two calls ago is such
an array. "Nothing else" is read from CPython's reference counts: of each array, of its memory
owner and of the pooled block (numba's views count there), compared with their counts when the
cache made it. An array that the caller, a view of it, a PyTorch tensor or a CuPy array made
from it still uses is never handed out again, and reuse is as safe as the pool's in stream
order (every workbook launch goes to the default stream).

Only arrays up to ``MAX_ITEM_BYTES`` are kept (an output that large takes its kernel longer to
write than its allocation takes), at most ``KEEP`` per key and ``MAX_KEYS`` keys; under memory
pressure the pool drops them all (:func:`forget_all`). In the simulator and without the pool,
these are plain new arrays.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

MAX_ITEM_BYTES = 64 << 20  # larger outputs are allocated anew on each call
KEEP = 3                   # arrays kept per key: the caller's, the one before, a spare
MAX_KEYS = 16              # shapes kept, the one used longest ago dropped first


def _counts(item: tuple) -> list:
    """Reference counts that grow when anything outside the cache holds ``item`` or part of
    it: the tuple's, and each array's, its memory owner's and its pooled block's (numba's
    views count there). :func:`_unchanged` reads them the same way: both take ``item`` as
    their argument and hold each array in a loop variable, so that the counts compare."""
    counts = [sys.getrefcount(item)]
    for a in item:
        counts.append(sys.getrefcount(a))
        counts.append(sys.getrefcount(a.gpu_data))
        counts.append(a.gpu_data._mem.refct)
    return counts


def _unchanged(item: tuple, counts: list) -> bool:
    """Whether ``item``'s counts are still ``counts`` (stops at the first that is not)."""
    if sys.getrefcount(item) != counts[0]:
        return False
    k = 1
    for a in item:
        if (sys.getrefcount(a) != counts[k] or sys.getrefcount(a.gpu_data) != counts[k + 1]
                or a.gpu_data._mem.refct != counts[k + 2]):
            return False
        k += 3
    return True


class Recycler:
    """Hands out ``make()``'s tuples of arrays, again once nothing but this holds one."""

    def __init__(self, make, keep: int = KEEP, first: tuple | None = None):
        self.make, self.keep = make, keep
        self.slots: list[list] = []  # [item, its counts while only the cache held it]
        self.oldest = 0
        self.first = first  # made already: handed out by the first take()

    def take(self) -> tuple:
        for slot in self.slots:
            item = slot[0]
            if _unchanged(item, slot[1]):
                return item
        item, self.first = self.first or self.make(), None
        slot = [item, None]
        if len(self.slots) < self.keep:
            self.slots.append(slot)
        else:  # every kept one is in use: the oldest slot takes the new one
            self.slots[self.oldest] = slot
            self.oldest = (self.oldest + 1) % self.keep
        slot[1] = _counts(item)  # measured as take() measures it: slot, item, argument
        return item


_recyclers: OrderedDict = OrderedDict()
_last: list = [None, None, None]  # shape, dtype and recycler of the last recycled() call


def recycled_group(key, make) -> tuple:
    """``make()`` (a tuple of device arrays), or one it made before under ``key`` that nothing
    outside this cache holds any more."""
    _last[:] = None, None, None  # recycled()'s shortcut holds only while its key is the newest
    recycler = _recyclers.get(key)
    if recycler is None:
        from workbook import memory

        made = make()
        if (memory._active is None or sum(a.nbytes for a in made) > MAX_ITEM_BYTES
                or not all(hasattr(a.gpu_data, "_mem") for a in made)):
            return made  # the simulator, numba's allocator, large, or not pooled
        recycler = _recyclers[key] = Recycler(make, first=made)
        del made  # counted while only the cache holds it
        if len(_recyclers) > MAX_KEYS:
            _recyclers.popitem(last=False)
        return recycler.take()
    _recyclers.move_to_end(key)
    return recycler.take()


def recycled(shape, dtype):
    """``workbook.memory.empty(shape, dtype)``, or an array of that shape and dtype handed out
    before that nothing outside this cache holds any more."""
    last = _last
    if dtype is last[1] and shape == last[0]:  # a loop's path: the key used last, no hashing
        return last[2].take()[0]
    key = (shape, dtype)
    recycler = _recyclers.get(key)
    if recycler is not None:  # no import, no closure (0.5 us less per call)
        _recyclers.move_to_end(key)
        last[:] = shape, dtype, recycler
        return recycler.take()[0]
    from workbook.memory import empty

    made = recycled_group(key, lambda: (empty(shape, dtype),))[0]
    recycler = _recyclers.get(key)
    if recycler is not None:
        last[:] = shape, dtype, recycler
    return made


def forget_all() -> None:
    """Drop every kept array (they go back to the pool once nothing else holds them)."""
    _recyclers.clear()
    _last[:] = None, None, None
