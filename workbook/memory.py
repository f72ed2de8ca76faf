"""A caching (pooling) allocator for numba's device arrays, as PyTorch keeps one.

``cuda.device_array`` asks the driver for memory (``cuMemAlloc``) on every call, and
numba frees it later with ``cuMemFree``, which waits for the whole GPU to finish. A
function that allocates its outputs on every call, called in a loop, therefore pays
tens to hundreds of microseconds per call and lets the GPU run dry between calls:
on an H200 three allocations for a (49152, 128) float32 LayerNorm cost 261 us, three
times the kernel. PyTorch's caching allocator keeps freed blocks and hands them out
again, so its functions allocate in a few microseconds.

:class:`PoolingMemoryManager` does the same for numba, through numba's External
Memory Management (EMM) plugin interface: device memory freed by Python (an array
that is no longer referenced) goes to a free list for its size class instead of back
to the driver, and the next allocation of that class takes it from there. Reuse is
safe in stream order: every launch of the workbook goes to the default stream, so a
kernel that writes a recycled block runs after every kernel that used it before
(PyTorch records each block's stream for the same reason; a program that uses other
streams must not use this pool).

One pool per process: once PyTorch is loaded (before or after ``use_pool()``), the pool
takes new blocks from PyTorch's caching allocator (``torch.cuda.caching_allocator_alloc`` /
``caching_allocator_delete``) and gives freed ones back to it (blocks it took from the
driver before go back to the driver), so that memory one library
freed serves the other: two caches side by side each hold their peak and starve each other
(on an H100, after softmax and LayerNorm sweeps beside torch, PyTorch's cache held 45.1 GB
and this pool 25.7 GB of free blocks, 13.6 GB of the 80 GB left free). Either way the pool
keeps at most ``WORKBOOK_POOL_MAX_FREE_MB`` (default 1024) MiB of free blocks of its own (a
block taken from its free list costs 3.3 us with the array around it, on an H100 on
2026-11-26, ``torch.empty`` 3.6 us), giving back those of the size classes used longest ago
first, and under memory pressure it returns every free block and empties PyTorch's and
CuPy's caches (if loaded) before it tries again.

``use_pool()`` installs it (GPU mode; in the simulator it does nothing and returns
None): for contexts created later through ``cuda.set_memory_manager``, and for the
current context by replacing its memory manager (arrays allocated before keep their
own). ``pool_stats()`` reports hits, misses and bytes held; ``empty_pool()`` gives the
free blocks back to the driver. ``empty(shape, dtype)`` and ``flat(array)`` are
``cuda.device_array`` and a 1-D view without numba's per-call context checks (what is
left of an allocation's cost once the pool serves it).

The grader turns the pool off in the processes that run a student's notebook
(``WORKBOOK_MEMORY_POOL=0``): there every test buffer must be an allocation of its
exact size, so that a read one past its end leaves the allocation and
compute-sanitizer's memcheck reports it (a pooled block is rounded up to its size
class, and the stray read would land in memory that belongs to the block).
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from dataclasses import dataclass

from workbook.mode import current_mode

SMALL_LIMIT = 1 << 20   # sizes below 1 MiB are rounded up to 512 bytes ...
SMALL_ROUND = 512
LARGE_ROUND = 2 << 20   # ... larger ones to 2 MiB, so a loop's sizes land on one class
POOL_ENV = "WORKBOOK_MEMORY_POOL"  # "0": use_pool() does nothing (set by the grader)
MAX_FREE_ENV = "WORKBOOK_POOL_MAX_FREE_MB"  # free blocks the pool keeps, in MiB
DEFAULT_MAX_FREE_MB = 1024  # 2048 left 2.11 GB free after end_to_end.py's blob analysis


def max_free_bytes() -> int:
    """How many bytes of free blocks the pool keeps (``WORKBOOK_POOL_MAX_FREE_MB``)."""
    value = os.environ.get(MAX_FREE_ENV, str(DEFAULT_MAX_FREE_MB))
    try:
        megabytes = float(value)
    except ValueError:
        raise ValueError(f"{MAX_FREE_ENV}={value!r}: expected a number of MiB") from None
    return max(0, int(megabytes * (1 << 20)))


def size_class(nbytes: int) -> int:
    """The size a request of ``nbytes`` is served with (blocks of one class are swapped)."""
    step = SMALL_ROUND if nbytes < SMALL_LIMIT else LARGE_ROUND
    return max(step, -(-nbytes // step) * step)


@dataclass
class PoolStats:
    hits: int = 0          # allocations served from a free list
    misses: int = 0        # allocations that went to the driver
    held_bytes: int = 0    # everything obtained from the driver and not given back
    free_bytes: int = 0    # of which waiting in free lists
    backend: str = "driver"  # where blocks come from: "driver" (cuMemAlloc) or "torch"


class BlockPool:
    """Free lists per size class over a driver allocator (the pure-Python core of the pool).

    ``take(nbytes)`` returns ``(handle, size class)``; ``give(handle, size_class)`` puts a
    block back, and then returns free blocks to the driver (``free_fn``) while more than
    ``max_free`` bytes are free, those of the size class used longest ago first;
    ``release()`` returns every free block. ``alloc_fn(nbytes)`` may raise ``MemoryError``:
    the pool then releases its free blocks, calls ``on_pressure()`` (other caches give
    theirs back) and tries once more.
    """

    def __init__(self, alloc_fn, free_fn, max_free: int | None = None, on_pressure=None):
        self.alloc_fn, self.free_fn, self.on_pressure = alloc_fn, free_fn, on_pressure
        self.max_free = max_free_bytes() if max_free is None else max_free
        self.free: OrderedDict[int, list] = OrderedDict()  # least recently used class first
        self.stats = PoolStats()

    def take(self, nbytes: int):
        cls = size_class(nbytes)
        blocks = self.free.get(cls)
        if blocks:
            self.stats.hits += 1
            self.stats.free_bytes -= cls
            handle = blocks.pop()
            if blocks:
                self.free.move_to_end(cls)
            else:
                del self.free[cls]
            return handle, cls
        self.stats.misses += 1
        try:
            handle = self.alloc_fn(cls)
        except MemoryError:
            self.release()
            if self.on_pressure is not None:
                self.on_pressure()
            handle = self.alloc_fn(cls)
        self.stats.held_bytes += cls
        return handle, cls

    def give(self, handle, cls: int) -> None:
        self.free.setdefault(cls, []).append(handle)
        self.free.move_to_end(cls)
        self.stats.free_bytes += cls
        self.trim(self.max_free)

    def trim(self, limit: int) -> None:
        """Return free blocks, least recently used class first, until at most ``limit``
        bytes are free."""
        while self.stats.free_bytes > limit and self.free:
            cls, blocks = next(iter(self.free.items()))
            self.free_fn(blocks.pop())
            if not blocks:
                del self.free[cls]
            self.stats.held_bytes -= cls
            self.stats.free_bytes -= cls

    def release(self) -> None:
        self.trim(0)


def empty_other_caches() -> None:
    """Ask the other GPU caches of this process (PyTorch's, CuPy's, the arrays
    :mod:`workbook.outputs` keeps for reuse) for their free blocks."""
    outputs = sys.modules.get("workbook.outputs")
    if outputs is not None:
        outputs.forget_all()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()


def torch_allocator(device: int):
    """``(alloc, free)`` through PyTorch's caching allocator on ``device``, when PyTorch is
    loaded and has a GPU; else None. ``alloc`` returns an int pointer, raises MemoryError."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None

    def alloc(nbytes: int) -> int:
        try:
            return torch.cuda.caching_allocator_alloc(nbytes, device=device)
        except torch.OutOfMemoryError as exc:
            raise MemoryError(str(exc)) from exc

    return alloc, torch.cuda.caching_allocator_delete


