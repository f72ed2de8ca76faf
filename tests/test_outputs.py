"""workbook.outputs: an output array is handed out again only when nothing outside the cache
holds it, its memory owner or its block (checked with stand-ins for pooled device arrays)."""

from types import SimpleNamespace

import pytest

from workbook import outputs


class Block:
    """A pooled block: numba's views of an array count themselves in ``refct``."""

    def __init__(self):
        self.refct = 1


class StandInArray:
    """What the cache reads of a pooled device array: its memory owner and the block."""

    def __init__(self, nbytes=1024):
        self.gpu_data = SimpleNamespace(_mem=Block())
        self.nbytes = nbytes


@pytest.fixture
def pooled(monkeypatch):
    """The pool on (outputs are kept), an empty cache, and a count of arrays made."""
    from workbook import memory

    monkeypatch.setattr(memory, "_active", object())
    monkeypatch.setattr(outputs, "_recyclers", outputs.OrderedDict())
    monkeypatch.setattr(outputs, "_last", [None, None, None])
    made = []

    def make(nbytes=1024):
        def one():
            made.append(StandInArray(nbytes))
            return (made[-1],)

        return one

    return make, made


def test_an_output_the_caller_dropped_is_handed_out_again(pooled):
    make, made = pooled
    first = outputs.recycled_group("k", make())[0]
    second = outputs.recycled_group("k", make())[0]  # the first is still held here
    assert second is not first
    first_id = id(first)
    del first
    third = outputs.recycled_group("k", make())[0]
    assert id(third) == first_id and len(made) == 2


def test_a_loop_that_keeps_only_the_last_output_needs_two_arrays(pooled):
    make, made = pooled
    y = None
    for _ in range(10):
        y = outputs.recycled_group("k", make())[0]
    assert len(made) == 2 and y in made


@pytest.mark.parametrize("hold", ["array", "memory owner", "view", "tuple"])
def test_an_output_held_in_any_way_is_not_handed_out_again(pooled, hold):
    make, made = pooled
    item = outputs.recycled_group("k", make())
    (array,) = item
    kept = {"array": array, "memory owner": array.gpu_data, "tuple": item}.get(hold)
    if hold == "view":
        array.gpu_data._mem.refct += 1  # what a numba view (an OwnedPointer) does
    if hold != "tuple":
        del item
    del array
    again = outputs.recycled_group("k", make())[0]
    assert again is not made[0] and len(made) == 2
    assert kept is not None or hold == "view"


def test_when_every_kept_output_is_held_new_ones_are_made_and_the_oldest_slot_reused(pooled):
    make, made = pooled
    held = [outputs.recycled_group("k", make())[0] for _ in range(outputs.KEEP + 2)]
    assert len(made) == outputs.KEEP + 2 and len({id(a) for a in held}) == outputs.KEEP + 2
    recycler = outputs._recyclers["k"]
    assert [slot[0][0] for slot in recycler.slots] == [held[3], held[4], held[2]]


def test_large_outputs_and_the_simulator_get_new_arrays_every_time(pooled, monkeypatch):
    make, made = pooled
    big = outputs.MAX_ITEM_BYTES + 1
    for _ in range(3):
        outputs.recycled_group("big", make(big))
    assert len(made) == 3 and "big" not in outputs._recyclers
    from workbook import memory

    monkeypatch.setattr(memory, "_active", None)
    for _ in range(3):
        outputs.recycled_group("sim", make())
    assert len(made) == 6


def test_memory_pressure_drops_every_kept_output(pooled):
    from workbook import memory

    make, _ = pooled
    outputs.recycled_group("k", make())
    memory.empty_other_caches()
    assert not outputs._recyclers


def test_few_shapes_are_kept_the_one_used_longest_ago_dropped_first(pooled):
    make, _ = pooled
    for key in range(outputs.MAX_KEYS + 1):
        outputs.recycled_group(key, make())
    assert 0 not in outputs._recyclers and len(outputs._recyclers) == outputs.MAX_KEYS
    outputs.recycled_group(1, make())  # used again: now the last to go
    outputs.recycled_group("new", make())
    assert 1 in outputs._recyclers and 2 not in outputs._recyclers


def test_recycled_in_a_loop_takes_the_last_key_without_looking_it_up(pooled, monkeypatch):
    """recycled(): a loop on one shape reuses two arrays, never one the caller holds; another
    shape in between, memory pressure or a dropped key make it look the key up again."""
    import numpy as np

    from workbook import memory

    made = []

    def empty(shape, dtype):
        made.append(StandInArray())
        return made[-1]

    monkeypatch.setattr(memory, "empty", empty)
    f32 = np.dtype(np.float32)
    held = [outputs.recycled((4, 8), f32) for _ in range(2)]  # both held: two arrays
    y = None
    for _ in range(6):
        y = outputs.recycled((4, 8), f32)
        assert all(y is not h for h in held[-1:])
        held = [y]
    assert len(made) == 3 and outputs._last[2] is outputs._recyclers[((4, 8), f32)]
    other = outputs.recycled((2, 2), f32)  # another key, then back: the cache's arrays again
    again = outputs.recycled((4, 8), f32)
    assert other is not again and again is not y and again in made[:3]
    memory.empty_other_caches()  # memory pressure: nothing kept, no shortcut left
    assert outputs._last == [None, None, None]
    fresh = outputs.recycled((4, 8), f32)
    assert fresh is made[-1] and len(made) == 5
    for k in range(outputs.MAX_KEYS + 1):  # (4, 8) dropped as the oldest key
        outputs.recycled((k + 10,), f32)
    assert ((4, 8), f32) not in outputs._recyclers
    assert outputs.recycled((4, 8), f32) is made[-1]  # made anew, not the dropped arrays


@pytest.mark.gpu
def test_pooled_device_arrays_are_reused_only_when_nothing_holds_them():
    import numpy as np
    from numba import cuda

    from workbook.memory import use_pool

    use_pool()
    try:
        outputs.forget_all()
        shape = (4, 40)
        first = outputs.recycled(shape, np.dtype(np.float32))
        first_id = id(first)
        second = outputs.recycled(shape, np.dtype(np.float32))
        assert second is not first
        del first
        again = outputs.recycled(shape, np.dtype(np.float32))
        assert id(again) == first_id
        view = again[1:]  # a numba view keeps the block: not handed out while it lives
        del again
        assert id(outputs.recycled(shape, np.dtype(np.float32))) != first_id
        del view
        wrapped = cuda.as_cuda_array(outputs.recycled(shape, np.dtype(np.float32)))
        assert id(outputs.recycled(shape, np.dtype(np.float32))) != id(wrapped)
        wrapped.copy_to_device(np.ones(shape, np.float32))
        assert wrapped.copy_to_host().sum() == 160
    finally:
        outputs.forget_all()
        use_pool(False)
