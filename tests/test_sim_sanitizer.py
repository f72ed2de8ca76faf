"""The simulator sanitizer (workbook.sim.sanitizer: racecheck, initcheck, synccheck), and
the grader's compute-sanitizer step for GPU mode (grader.sanitizer).

Every kernel here is tiny and defined at module level (the simulator swaps only
the module-global name ``cuda``). True positives: each bug is reported with the
check's name, the array and element, the threads and the source lines. No false
positives: correct kernels that order their accesses with barriers, warp
collectives or atomics run clean.
"""

import os
import re
import stat
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from gpu_tools import needs_compute_sanitizer
from tool_fixtures import tool_output

import workbook  # noqa: F401  (selects the mode: import it before numba.cuda)
from grader import sanitizer as gpu_sanitizer
from grader.exercises import get as get_exercise
from grader.notebook import load
from grader.results import FAILED, PASSED, ExerciseResult
from workbook.sim import sanitizer
from workbook.sim.global_races import GlobalRaceError, watch
from workbook.sim.sanitizer import BarrierError, RaceError, UninitializedReadError
from workbook.sim.shared_memory import POISON_WORD, poison

# isort: split
from numba import cuda, float32, int32

SIM = pytest.mark.sim_only  # the simulator's sanitizer: skipped on a real GPU

FULL = 0xFFFFFFFF


@pytest.fixture(autouse=True)
def sanitizer_on():
    """Every test starts with the sanitizer on (its default), whatever a test switched."""
    before = sanitizer.is_enabled()
    sanitizer.enable(True)
    yield
    sanitizer.enable(before)


def launch(kernel, grid, block, *args, shared=0):
    kernel[grid, block, 0, shared](*args)


def fails(kernel, grid, block, *args, error=sanitizer.SanitizerError, shared=0):
    """Launch; return the sanitizer's message (the test fails if there is none)."""
    with pytest.raises(error) as info:
        launch(kernel, grid, block, *args, shared=shared)
    return str(info.value)


# ---------------------------------------------------------------------------
# Kernels with bugs