def _manager_class():
    """The EMM plugin class (built on first use: numba.cuda's driver module is GPU-only)."""
    from numba.cuda.cudadrv import driver as drv

    class PoolingMemoryManager(drv.GetIpcHandleMixin, drv.HostOnlyCUDAMemoryManager):
        """numba EMM plugin: device allocations from a :class:`BlockPool`."""

        def __init__(self, *args, backend: str = "auto", **kwargs):
            super().__init__(*args, **kwargs)
            # numba makes one instance without a context to read interface_version
            device = None if self.context is None else self.context.device.id
            source = BlockSource(self._driver_alloc, drv.driver.cuMemFree,
                                 None if backend == "driver" or device is None
                                 else lambda: torch_allocator(device),
                                 lambda address: _device_pointer(drv, address))
            self.pool = BlockPool(source.alloc, source.free, on_pressure=empty_other_caches)
            source.stats = self.pool.stats
            source.shared_allocator()  # "torch" from the start where PyTorch is loaded

        @staticmethod
        def _driver_alloc(nbytes):
            try:
                return drv.driver.cuMemAlloc(nbytes)
            except drv.CudaAPIError as exc:
                if exc.code == drv.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
                    raise MemoryError(str(exc)) from exc
                raise

        def initialize(self):
            if self.deallocations.memory_capacity == drv._SizeNotSet:
                self.deallocations.memory_capacity = self.get_memory_info().total

        def memalloc(self, size):
            pointer, cls = self.pool.take(size)
            key = int(pointer)
            allocations, pool = self.allocations, self.pool

            def give_back():
                allocations.pop(key, None)
                pool.give(pointer, cls)

            # as numba's own manager: the block lives while an owner (an array, a view)
            # references it, counted in its refct; cheaper objects than numba's own
            block = PooledBlock(self.context, pointer, size, give_back)
            allocations[key] = block
            return BlockOwner(block)

        def get_memory_info(self):
            free, total = drv.driver.cuMemGetInfo()
            return drv.MemoryInfo(free=free, total=total)

        def reset(self):
            global _active
            super().reset()
            self.pool.release()
            if _active is self:
                _active = None

        @property
        def interface_version(self):
            return 1

    class PooledBlock(drv.MemoryPointer):
        """A pooled block: numba's ``AutoFreePointer`` without a ``weakref.finalize``
        (1-2 us to make and to run); ``free`` gives it back when its count of owners
        (``refct``, kept by :class:`BlockOwner` and numba's views) reaches 0."""

        def __init__(self, context, pointer, size, release):
            self.context = context
            self.device_pointer = self.handle = pointer
            self.size = self._cuda_memsize_ = size
            self.is_managed = True
            self.refct = 0
            self._owner = None
            self._release = release

        def free(self):
            release, self._release = self._release, None
            if release is None:
                raise RuntimeError("Freeing dead memory")
            release()

    class BlockOwner(drv.OwnedPointer):
        """An array's reference to its block (numba's ``OwnedPointer`` counts its owners
        with a ``weakref.finalize``; this with ``__del__``, which CPython runs as soon as
        the array goes)."""

        def __init__(self, block):
            self._mem = self._view = block
            block.refct += 1
            self.device_ctypes_pointer = block.device_ctypes_pointer

        def __del__(self):
            block = self._mem
            block.refct -= 1
            if block.refct == 0:
                try:
                    block.free()
                except Exception:  # noqa: BLE001  (interpreter shutdown: nothing to give to)
                    pass

    return PoolingMemoryManager


