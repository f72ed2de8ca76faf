"""workbook.memory's policy: how many free blocks the pool keeps, which it gives back first,
what it does under memory pressure, and one pool per process beside PyTorch.

The policy is tested on a stand-in driver (plain Python); the GPU tests alternate large
PyTorch and workbook allocations on a real device.
"""

import json
import os
import sys
import types

import pytest
from test_memory import FakeDriver

import workbook
from workbook import memory
from workbook.memory import BlockPool, empty_other_caches, max_free_bytes, torch_allocator

MiB = 1 << 20


class Driver(FakeDriver):
    """test_memory's stand-in for cuMemAlloc/cuMemFree, remembering what was freed."""

    def __init__(self, capacity: int):
        super().__init__(capacity)
        self.freed: list[int] = []

    def free(self, handle: int) -> None:
        super().free(handle)
        self.freed.append(handle)


def test_free_blocks_beyond_the_limit_go_back_least_recently_used_class_first():
    driver = Driver(1 << 30)
    pool = BlockPool(driver.alloc, driver.free, max_free=8 * MiB)
    old, _ = pool.take(4 * MiB)
    mid, _ = pool.take(2 * MiB)
    new, _ = pool.take(6 * MiB)
    pool.give(old, 4 * MiB)  # 4 MiB free: kept
    pool.give(mid, 2 * MiB)  # 6 MiB free: kept
    assert driver.freed == []
    pool.give(new, 6 * MiB)  # 12 MiB free > 8: the 4 MiB class, used longest ago, goes
    assert driver.freed == [old]
    assert pool.stats.free_bytes == 8 * MiB
    assert pool.stats.held_bytes == 8 * MiB == driver.used


def test_taking_a_class_makes_it_the_most_recently_used():
    driver = Driver(1 << 30)
    pool = BlockPool(driver.alloc, driver.free, max_free=6 * MiB)
    a, _ = pool.take(2 * MiB)
    b, _ = pool.take(4 * MiB)
    pool.give(a, 2 * MiB)
    pool.give(b, 4 * MiB)            # 6 MiB free, the 2 MiB class used longest ago
    again, _ = pool.take(2 * MiB)    # ... until now
    assert again == a
    c, _ = pool.take(6 * MiB)
    pool.give(again, 2 * MiB)
    pool.give(c, 6 * MiB)            # 12 MiB free: the 4 MiB class is now the oldest
    assert driver.freed[0] == b


def test_a_class_used_once_does_not_stay_held():
    """A sweep over many sizes, each used once: free bytes stay at the limit."""
    driver = Driver(1 << 40)
    pool = BlockPool(driver.alloc, driver.free, max_free=16 * MiB)
    for size in range(2, 200, 2):
        handle, cls = pool.take(size * MiB)
        pool.give(handle, cls)
        assert pool.stats.free_bytes <= 16 * MiB
    assert driver.used == pool.stats.held_bytes <= 16 * MiB


def test_pressure_returns_own_blocks_then_asks_the_other_caches():
    driver = Driver(10 * MiB)
    other_cache = [6 * MiB]  # another library's cache, holding memory of the same device
    driver.used += other_cache[0]

    def empty_other():
        driver.used -= other_cache.pop()

    pool = BlockPool(driver.alloc, driver.free, max_free=1 << 30, on_pressure=empty_other)
    small, _ = pool.take(2 * MiB)
    pool.give(small, 2 * MiB)
    handle, cls = pool.take(8 * MiB)  # 2 free + 6 elsewhere: both must be given back
    assert cls == 8 * MiB and driver.freed == [small] and other_cache == []


def test_still_out_of_memory_after_pressure_is_a_memory_error():
    driver = Driver(4 * MiB)
    pool = BlockPool(driver.alloc, driver.free, on_pressure=lambda: None)
    with pytest.raises(MemoryError):
        pool.take(8 * MiB)


def test_a_pool_that_keeps_nothing_gives_every_block_straight_back():
    """WORKBOOK_POOL_MAX_FREE_MB=0: every freed block goes back at once."""
    driver = Driver(1 << 30)
    pool = BlockPool(driver.alloc, driver.free, max_free=0)
    handle, cls = pool.take(3 * MiB)
    pool.give(handle, cls)
    assert driver.freed == [handle] and pool.stats.free_bytes == pool.stats.held_bytes == 0


def test_the_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(memory.MAX_FREE_ENV, raising=False)
    assert max_free_bytes() == 1024 * MiB
    monkeypatch.setenv(memory.MAX_FREE_ENV, "0.5")
    assert max_free_bytes() == MiB // 2
    monkeypatch.setenv(memory.MAX_FREE_ENV, "lots")
    with pytest.raises(ValueError, match="WORKBOOK_POOL_MAX_FREE_MB='lots'"):
        max_free_bytes()


def fake_torch(calls: list, free_memory: int):
    """A module standing in for torch: a caching allocator with ``free_memory`` bytes."""
    class OutOfMemoryError(RuntimeError):
        pass

    def alloc(nbytes, device=None):
        calls.append(("alloc", nbytes, device))
        if nbytes > free_memory:
            raise OutOfMemoryError("CUDA out of memory")
        return 0x7000_0000 + len(calls)

    cuda = types.SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: True,
        empty_cache=lambda: calls.append(("empty_cache",)),
        caching_allocator_alloc=alloc,
        caching_allocator_delete=lambda pointer: calls.append(("delete", pointer)))
    return types.SimpleNamespace(cuda=cuda, OutOfMemoryError=OutOfMemoryError)


