"""workbook.memory: the caching pool's free lists, and the pool on a GPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import workbook
from workbook.memory import (
    BlockPool,
    empty,
    empty_pool,
    flat,
    pool_stats,
    size_class,
    use_pool,
)


def test_size_classes_round_up_and_never_shrink():
    assert size_class(1) == 512
    assert size_class(512) == 512
    assert size_class(513) == 1024
    assert size_class((1 << 20) - 1) == 1 << 20
    assert size_class((1 << 20) + 1) == 2 << 20
    assert size_class(5 << 20) == 6 << 20
    for nbytes in (1, 777, 4096, 3 << 20, 123_456_789):
        assert size_class(nbytes) >= nbytes


class FakeDriver:
    def __init__(self, capacity: int = 1 << 30):
        self.capacity, self.used, self.next_handle = capacity, 0, 1
        self.live: dict[int, int] = {}

    def alloc(self, nbytes: int) -> int:
        if self.used + nbytes > self.capacity:
            raise MemoryError("out of memory")
        handle, self.next_handle = self.next_handle, self.next_handle + 1
        self.live[handle] = nbytes
        self.used += nbytes
        return handle

    def free(self, handle: int) -> None:
        self.used -= self.live.pop(handle)


def test_a_freed_block_serves_the_next_request_of_its_class():
    driver = FakeDriver()
    pool = BlockPool(driver.alloc, driver.free)
    first, cls = pool.take(1000)
    pool.give(first, cls)
    again, _ = pool.take(900)  # same 1024-byte class
    assert again == first
    other, _ = pool.take(5000)  # another class: a new driver allocation
    assert other != first
    assert (pool.stats.hits, pool.stats.misses) == (1, 2)
    assert pool.stats.held_bytes == 1024 + 5120 == driver.used


def test_blocks_in_use_are_never_handed_out_twice():
    driver = FakeDriver()
    pool = BlockPool(driver.alloc, driver.free)
    handles = [pool.take(4096)[0] for _ in range(4)]
    assert len(set(handles)) == 4


def test_out_of_memory_returns_the_free_blocks_and_tries_again():
    driver = FakeDriver(capacity=4 << 20)
    pool = BlockPool(driver.alloc, driver.free)
    block, cls = pool.take(3 << 20)  # a 4 MiB class: all of the fake GPU
    pool.give(block, cls)
    assert pool.stats.free_bytes == 4 << 20
    pool.take(2 << 20)  # another class: the free 4 MiB block goes back first
    assert pool.stats.free_bytes == 0 and driver.used == 2 << 20
    with pytest.raises(MemoryError):
        pool.take(3 << 20)  # nothing left to give back


def test_release_returns_every_free_block_to_the_driver():
    driver = FakeDriver()
    pool = BlockPool(driver.alloc, driver.free)
    taken = [pool.take(n) for n in (100, 100, 70_000)]
    for handle, cls in taken:
        pool.give(handle, cls)
    pool.release()
    assert driver.used == 0 and pool.stats.held_bytes == 0 and pool.stats.free_bytes == 0


def test_the_pool_is_off_where_grading_turns_it_off(monkeypatch):
    monkeypatch.setenv("WORKBOOK_MEMORY_POOL", "0")
    assert use_pool() is None


@pytest.mark.parametrize("shape", [(3, 5), 7, (2, 3, 4), (0, 4)])
def test_empty_and_flat_behave_as_numba_s_own(shape):
    """On a GPU with the pool on (the GPU test below) and without it (here)."""
    array = empty(shape, np.float32)
    expected = cuda.device_array(shape, np.float32)
    assert (array.shape, array.strides, array.dtype) == (expected.shape, expected.strides,
                                                         expected.dtype)
    line = flat(array)
    assert line.shape == (array.size,)
    if array.size:
        data = np.arange(array.size, dtype=np.float32).reshape(array.shape)
        array.copy_to_device(data)
        assert line.strides == (4,)
        np.testing.assert_array_equal(line.copy_to_host(), data.reshape(-1))


@pytest.mark.sim_only
def test_the_simulator_has_no_pool():
    assert workbook.MODE == "sim"
    assert use_pool() is None and pool_stats() is None


@pytest.mark.gpu
def test_device_arrays_come_back_from_the_pool_with_their_data_intact(monkeypatch):
    monkeypatch.delenv("WORKBOOK_MEMORY_POOL", raising=False)
    manager = use_pool()
    try:
        assert manager is not None and cuda.current_context().memory_manager is manager
        data = np.arange(70_000, dtype=np.float32)
        first = cuda.to_device(data)
        pointer = first.device_ctypes_pointer.value
        del first
        hits = pool_stats().hits
        second = cuda.to_device(data[::-1].copy())
        assert pool_stats().hits == hits + 1
        assert second.device_ctypes_pointer.value == pointer  # the same block, reused
        np.testing.assert_array_equal(second.copy_to_host(), data[::-1])
        kept = cuda.device_array(70_000, np.float32)  # a block in use is not handed out
        assert kept.device_ctypes_pointer.value != second.device_ctypes_pointer.value
        for shape in [(3, 5), 7, (2, 3, 4), (0, 4)]:
            test_empty_and_flat_behave_as_numba_s_own(shape)
        fast = empty((300, 70), np.float32)  # from the pool: a hit, the same block again
        address = fast.device_ctypes_pointer.value
        del fast
        assert empty((300, 70), np.float32).device_ctypes_pointer.value == address
        del second
        empty_pool()
        assert pool_stats().free_bytes == 0 and pool_stats().held_bytes > 0  # kept in use
    finally:
        use_pool(False)
    assert not hasattr(cuda.current_context().memory_manager, "pool")


# numba's memory-manager plugin around the pool, without a GPU: numba's real driver module
# (loaded with the simulator off) and a stand-in for the driver's allocation calls.
EMM_SCRIPT = r'''
import gc, json, sys, types
from types import SimpleNamespace

from numba.cuda.cudadrv import driver as drv

package = types.ModuleType("workbook")  # workbook.memory alone: importing the package would
package.__path__ = [sys.argv[1]]        # choose the simulator for lack of a GPU
sys.modules["workbook"] = package
import workbook.memory as memory

live, freed, next_address = {}, [], [0x10000]

def cu_mem_alloc(nbytes):
    address = next_address[0]
    next_address[0] += 0x100000
    live[address] = nbytes
    return drv.binding.CUdeviceptr(address)

def cu_mem_free(pointer):
    freed.append(int(pointer))
    del live[int(pointer)]

drv.driver = SimpleNamespace(cuMemAlloc=cu_mem_alloc, cuMemFree=cu_mem_free)

class Context:
    device = SimpleNamespace(id=0)

context = Context()
manager = memory._manager_class()(context=context, backend="driver")
steps = {}
first = manager.memalloc(1000)
steps["first"] = first.device_ctypes_pointer.value
steps["held"] = len(manager.allocations)
del first
gc.collect()
steps["after_free"] = [len(manager.allocations), manager.pool.stats.free_bytes]
second = manager.memalloc(900)  # the same 1024-byte class: the freed block again
steps["second"] = second.device_ctypes_pointer.value
third = manager.memalloc(900)   # the block is in use: a new one
steps["third"] = third.device_ctypes_pointer.value
steps["stats"] = [manager.pool.stats.hits, manager.pool.stats.misses]
del third
gc.collect()
manager.pool.release()          # empty_pool(): free blocks back to the driver, used ones kept
steps["released"] = [freed, sorted(live)]
print(json.dumps(steps))
'''


def test_numba_s_arrays_give_their_blocks_back_to_the_pool(tmp_path):
    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "emm.py"
    script.write_text(EMM_SCRIPT)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", WORKBOOK_MEMORY_POOL="1")
    done = subprocess.run([sys.executable, str(script), str(root / "workbook")], env=env,
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    assert steps["held"] == 1 and steps["after_free"] == [0, 1024]
    assert steps["second"] == steps["first"] == 0x10000
    assert steps["third"] == 0x110000
    assert steps["stats"] == [1, 2]
    assert steps["released"] == [[0x110000], [0x10000]]