@cuda.jit
def missing_barrier(out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    buf[t] = 2 * t
    out[t] = buf[cuda.blockDim.x - 1 - t]  # another thread wrote it: no barrier in between


@cuda.jit
def write_write(out):
    slot = cuda.shared.array(1, int32)
    slot[0] = cuda.threadIdx.x  # every thread writes the same element
    cuda.syncthreads()
    out[cuda.threadIdx.x] = slot[0]


@cuda.jit
def half_warp_sync(out):
    buf = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    buf[t] = t
    if t < 16:
        cuda.syncwarp(0x0000FFFF)
        out[t] = buf[t + 16]  # lanes 16-31 took no part in this syncwarp
    else:
        cuda.syncwarp(0xFFFF0000)
        out[t] = buf[t]


@cuda.jit
def uninitialised(out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t > 0:
        buf[t] = t
    cuda.syncthreads()
    out[t] = buf[0]  # nobody wrote buf[0]


@cuda.jit
def counter_not_zeroed(out):
    count = cuda.shared.array(1, int32)
    cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    out[cuda.threadIdx.x] = count[0]


@cuda.jit
def first_block_only(out):
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    if cuda.blockIdx.x == 0:
        buf[t] = 7.0
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[t]


@cuda.jit
def dynamic_first_block_only(out):
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    if cuda.blockIdx.x == 0:
        buf[t] = 7.0
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[t]


@cuda.jit
def local_skipped_load(x, out):
    vals = cuda.local.array(4, float32)
    t = cuda.threadIdx.x
    for k in range(4):
        if t * 4 + k < x.size:
            vals[k] = x[t * 4 + k]
    acc = float32(0.0)
    for k in range(4):
        acc += vals[k]  # the elements past the end were never loaded, yet are added
    out[t] = acc


@cuda.jit
def local_index_not_written(out):
    best = cuda.local.array(2, int32)
    best[0] = cuda.threadIdx.x
    out[cuda.threadIdx.x] = best[1]  # nobody wrote best[1]


@cuda.jit
def divergent_barrier(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
        out[t] = 1
    else:
        cuda.syncthreads()
        out[t] = 2


@cuda.jit
def early_return(x, out, n):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t >= n:
        return  # these threads never reach the barrier below
    buf[t] = x[t]
    cuda.syncthreads()
    out[t] = buf[(t + 1) % n]


@cuda.jit
def global_missing_barrier(data):
    t = cuda.threadIdx.x
    data[t] += data[t + 1]  # thread t + 1 writes data[t + 1]


@cuda.jit
def atomic_and_plain_read(out):
    total = cuda.shared.array(1, float32)
    if cuda.threadIdx.x == 0:
        total[0] = 0.0
    cuda.syncthreads()
    cuda.atomic.add(total, 0, 1.0)
    out[cuda.threadIdx.x] = total[0]  # a plain read while others still add


@cuda.jit
def blocks_overwrite(out):
    if cuda.threadIdx.x == 0:
        out[0] = cuda.blockIdx.x


@cuda.jit
def blocks_read_a_neighbour(out, seen):
    b = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        out[b] = b + 1
        if b > 0:
            seen[b] = out[b - 1]  # what another block writes, in the same launch


@cuda.jit
def counter_zeroed_without_a_barrier(count):
    if cuda.threadIdx.x == 0:
        count[0] = 0
    else:
        cuda.atomic.add(count, 0, 1)  # may come before thread 0 zeroes the counter


@cuda.jit
def histogram_without_atomics(keys, bins):
    k = keys[cuda.threadIdx.x]
    bins[k] += 1  # several threads run this on one bin


@cuda.jit
def flag_set_by_every_thread(values, flag):
    if values[cuda.threadIdx.x] > 0:
        flag[0] = 1


# ---------------------------------------------------------------------------
# Correct kernels


@cuda.jit
def tree_sum(x, out):
    partial = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    partial[t] = x[cuda.grid(1)]
    stride = cuda.blockDim.x // 2
    while stride >= 1:
        cuda.syncthreads()
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def own_elements_only(out):
    buf = cuda.shared.array((4, 32), float32)
    t = cuda.threadIdx.x
    for k in range(buf.shape[0]):
        buf[k, t] = k * t
    acc = 0.0
    for k in range(len(buf)):
        acc += buf[k, t] * 2
    out[t] = acc + buf.size + buf[0, t:t + 1].size


@cuda.jit
def local_guarded_load(x, out):
    vals = cuda.local.array(4, float32)
    t = cuda.threadIdx.x
    for k in range(4):
        vals[k] = x[t * 4 + k] if t * 4 + k < x.size else float32(0.0)
    acc = float32(0.0)
    for k in range(4):
        acc += vals[k]
    out[t] = acc


@cuda.jit
def syncwarp_exchange(out):
    buf = cuda.shared.array(64, int32)
    t = cuda.threadIdx.x
    buf[t] = 3 * t + 1
    cuda.syncwarp()
    out[t] = buf[t ^ 1]  # the neighbour is in the same warp
    cuda.syncwarp()
    buf[t] = 0  # overwriting after a second syncwarp is fine too


@cuda.jit
def half_warps(out):
    buf = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    buf[t] = t
    if t < 16:
        cuda.syncwarp(0x0000FFFF)
    else:
        cuda.syncwarp(0xFFFF0000)
    out[t] = buf[t ^ 1]  # the neighbour is in the same half


@cuda.jit
def shuffle_orders(out):
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    buf[t] = t
    v = cuda.shfl_xor_sync(FULL, float32(t), 1)  # every lane takes part: a sync point
    out[t] = buf[(t + 5) % 32] + v


@cuda.jit
def shared_counter(out):
    count = cuda.shared.array(1, int32)
    if cuda.threadIdx.x == 0:
        count[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    out[cuda.threadIdx.x] = count[0]


@cuda.jit
def two_on_one_line(out):
    a, b = cuda.shared.array(32, int32), cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    a[t] = 1
    b[t] = 2
    cuda.syncthreads()
    out[t] = a[t] * 10 + b[(t + 1) % 32]


@cuda.jit
def dynamic_shared(out):
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    buf[t] = t + cuda.blockIdx.x
    cuda.syncthreads()
    out[cuda.grid(1)] = buf[(t + 1) % cuda.blockDim.x]


@cuda.jit(device=True)
def block_max(values):
    t = cuda.threadIdx.x
    stride = cuda.blockDim.x // 2
    while stride >= 1:
        cuda.syncthreads()
        if t < stride:
            values[t] = max(values[t], values[t + stride])
        stride //= 2
    cuda.syncthreads()
    return values[0]


@cuda.jit
def block_max_kernel(x, out):
    values = cuda.shared.array(64, float32)
    values[cuda.threadIdx.x] = x[cuda.grid(1)]
    best = block_max(values)
    out[cuda.grid(1)] = best
    total = cuda.syncthreads_count(1 if x[cuda.grid(1)] > 0 else 0)  # an int, as on a GPU
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, 0, total - total)


@cuda.jit
def atomics_across_blocks(out):
    cuda.atomic.add(out, 0, 1)


# ---------------------------------------------------------------------------
# racecheck


@SIM
def test_missing_barrier_is_a_race():
    message = fails(missing_barrier, 1, 64, np.zeros(64, np.float32), error=RaceError)
    assert "racecheck: data race on shared memory buf[" in message
    assert "missing cuda.syncthreads()?" in message
    assert "block (0, 0, 0)" in message and "(warp 1, lane" in message
    assert "buf[t] = 2 * t" in message and "out[t] = buf[cuda.blockDim.x - 1 - t]" in message
    assert "test_sim_sanitizer.py:" in message  # the source lines, with their file


@SIM
def test_race_within_a_warp_mentions_syncwarp():
    message = fails(missing_barrier, 1, 32, np.zeros(64, np.float32), error=RaceError)
    assert "lanes of one warp" in message and "cuda.syncwarp()" in message


@SIM
def test_two_writes_race():
    message = fails(write_write, 1, 8, np.zeros(8, np.int32), error=RaceError)
    assert "write by thread" in message and "slot[0]" in message


@SIM
def test_syncwarp_orders_only_the_lanes_in_its_mask():
    message = fails(half_warp_sync, 1, 32, np.zeros(32, np.int32), error=RaceError)
    assert "buf[" in message and "lanes of one warp" in message


@SIM
def test_race_on_global_memory_within_a_block():
    data = np.arange(33, dtype=np.float32)
    message = fails(global_missing_barrier, 1, 32, data, error=RaceError)
    assert "data race on global memory data[" in message
    assert "missing cuda.syncthreads()?" in message


@SIM
def test_plain_read_during_atomics_is_a_race():
    message = fails(atomic_and_plain_read, 1, 4, np.zeros(4, np.float32), error=RaceError)
    assert "atomic update by thread" in message and "total[0]" in message


@SIM
def test_blocks_writing_one_watched_element_race():
    out = watch(cuda.to_device(np.zeros(1, np.int32)), "result")
    message = fails(blocks_overwrite, 3, 4, out, error=GlobalRaceError)
    assert "data race on result[0] between blocks" in message
    assert "no barrier can help" in message and "cuda.atomic" in message


# The hint follows from the kind of race (sanitizer.race_hint, global_races).


@SIM
def test_a_block_reading_what_another_writes_is_told_to_use_a_second_launch():
    out = watch(cuda.to_device(np.zeros(3, np.int32)), "partials")
    message = fails(blocks_read_a_neighbour, 3, 4, out, np.zeros(3, np.int32),
                    error=GlobalRaceError)
    assert "data race on partials[0] between blocks" in message
    assert "no barrier can help" in message and "second kernel launch" in message


@SIM
def test_a_missing_barrier_between_a_write_and_a_read_is_told_so():
    message = fails(missing_barrier, 1, 64, np.zeros(64, np.float32), error=RaceError)
    assert ("missing cuda.syncthreads()? The write and the read can come in either order: "
            "put a cuda.syncthreads() between the two statements") in message


@SIM
def test_a_counter_zeroed_without_a_barrier_wants_a_barrier():
    message = fails(counter_zeroed_without_a_barrier, 1, 8, np.zeros(1, np.int32),
                    error=RaceError)
    assert "missing cuda.syncthreads()?" in message and "An atomic and a plain access" in message


@SIM
def test_a_plain_read_modify_write_by_many_threads_wants_an_atomic():
    keys = np.array([0, 1, 0, 2, 0, 1, 2, 0], np.int32)
    message = fails(histogram_without_atomics, 1, 8, keys, np.zeros(3, np.int32),
                    error=RaceError)
    assert "both threads run the same read-modify-write of bins[" in message
    assert "cuda.atomic.add for +=" in message and "missing cuda.syncthreads()" not in message


@SIM
def test_a_flag_set_by_many_threads_is_named_benign_in_practice():
    message = fails(flag_set_by_every_thread, 1, 8, np.ones(8, np.int32),
                    np.zeros(1, np.int32), error=RaceError)
    assert "both threads store to flag[0] in the same statement" in message
    assert "right on a GPU in practice" in message and "missing cuda.syncthreads()" not in message


def _two_lines():
    first = 1  # the site of the read-modify-write
    second = 2  # the site of the later reads
    return first + second


class _LoggedThread:
    def __init__(self, thread_id):
        self.thread_id = thread_id


def test_a_writer_that_reads_again_is_not_taken_for_a_read_modify_write_of_the_reader():
    """Thread 0 runs ``s[0] += ...`` and later reads ``s[0]`` at the statement where thread 3
    reads it, with no barrier: a missing barrier, not one read-modify-write run by both.
    The writer's later read must not stand in for the read of its read-modify-write (the
    interleaving that made a missing barrier in lesson 02's tree read as an atomic's job).
    Driven through the access log directly: the order of the accesses is the test's."""
    import dis
    from types import SimpleNamespace

    code = _two_lines.__code__
    offsets = {}
    for instruction in dis.get_instructions(code):
        offsets.setdefault(instruction.positions.lineno, instruction.offset)
    first_line = code.co_firstlineno + 1
    rmw_site = sanitizer.site_id(code, offsets[first_line])
    later_site = sanitizer.site_id(code, offsets[first_line + 1])
    block = sanitizer._Block(SimpleNamespace(_block_dim=(32,)), (0, 0, 0))
    memory, array = sanitizer.Memory(), np.zeros(1, np.int32)
    writer, reader = _LoggedThread(0), _LoggedThread(3)

    def access(thread, kind, site):
        sanitizer.access(thread, block, 0, kind, site, memory, array, 0)

    access(writer, sanitizer.READ, rmw_site)
    access(writer, sanitizer.WRITE, rmw_site)
    access(writer, sanitizer.READ, later_site)
    with pytest.raises(RaceError) as caught:
        access(reader, sanitizer.READ, later_site)
    message = str(caught.value)
    assert "missing cuda.syncthreads()?" in message, message
    assert "same read-modify-write" not in message, message


# ---------------------------------------------------------------------------
# initcheck, fresh shared memory


@SIM
@cuda.jit
def uninitialised_then_out_of_range(out, index):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t > 0:
        buf[t] = t
    cuda.syncthreads()
    value = buf[0]  # nobody wrote buf[0]
    out[index if t == 5 else t] = value  # thread 5 writes out of range


def test_an_error_after_an_uninitialised_read_is_reported_as_that_read(monkeypatch):
    """The thread that fails is reported once the sanitizer has named the never-written read
    that came first, however long that takes (here made slow on purpose): the block's
    scheduler must not raise the thread's own error in the meantime."""
    import time

    slow = sanitizer._uninitialised

    def slowly(*args, **kwargs):
        time.sleep(0.2)
        return slow(*args, **kwargs)

    monkeypatch.setattr(sanitizer, "_uninitialised", slowly)
    message = fails(uninitialised_then_out_of_range, 1, 64, np.zeros(64, np.float32), 1000,
                    error=UninitializedReadError)
    assert "read of uninitialised shared memory buf[0]" in message
    assert "afterwards" in message


def test_uninitialised_shared_read():
    message = fails(uninitialised, 1, 64, np.zeros(64, np.float32),
                    error=UninitializedReadError)
    assert "initcheck: read of uninitialised shared memory buf[0]" in message
    assert "out[t] = buf[0]" in message
    assert "cuda.shared.array declared at" in message


@SIM
def test_atomic_on_a_counter_nobody_zeroed():
    message = fails(counter_not_zeroed, 1, 8, np.zeros(8, np.int32),
                    error=UninitializedReadError)
    assert "count[0]" in message and "atomic update by thread" in message


@SIM
def test_every_block_gets_fresh_shared_memory():
    out = np.zeros(64, np.float32)
    message = fails(first_block_only, 2, 32, out, error=UninitializedReadError)
    assert "block (1, 0, 0)" in message


@SIM
def test_plain_simulator_keeps_shared_memory_from_block_to_block():
    out = np.zeros(64, np.float32)
    with sanitizer.disabled():
        launch(first_block_only, 2, 32, out)
    assert (out == 7.0).all()  # what the sanitizer is there to catch


@SIM
def test_dynamic_shared_memory_is_fresh_per_block():
    message = fails(dynamic_first_block_only, 2, 32, np.zeros(64, np.float32), shared=128,
                    error=UninitializedReadError)
    assert "block (1, 0, 0)" in message and "buf[" in message


@SIM
def test_local_array_elements_never_written_are_poisoned():
    x = np.arange(1, 11, dtype=np.float32)  # 10 values for 3 threads of 4: two are missing
    out = np.zeros(3, np.float32)
    launch(local_skipped_load, 1, 3, x, out)
    np.testing.assert_array_equal(out[:2], [10.0, 26.0])
    assert np.isnan(out[2])  # x[8] + x[9] + two elements the thread never loaded
    ints = np.zeros(4, np.int32)
    launch(local_index_not_written, 1, 4, ints)
    assert (ints == POISON_WORD).all()


@SIM
def test_local_arrays_written_before_their_reads_are_clean():
    x = np.arange(1, 11, dtype=np.float32)
    out = np.zeros(3, np.float32)
    launch(local_guarded_load, 1, 3, x, out)
    np.testing.assert_array_equal(out, [10.0, 26.0, 19.0])


@SIM
def test_poison_values():
    assert np.isnan(poison(np.zeros(3, np.float32))).all()
    assert np.isnan(poison(np.zeros(2, np.complex64))).all()
    assert (poison(np.zeros(3, np.int32)) == POISON_WORD).all()
    assert (poison(np.zeros(2, np.uint16)) == 0xBEEF).all()
    assert (poison(np.zeros(2, np.uint64)) == 0x7FADBEEF7FADBEEF).all()


# ---------------------------------------------------------------------------
# synccheck


@SIM
def test_divergent_barrier():
    message = fails(divergent_barrier, 1, 32, np.zeros(32, np.int32), error=BarrierError)
    assert "synccheck: divergent cuda.syncthreads()" in message
    assert message.count("cuda.syncthreads()\n") >= 2  # both call sites are shown


@SIM
def test_thread_returning_before_a_barrier_others_reach():
    x = np.arange(32, dtype=np.float32)
    message = fails(early_return, 1, 32, x, np.zeros(32, np.float32), 20,
                    error=BarrierError)
    assert "synccheck:" in message and "returned after 0 cuda.syncthreads()" in message
    assert "waits at cuda.syncthreads() number 1" in message


@SIM
def test_early_return_is_fine_when_nobody_waits():
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    launch(early_return, 1, 32, x, out, 32)  # n = blockDim: nobody returns early
    assert (out == np.roll(x, -1)).all()


# ---------------------------------------------------------------------------
# No false positives


@SIM
def test_tree_reduction_with_barriers():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(2, np.float32)
    launch(tree_sum, 2, 64, x, out)
    assert list(out) == [x[:64].sum(), x[64:].sum()]


@SIM
def test_each_thread_reading_what_it_wrote():
    out = np.zeros(32, np.float32)
    launch(own_elements_only, 1, 32, out)
    t = np.arange(32)
    assert (out == 2 * t * (0 + 1 + 2 + 3) + 128 + 1).all()


@SIM
def test_syncwarp_orders_lanes_of_a_warp():
    out = np.zeros(64, np.int32)
    launch(syncwarp_exchange, 1, 64, out)
    assert (out == 3 * (np.arange(64) ^ 1) + 1).all()


@SIM
def test_syncwarp_with_a_partial_mask():
    out = np.zeros(32, np.int32)
    launch(half_warps, 1, 32, out)
    assert (out == np.arange(32) ^ 1).all()


@SIM
def test_shuffles_synchronise_the_lanes():
    out = np.zeros(32, np.float32)
    launch(shuffle_orders, 1, 32, out)
    t = np.arange(32)
    assert (out == (t + 5) % 32 + (t ^ 1)).all()


@SIM
def test_atomics_on_shared_memory():
    out = np.zeros(40, np.int32)
    launch(shared_counter, 1, 40, out)
    assert (out == 40).all()


@SIM
def test_atomics_from_many_blocks_on_a_watched_array():
    out = watch(cuda.to_device(np.zeros(1, np.int32)))
    launch(atomics_across_blocks, 3, 8, out)
    assert out.copy_to_host()[0] == 24


@SIM
def test_arrays_declared_on_one_line_do_not_alias():
    out = np.zeros(32, np.int32)
    launch(two_on_one_line, 1, 32, out)
    assert (out == 12).all()


@SIM
def test_dynamic_shared_memory():
    out = np.zeros(64, np.float32)
    launch(dynamic_shared, 2, 32, out, shared=32 * 4)
    t = np.arange(32)
    assert (out == np.concatenate([(t + 1) % 32, (t + 1) % 32 + 1])).all()


@SIM
def test_barriers_in_a_device_function_and_syncthreads_count():
    x = np.random.default_rng(0).standard_normal(128).astype(np.float32)
    out = np.zeros(128, np.float32)
    launch(block_max_kernel, 2, 64, x, out)
    assert (out[1:64] == x[:64].max()).all() and (out[65:] == x[64:].max()).all()


# ---------------------------------------------------------------------------
# The switch


@SIM
def test_switched_off_the_plain_simulator_runs():
    out = np.zeros(64, np.float32)
    with sanitizer.disabled():
        assert not sanitizer.is_enabled()
        launch(missing_barrier, 1, 64, out)  # the plain simulator does not notice
    assert sanitizer.is_enabled()
    sanitizer.enable(False)
    launch(uninitialised, 1, 64, out)
    sanitizer.enable(True)
    fails(uninitialised, 1, 64, out, error=UninitializedReadError)


@pytest.mark.parametrize("value,on", [(None, True), ("1", True), ("0", False),
                                      ("off", False), ("no", False), ("yes", True)])
def test_environment_variable(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(sanitizer.ENV, raising=False)
    else:
        monkeypatch.setenv(sanitizer.ENV, value)
    assert sanitizer._from_env() is on


# ---------------------------------------------------------------------------
# GPU mode: the grader's compute-sanitizer step (grader.sanitizer)

# compute-sanitizer's output for lesson 02's cases (tests/fixtures/tools, see tool_fixtures)
RACECHECK_OUTPUT = tool_output("racecheck-shared-barrier-removed")
MEMCHECK_OUTPUT = tool_output("memcheck-simple-tree-one-level-too-deep")
CLEAN_OUTPUT = tool_output("synccheck-segmented-solution")


def test_parse_racecheck_report():
    finding = gpu_sanitizer.parse("racecheck", RACECHECK_OUTPUT, 99)
    assert finding.errors >= 1
    first, *others = finding.lines
    assert re.match(r"Error: Race reported between (Read|Write) access at "
                    r"__main__::shared_sum_kernel\+0x[0-9a-f]+\b", first), first
    assert others and all(re.match(r"and (Read|Write) access at __main__::shared_sum_kernel"
                                   r"\+0x[0-9a-f]+\b.* \[\d+ hazards?\]$", line)
                          for line in others)
    message = finding.message()
    assert f"racecheck: {finding.errors} error(s)" in message
    assert "missing cuda.syncthreads()?" in message


def test_parse_memcheck_report_skips_host_frames():
    finding = gpu_sanitizer.parse("memcheck", MEMCHECK_OUTPUT, 99)
    assert finding.errors >= 1
    assert finding.lines[0] == "Invalid __global__ read of size 4 bytes"
    assert re.match(r"at __main__::simple_sum_kernel\+0x[0-9a-f]+\b", finding.lines[1])
    assert any(re.fullmatch(r"by thread \(\d+,\d+,\d+\) in block \(\d+,\d+,\d+\)", line)
               for line in finding.lines)
    assert any(line.endswith("is out of bounds") for line in finding.lines)
    assert not any("Host Frame" in line or "backtrace" in line for line in finding.lines)
    assert "bounds check" in finding.message()


def test_numba_kernel_names_are_shortened():
    line = ("Error: Race reported between Read access at __main__::shared_sum_kernel[abi:v1,"
            "cw51cXTLSUwv1sDUaKth_3d_3d](Array<float, (int)1, C, mutable, aligned>, "
            "Array<float, (int)1, C, mutable, aligned>)+0x3a0")
    assert gpu_sanitizer.tidy(line) == ("Error: Race reported between Read access at "
                                        "__main__::shared_sum_kernel+0x3a0")
    assert gpu_sanitizer.tidy("by thread (0,0,0) in block (0,0,0)") == (
        "by thread (0,0,0) in block (0,0,0)")


def test_parse_clean_and_broken_runs():
    assert gpu_sanitizer.parse("synccheck", CLEAN_OUTPUT, 0).errors == 0
    broken = gpu_sanitizer.parse("memcheck", "Segmentation fault\n", -11)
    assert broken.errors is None and "not assessed" in broken.message()


def _result(status=PASSED):
    return ExerciseResult(id="reduction.shared", title="t", status=status, score=1.0,
                          max_score=1.0, messages=["all 8 tests passed (gpu mode)"], mode="gpu")


@pytest.fixture
def fake_tool(tmp_path, monkeypatch):
    """A stand-in compute-sanitizer on PATH that prints ``output`` and exits with ``code``."""
    def install(output: str, code: int):
        (tmp_path / "out.txt").write_text(output)
        tool = tmp_path / "compute-sanitizer"
        tool.write_text(f"#!/bin/sh\ncat {tmp_path / 'out.txt'}\nexit {code}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return install


def test_a_tool_error_fails_the_exercise(fake_tool, monkeypatch):
    fake_tool(RACECHECK_OUTPUT, 99)
    monkeypatch.setenv(gpu_sanitizer.TOOLS_ENV, "racecheck")
    result = _result()
    gpu_sanitizer.apply_sanitizers(result, get_exercise("reduction.shared"), [], "gpu", 30)
    assert result.status == FAILED and result.score == 0
    assert re.search(r"compute-sanitizer racecheck: [1-9]\d* error\(s\)", result.summary())


def test_clean_tools_keep_the_result(fake_tool, monkeypatch):
    fake_tool(CLEAN_OUTPUT, 0)
    monkeypatch.delenv(gpu_sanitizer.TOOLS_ENV, raising=False)
    monkeypatch.delenv(gpu_sanitizer.SWITCH_ENV, raising=False)
    result = _result()
    findings = gpu_sanitizer.apply_sanitizers(result, get_exercise("reduction.shared"), [],
                                              "gpu", 30)
    assert [f.tool for f in findings] == list(gpu_sanitizer.TOOLS)
    assert result.status == PASSED
    assert "compute-sanitizer: no errors (memcheck, racecheck, synccheck)" in result.messages


def test_without_compute_sanitizer_the_checks_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("CUDA_HOME", "CUDA_PATH", gpu_sanitizer.SWITCH_ENV, gpu_sanitizer.TOOLS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(gpu_sanitizer, "FALLBACK_PATHS", ())
    result = _result()
    gpu_sanitizer.apply_sanitizers(result, get_exercise("reduction.shared"), [], "gpu", 30)
    assert result.status == PASSED
    assert "compute-sanitizer: not found" in result.summary()


def test_no_tool_runs_in_simulator_mode_or_when_switched_off(fake_tool, monkeypatch):
    fake_tool(RACECHECK_OUTPUT, 99)
    result = _result()
    assert gpu_sanitizer.apply_sanitizers(result, get_exercise("reduction.shared"), [], "sim",
                                          30) == []
    monkeypatch.setenv(gpu_sanitizer.SWITCH_ENV, "0")
    assert gpu_sanitizer.apply_sanitizers(result, get_exercise("reduction.shared"), [], "gpu",
                                          30) == []
    assert result.status == PASSED and len(result.messages) == 1


def test_tool_selection(monkeypatch):
    monkeypatch.delenv(gpu_sanitizer.SWITCH_ENV, raising=False)
    monkeypatch.setenv(gpu_sanitizer.TOOLS_ENV, "racecheck, memcheck")
    assert gpu_sanitizer.selected_tools() == ("racecheck", "memcheck")
    monkeypatch.setenv(gpu_sanitizer.TOOLS_ENV, "")
    assert gpu_sanitizer.selected_tools() == ()
    monkeypatch.setenv(gpu_sanitizer.TOOLS_ENV, "initcheck")
    with pytest.raises(ValueError, match="unknown tool"):
        gpu_sanitizer.selected_tools()


def test_tools_run_the_small_cases_only():
    exercise = get_exercise("reduction.segmented")
    small = gpu_sanitizer.small_cases(exercise, "gpu")
    sizes = [c.size for c in small.cases_for("gpu")]
    assert sizes and max(sizes) <= gpu_sanitizer.MAX_SIZE
    assert len(sizes) < len(exercise.cases_for("gpu"))
    assert small.cases_for("sim") == exercise.cases_for("sim")


@pytest.mark.gpu
@needs_compute_sanitizer
def test_compute_sanitizer_catches_a_missing_barrier():
    """On a GPU with compute-sanitizer: racecheck flags lesson 02's shared-memory reduce
    without its barrier, and passes the solution."""
    tool = gpu_sanitizer.find_tool()
    root = Path(__file__).resolve().parents[1]
    notebook = load(next((root / "solutions" / "02_reduction").glob("*.ipynb")))
    exercise = get_exercise("reduction.shared")
    cells = [asdict(c) for c in notebook.program_for(exercise.id)]
    assert gpu_sanitizer.run_tool(tool, "racecheck", exercise, cells, 600).errors == 0
    for cell in cells:
        if cell["exercise_id"] == exercise.id:
            cell["source"] = cell["source"].replace("        cuda.syncthreads()\n", "")
    finding = gpu_sanitizer.run_tool(tool, "racecheck", exercise, cells, 600)
    assert finding.errors, finding.message()


# ---------------------------------------------------------------------------
# Warp-shuffle block reduction: a shuffle orders the lanes of one warp only


@cuda.jit(device=True)
def _warp_total(value):
    """Sum over the lanes of the caller's warp, which may be the block's partial last warp."""
    lane = cuda.threadIdx.x % 32
    width = min(32, cuda.blockDim.x - (cuda.threadIdx.x - lane))
    mask = FULL >> (32 - width)
    for offset in (16, 8, 4, 2, 1):
        other = cuda.shfl_down_sync(mask, value, offset)
        if lane + offset < width:
            value += other
    return value


@cuda.jit
def shuffle_block_sum(x, out, barrier):
    """Each warp sums with shuffles, lane 0 stores its warp's total, warp 0 sums the totals."""
    totals = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    value = _warp_total(x[t] if t < x.shape[0] else float32(0))
    if t % 32 == 0:
        totals[t // 32] = value
    if barrier:
        cuda.syncthreads()
    if t < 32:
        warps = (cuda.blockDim.x + 31) // 32
        value = _warp_total(totals[t] if t < warps else float32(0))
        if t == 0:
            out[0] = value


@cuda.jit
def shuffle_block_sum_syncwarp(x, out, barrier):
    """Totals read by every lane of warp 0 after a syncwarp (which orders warp 0's lanes,
    not the other warps' writes)."""
    totals = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    value = _warp_total(x[t] if t < x.shape[0] else float32(0))
    if t % 32 == 0:
        totals[t // 32] = value
    cuda.syncwarp()
    if barrier:
        cuda.syncthreads()
    if t < 32:
        value = float32(0)
        for w in range((cuda.blockDim.x + 31) // 32):
            value += totals[w]
        if t == 0:
            out[0] = value


BLOCK_SIZES = [32, 64, 100, 256, 1024]  # 100: a partial last warp


def _wait_for_aborted_threads(running: int, timeout: float = 30.0) -> None:
    """After a failed launch the simulator returns before the block's other threads have
    stopped; let them stop, or they run on into the next test's launch."""
    deadline = time.monotonic() + timeout
    while threading.active_count() > running and time.monotonic() < deadline:
        time.sleep(0.01)


@SIM
@pytest.mark.parametrize("kernel", [shuffle_block_sum, shuffle_block_sum_syncwarp])
@pytest.mark.parametrize("threads", BLOCK_SIZES)
def test_warp_totals_read_by_another_warp_need_a_barrier(kernel, threads):
    x = np.ones(threads, np.float32)
    out = np.zeros(1, np.float32)
    if threads == 32:  # one warp: shuffles and syncwarp order its lanes; no barrier needed
        launch(kernel, 1, threads, x, out, False)
        assert out[0] == threads
        return
    running = threading.active_count()
    message = fails(kernel, 1, threads, x, out, False, error=RaceError)
    _wait_for_aborted_threads(running)
    assert "data race on shared memory totals[" in message
    assert "(warp 0, lane " in message and "missing cuda.syncthreads()?" in message


@pytest.mark.parametrize("kernel", [shuffle_block_sum, shuffle_block_sum_syncwarp])
@pytest.mark.parametrize("threads", BLOCK_SIZES)
def test_warp_totals_after_a_barrier_are_clean(kernel, threads):
    x = np.arange(threads, dtype=np.float32) % 7
    out = np.zeros(1, np.float32)
    launch(kernel, 1, threads, x, out, True)
    assert out[0] == x.sum()