def test_pytorch_s_allocator_serves_the_pool_when_pytorch_is_loaded(monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls, free_memory=8 * MiB))
    alloc, free = torch_allocator(device=1)
    pointer = alloc(4 * MiB)
    free(pointer)
    assert calls == [("alloc", 4 * MiB, 1), ("delete", pointer)]
    with pytest.raises(MemoryError, match="CUDA out of memory"):
        alloc(16 * MiB)


def test_no_pytorch_no_shared_allocator(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert torch_allocator(device=0) is None


def test_pressure_empties_pytorch_s_and_cupy_s_caches(monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls, free_memory=0))
    freed = []
    pool = types.SimpleNamespace(free_all_blocks=lambda: freed.append(True))
    monkeypatch.setitem(sys.modules, "cupy",
                        types.SimpleNamespace(get_default_memory_pool=lambda: pool))
    empty_other_caches()
    assert calls == [("empty_cache",)] and freed == [True]


def test_an_unknown_backend_is_named(monkeypatch):
    with pytest.raises(ValueError, match="backend='cupy'"):
        memory.use_pool(backend="cupy")


def gpu_only():
    return pytest.mark.skipif(workbook.MODE != "gpu", reason="needs a GPU (simulator mode)")


def _alternate(torch, cuda, fraction: float, rounds: int) -> None:
    """Alternate allocations of ``fraction`` of the GPU's memory between PyTorch and the
    workbook: each fits alone, two never fit at once, so every round needs the other
    library's freed memory back."""
    total = cuda.current_context().get_memory_info().total
    nbytes = int(total * fraction) // 4 * 4
    for _ in range(rounds):
        t = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
        t.fill_(1.0)
        del t
        a = memory.empty(nbytes // 4, "float32")
        a[:1].copy_to_device(memory.empty(1, "float32"))
        del a


@pytest.mark.gpu
@gpu_only()
@pytest.mark.parametrize("backend", ["torch", "driver"])
def test_alternating_torch_and_workbook_allocations_never_run_out(backend):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from numba import cuda

    previous = memory._pool_managers.pop(id(cuda.current_context()), None)
    try:
        memory.use_pool(backend=backend)
        assert memory.pool_stats().backend == backend
        _alternate(torch, cuda, 0.6, rounds=3)
        assert memory.pool_stats().free_bytes <= memory.max_free_bytes()
    finally:
        memory.use_pool(enabled=False)
        memory._pool_managers.pop(id(cuda.current_context()), None)
        if previous is not None:
            memory._pool_managers[id(cuda.current_context())] = previous
        torch.cuda.empty_cache()


def test_a_pool_made_before_pytorch_shares_its_cache_once_pytorch_is_loaded(monkeypatch):
    """BlockSource: blocks from the driver until PyTorch is imported, from PyTorch's
    allocator after; each freed to where it came from."""
    from workbook.memory import BlockSource

    driver = Driver(1 << 30)
    calls: list = []
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    source = BlockSource(driver.alloc, driver.free, lambda: torch_allocator(device=0))
    early = source.alloc(2 * MiB)
    assert source.stats.backend == "driver" and driver.used == 2 * MiB
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls, free_memory=1 << 30))
    late = source.alloc(4 * MiB)
    assert source.stats.backend == "torch" and calls == [("alloc", 4 * MiB, 0)]
    assert driver.used == 2 * MiB  # nothing more from the driver
    source.free(early)
    source.free(late)
    assert driver.freed == [early] and calls[-1] == ("delete", late)


def test_the_driver_backend_never_takes_from_pytorch(monkeypatch):
    from workbook.memory import BlockSource

    driver = Driver(1 << 30)
    calls: list = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls, free_memory=1 << 30))
    source = BlockSource(driver.alloc, driver.free, None)
    handle = source.alloc(MiB)
    source.free(handle)
    assert not calls and driver.freed == [handle] and source.stats.backend == "driver"


def test_a_pointer_that_cannot_be_made_goes_back_to_pytorch(monkeypatch):
    from workbook.memory import BlockSource

    calls: list = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls, free_memory=1 << 30))

    def broken(address):
        raise TypeError("no pointer type")

    source = BlockSource(None, None, lambda: torch_allocator(device=0), broken)
    with pytest.raises(TypeError):
        source.alloc(MiB)
    assert [c[0] for c in calls] == ["alloc", "delete"]


LATE_TORCH = '''
import json
import workbook
from workbook import memory

memory.use_pool()
first = memory.empty(1 << 20, "float32")  # before PyTorch: from the driver
import torch  # noqa: E402

before = torch.cuda.memory_allocated()
second = memory.empty(1 << 22, "float32")  # after: from PyTorch's allocator
grew = torch.cuda.memory_allocated() - before
del first, second
print(json.dumps({"backend": memory.pool_stats().backend, "grew": grew}))
'''


@pytest.mark.gpu
def test_pytorch_imported_after_the_pool_serves_its_next_blocks(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    import subprocess

    script = tmp_path / "late_torch.py"
    script.write_text(LATE_TORCH)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, WORKBOOK_MEMORY_POOL="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["backend"] == "torch" and found["grew"] >= 4 << 20