class BlockSource:
    """Where a pool's new blocks come from, and where each goes back: PyTorch's caching
    allocator once PyTorch is loaded (``shared()`` returns its ``(alloc, free)``; None until
    then), the driver before, or always without ``shared``. A block goes back to where it
    came from, so a pool made before ``import torch`` (a notebook that compares with
    PyTorch later) still shares one cache with it from then on."""

    def __init__(self, driver_alloc, driver_free, shared=None, pointer=lambda a: a):
        self.driver_alloc, self.driver_free = driver_alloc, driver_free
        self.shared, self.pointer = shared, pointer
        self.torch = None  # PyTorch's (alloc, free), once found
        self.from_driver: set[int] = set()
        self.stats = PoolStats()

    def shared_allocator(self):
        """PyTorch's ``(alloc, free)`` once PyTorch is loaded (and ``shared`` given), else
        None."""
        if self.torch is None and self.shared is not None and "torch" in sys.modules:
            self.torch = self.shared()
            if self.torch is not None:
                self.stats.backend = "torch"
        return self.torch

    def alloc(self, nbytes: int):
        shared = self.shared_allocator()
        if shared is None:
            handle = self.driver_alloc(nbytes)
            self.from_driver.add(int(handle))
            return handle
        alloc, free = shared
        address = alloc(nbytes)
        try:
            return self.pointer(address)
        except BaseException:
            free(address)
            raise

    def free(self, handle) -> None:
        address = int(handle)
        if address in self.from_driver:
            self.from_driver.discard(address)
            self.driver_free(handle)
        else:
            self.torch[1](address)


def _device_pointer(drv, address: int):
    """An int device address as the pointer type numba's driver binding uses (the NVIDIA
    binding's CUdeviceptr; ctypes where an older numba-cuda runs without it)."""
    if getattr(drv, "USE_NV_BINDING", True):
        binding = getattr(drv, "binding", None)
        if binding is None:
            from cuda.bindings import driver as binding
        return binding.CUdeviceptr(address)
    from numba.cuda.cudadrv import drvapi

    return drvapi.cu_device_ptr(address)


_manager = None
_active = None  # the pool manager use_pool() installed last (its context is the current one)
_numba_managers: dict = {}  # id(context) -> the memory manager numba gave it
_pool_managers: dict = {}   # id(context) -> its pool (kept when switched off and on again)


def use_pool(enabled: bool = True, backend: str = "auto"):
    """Serve numba's device allocations from a caching pool (GPU mode); returns the
    current context's memory manager, or None in the simulator. ``enabled=False`` gives
    the current context numba's own manager back (for measuring the difference).
    ``backend``: "auto" (PyTorch's caching allocator once PyTorch is loaded, the driver
    before: see :class:`BlockSource`), "torch" or "driver"; it applies when the context's
    pool is first made."""
    if backend not in ("auto", "torch", "driver"):
        raise ValueError(f"backend={backend!r}: expected 'auto', 'torch' or 'driver'")
    if backend == "torch" and "torch" not in sys.modules:
        raise ValueError("backend='torch' needs PyTorch imported first (import torch)")
    global _manager, _active
    if current_mode() != "gpu" or os.environ.get(POOL_ENV) == "0":
        return None
    from numba import cuda
    from numba.cuda.cudadrv import driver as drv

    if _manager is None:
        _manager = _manager_class()
    context = cuda.current_context()
    if not enabled:
        drv.set_memory_manager(drv.NumbaCUDAMemoryManager)
        context.memory_manager = _numba_managers.get(id(context), context.memory_manager)
        _active = None
        return context.memory_manager
    cuda.set_memory_manager(_manager)
    if not isinstance(context.memory_manager, _manager):
        _numba_managers.setdefault(id(context), context.memory_manager)
        if id(context) not in _pool_managers:
            _pool_managers[id(context)] = _manager(context=context, backend=backend)
            _pool_managers[id(context)].initialize()
        context.memory_manager = _pool_managers[id(context)]
    _active = context.memory_manager
    return context.memory_manager


def empty(shape, dtype):
    """A new C-contiguous device array, as ``cuda.device_array(shape, dtype)``.

    With the pool on, the array is built directly on a pooled block: ``cuda.device_array``
    first makes sure a CUDA context is current (two driver calls through numba's context
    stack, about 25 us of the 38 us it takes even from the pool, measured on an H100), and
    a function that allocates its outputs on every call pays that each time."""
    manager = _active
    if manager is None:
        from numba import cuda

        return cuda.device_array(shape, dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    layout = _LAYOUTS.get((shape, dtype)) or _c_layout(shape, dtype)
    if layout is None:  # no elements
        from numba import cuda

        return cuda.device_array(shape, dtype)
    return _device_array(layout, manager.memalloc(layout[-1]))


def flat(array):
    """``array.reshape(array.size)`` for a C-contiguous device array, without the cost of
    numba's general reshape (a view of the same memory)."""
    if _active is None or array.size == 0 or not array.is_c_contiguous():
        return array.reshape(array.size)
    layout = _LAYOUTS.get(((array.size,), array.dtype)) or _c_layout((array.size,),
                                                                      array.dtype)
    return _device_array(layout, array.gpu_data)


# A device array's layout by (shape, dtype): what numba's DeviceNDArray constructor works
# out on every call (about 5 us of Python), worked out once: normalised shape, strides,
# dtype, the descriptor numba keeps beside the pointer (immutable), size and bytes.
_LAYOUTS: dict = {}
_MAX_LAYOUTS = 4096


def _c_layout(shape: tuple, dtype):
    """The layout of a C-contiguous ``shape`` of ``dtype`` (remembered), or None if empty."""
    import numpy as np
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    key = (shape, dtype)
    dtype = np.dtype(dtype)
    strides, step = [], dtype.itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    if step == 0:
        return None
    model = DeviceNDArray(shape, tuple(reversed(strides)), dtype, gpu_data=_NO_MEMORY)
    layout = (model.shape, model.strides, model.dtype, model._dummy, model.size,
              model.alloc_size)
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout
    return layout


_NO_MEMORY = object()  # stands in for gpu_data while numba's constructor works out a layout


def _device_array(layout, gpu_data):
    """A DeviceNDArray of ``layout`` on ``gpu_data``, with the attributes numba's
    constructor sets (``DeviceNDArrayBase.__init__``, numba-cuda 0.30) and none of its work."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    array = DeviceNDArray.__new__(DeviceNDArray)
    array.shape, array.strides, array.dtype, array._dummy, array.size, array.alloc_size = layout
    array.ndim = len(array.shape)
    array.gpu_data = gpu_data
    array.stream = 0
    return array


def empty_pool() -> None:
    """Give the current context's free pooled blocks back to the driver (as
    ``torch.cuda.empty_cache``); blocks in use stay with their arrays."""
    manager = _current_pool_manager()
    if manager is not None:
        manager.pool.release()


def _current_pool_manager():
    if _manager is None or _active is None:
        return None
    from numba import cuda

    manager = cuda.current_context().memory_manager
    return manager if isinstance(manager, _manager) else None


def pool_stats() -> PoolStats | None:
    """Hits, misses and bytes of the current context's pool (None without one)."""
    manager = _current_pool_manager()
    return None if manager is None else manager.pool.stats
