"""The profile functions' warm-up launches stay outside ncu's profiled range: ``unprofiled``
stops the range only inside a profiled segment, every profile function makes its warm-up
there, and the launch measured now (``profile_skip`` launches into the range) is the one
measured when the warm-ups were profiled too. The launches inside the range are recorded by
name (``grader.profiled_range.recorded_launches``), through numba's launch and a prepared launch's
driver call alike, and a profile job's segment events carry them."""

import ctypes
import json
from types import SimpleNamespace

import pytest
from solution_cells import namespace_with

from grader import launch as L
from grader import profiled_range as R
from grader import runner
from grader.exercises import LESSONS
from grader.exercises.reduction import profiles as reduction_profiles
from grader.profiling import WARM_UPS_PROFILED_SKIP, profiled_kernels

H100_SMS = 132


@pytest.fixture
def range_calls(monkeypatch):
    """numba's profile_start, profile_stop and synchronize, recorded in order (the simulator
    has no profile_start or profile_stop)."""
    calls = []
    cuda = L.cuda()
    monkeypatch.setattr(cuda, "profile_start", lambda: calls.append("start"), raising=False)
    monkeypatch.setattr(cuda, "profile_stop", lambda: calls.append("stop"), raising=False)
    monkeypatch.setattr(cuda, "synchronize", lambda: calls.append("sync"))
    return calls


def test_unprofiled_does_nothing_outside_a_profiled_segment(range_calls):
    with R.unprofiled():
        range_calls.append("warm-up")
        assert not R.in_profiled_range()
    assert range_calls == ["warm-up"]


def test_unprofiled_leaves_the_range_of_a_profiled_segment_and_comes_back(range_calls):
    with R.profiled_segment():
        assert R.in_profiled_range()
        with R.unprofiled():
            assert not R.in_profiled_range()
            with R.unprofiled():  # already outside: nothing more
                range_calls.append("warm-up")
        assert R.in_profiled_range()
        range_calls.append("measured")
    assert not R.in_profiled_range()
    assert range_calls == ["start", "sync", "stop", "warm-up", "sync", "start", "measured",
                           "stop"]


def test_a_warm_up_that_raises_restarts_the_range_and_closes_the_segment(range_calls):
    with pytest.raises(ValueError), R.profiled_segment(), R.unprofiled():
        raise ValueError("no kernel")
    assert range_calls == ["start", "sync", "stop", "start", "stop"]
    assert not R.in_profiled_range()
    with R.unprofiled():  # the segment is closed: nothing
        pass
    assert range_calls[-1] == "stop" and len(range_calls) == 5


def test_the_runner_s_profiled_segment_leaves_the_range_for_the_warm_up(range_calls):
    def profile(ns):
        with R.unprofiled():
            range_calls.append(("warm-up", R.in_profiled_range()))
        range_calls.append(("measured", R.in_profiled_range()))

    runner._profiled_segment(SimpleNamespace(profile=profile), {})
    assert range_calls == ["start", "sync", "stop", ("warm-up", False), "sync", "start",
                           ("measured", True), "sync", "stop"]
    range_calls.clear()  # a marked segment: the marker first, inside the range

    class Marker:
        def __getitem__(self, configuration):
            return lambda *args: range_calls.append(("marker", R.in_profiled_range()))

    runner._profiled_segment(SimpleNamespace(profile=profile), {}, Marker())
    assert range_calls == ["start", ("marker", True), "sync", "stop", ("warm-up", False),
                           "sync", "start", ("measured", True), "sync", "stop"]


# --- every exercise's profile function, its kernels recorded instead of run --------------------

PROFILED = [e for lesson in sorted(LESSONS) for e in LESSONS[lesson] if e.profile is not None]


@pytest.fixture
def recorded_launches(monkeypatch, range_calls):
    """Every kernel launch in the simulator, as ``(kernel name, threads, in the range)``,
    recorded without running it: the profile functions at their GPU sizes."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    launches = []

    def record(kernel, *args):
        if kernel._device:  # a device function called by a kernel (not run here)
            return kernel.fn(*args)
        grid, block = kernel.grid_dim, kernel.block_dim
        threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
        launches.append((kernel.__name__, threads, R.in_profiled_range()))

    monkeypatch.setattr(FakeCUDAKernel, "__call__", record)
    monkeypatch.setattr(reduction_profiles, "_sms", lambda: H100_SMS)
    yield launches
    L.forget_built()  # the inputs at GPU sizes


@pytest.fixture
def driver_launches(monkeypatch, recorded_launches):
    """:func:`recorded_launches`, where a prepared launch (``workbook.launch.prepare``) takes
    its own driver call as on a GPU: ``cuLaunchKernel`` records the launch (as
    ``(kernel name, threads, in the range, "driver")``) instead of making it."""
    import workbook.launch as W
    import workbook.occupancy

    def compiled(kernel, args):
        cufunc = SimpleNamespace(handle=kernel.__name__)  # the handle: the kernel's name
        return SimpleNamespace(argument_types=[None] * len(args),
                               _codelibrary=SimpleNamespace(get_cufunc=lambda: cufunc))

    def packer(numba_type):
        return SimpleNamespace(slots=[ctypes.c_int64()], accepts=lambda value: True,
                               take=lambda value: True)

    def cu_launch_kernel(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        recorded_launches.append((handle, gx * gy * gz * bx * by * bz, R.in_profiled_range(),
                                  "driver"))
        return (0,)

    monkeypatch.setattr(W, "current_mode", lambda: "gpu")
    monkeypatch.setattr(workbook.occupancy, "compiled", compiled)
    monkeypatch.setattr(W, "_packer", packer)
    monkeypatch.setattr(W, "_function_handle", lambda handle: handle)
    monkeypatch.setattr(W, "_driver_launch_function", lambda: cu_launch_kernel)
    return recorded_launches


@pytest.mark.sim_only
@pytest.mark.parametrize("exercise", PROFILED, ids=lambda e: e.id)
def test_the_warm_ups_are_unprofiled_and_the_same_launch_is_measured(exercise,
                                                                     recorded_launches):
    ns = namespace_with(exercise.lesson, exercise.id)
    with R.profiled_segment():
        exercise.profile(ns)
    matching = [launch for launch in recorded_launches
                if launch[0] in profiled_kernels(exercise)]
    warm_ups = [launch for launch in matching if not launch[2]]
    inside = [launch for launch in matching if launch[2]]
    assert warm_ups and matching[:len(warm_ups)] == warm_ups, matching  # warm-ups come first
    assert len(inside) > exercise.profile_skip, matching
    measured = inside[exercise.profile_skip]
    # the launch a report with the warm-ups inside the range gave (the same launch)
    before = [launch is measured for launch in matching].index(True)
    assert before == WARM_UPS_PROFILED_SKIP, matching
    assert measured[1] == max(threads for _, threads, _ in matching), matching  # the GPU size


@pytest.mark.sim_only
def test_outside_a_segment_every_launch_of_a_profile_function_is_unprofiled(recorded_launches):
    (exercise,) = [e for e in PROFILED if e.id == "reduction.shared"]
    exercise.profile(namespace_with(exercise.lesson, exercise.id))
    assert [in_range for _, _, in_range in recorded_launches] == [False, False]


def test_a_reference_profile_cached_with_the_warm_ups_profiled_is_not_reused(monkeypatch):
    """The cache key names how the warm-ups are made: a key of another way is another key."""
    from grader import reference_profiles

    (exercise,) = [e for e in PROFILED if e.id == "reduction.shared"]
    cells = [{"role": "exercise", "exercise_id": exercise.id, "source": "x = 1"}]

    def key():
        return reference_profiles.profile_key(exercise, ["m.sum"], cells, "GPU cc9.0")

    today = key()
    assert reference_profiles.WARM_UPS == R.WARM_UPS == "unprofiled"
    monkeypatch.setattr(reference_profiles, "WARM_UPS", "profiled")
    assert key() != today


def test_a_reference_profile_is_cached_under_the_way_its_segments_are_told_apart(tmp_path,
                                                                               monkeypatch):
    """The key names how the report's segments are told apart: a named run and a marked one
    (with a marker kernel launched in the range) look up different keys."""
    from grader import reference_profiles

    (exercise,) = [e for e in PROFILED if e.id == "reduction.shared"]
    cells = [{"role": "exercise", "exercise_id": exercise.id, "source": "x = 1"}]

    def key(*segments):
        return reference_profiles.profile_key(exercise, ["m.sum"], cells, "GPU cc9.0", *segments)

    assert key() == key(R.RECORDED_SEGMENTS) != key(R.MARKED_SEGMENTS)
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(reference_profiles, "gpu_identity", lambda: "GPU cc9.0")
    offered = []
    for markers in (False, True):
        events = SimpleNamespace(emit=lambda **event: offered.append(event["store_as"][2]))
        program = runner.Program(cells)
        assert not runner._stored_reference(exercise, program, "GPU cc9.0", events, markers)
    metrics = sorted({rule.metric for rule in exercise.metric_rules})
    assert offered == [reference_profiles.profile_key(exercise, metrics, cells, "GPU cc9.0",
                                                      segments)
                       for segments in (R.RECORDED_SEGMENTS, R.MARKED_SEGMENTS)]


@pytest.mark.sim_only
@pytest.mark.parametrize("path", ["numba", "driver"])
@pytest.mark.parametrize("exercise", PROFILED, ids=lambda e: e.id)
def test_the_launches_in_the_range_are_recorded_by_name(exercise, path, request):
    """What ncu sees of a profile function (its launches in the range, through numba's launch
    or, with ``driver``, a prepared launch's own driver call as on a GPU) is what the recorder
    names; the measured launch is among the kernels of ncu's filter, ``profile_skip`` of the
    exercise's kernels before it."""
    from grader.ncu import profiled_names
    from grader.profiling import ncu_kernels

    launches = request.getfixturevalue("driver_launches" if path == "driver"
                                       else "recorded_launches")
    ns = namespace_with(exercise.lesson, exercise.id)
    with R.profiled_segment(), R.recorded_launches() as names:
        exercise.profile(ns)
    assert names == [launch[0] for launch in launches if launch[2]], launches
    kernels = profiled_names(names, ncu_kernels(LESSONS[exercise.lesson]))
    mine = [name for name in kernels if name in profiled_kernels(exercise)]
    assert len(mine) > exercise.profile_skip, (names, kernels)


@pytest.mark.sim_only
def test_softmax_gpu_launches_through_the_driver_in_the_range(driver_launches):
    """The driver variant above is no copy of the numba one: lesson 03's softmax_gpu makes
    its measured launch through a prepared launch's driver call."""
    (exercise,) = [e for e in PROFILED if e.id == "softmax.dispatch"]
    with R.profiled_segment(), R.recorded_launches() as names:
        exercise.profile(namespace_with(exercise.lesson, exercise.id))
    inside = [launch for launch in driver_launches if launch[2]]
    assert inside and all(launch[3:] == ("driver",) for launch in inside), driver_launches
    assert names == [launch[0] for launch in inside]


def test_the_recorder_leaves_no_hook_behind():
    """The launch paths of this mode are wrapped inside the block only, even one that raised."""
    from workbook.launch import _DriverLaunch

    if L.cuda().config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel as numba_path

        name = "__call__"
    else:
        from numba.cuda.dispatcher import _Kernel as numba_path

        name = "launch"
    before = getattr(numba_path, name), _DriverLaunch.try_launch
    with pytest.raises(ValueError), R.recorded_launches():
        assert getattr(numba_path, name) is not before[0]
        assert _DriverLaunch.try_launch is not before[1]
        raise ValueError("a segment that raised")
    assert (getattr(numba_path, name), _DriverLaunch.try_launch) == before
    assert "try_launch" in vars(_DriverLaunch) and name in vars(numba_path)


# --- a profile job's segment events: the kernels launched in the range, by name ------------------

KERNELS = """
from numba import cuda


@cuda.jit(device=True)
def twice(v):
    return 2 * v


@cuda.jit
def measured_kernel(out):
    out[0] = twice(out[0])


@cuda.jit
def helper_kernel(out):
    out[0] += 1
"""


def job_exercise(exercise_id: str, profile_skip: int = 0):
    """A stand-in exercise whose profile function launches ``measured_kernel`` once outside
    the range (a warm-up) and twice inside, with ``helper_kernel`` between."""
    import numpy as np

    def profile(ns):
        out = L.cuda().to_device(np.zeros(1, np.float32))
        with R.unprofiled():
            ns["measured_kernel"][1, 1](out)
        ns["measured_kernel"][1, 1](out)
        ns["helper_kernel"][1, 1](out)
        ns["measured_kernel"][1, 1](out)

    return SimpleNamespace(id=exercise_id, entry="measured_kernel", needs=(), profile=profile,
                           profile_kernels=(), profile_skip=profile_skip, metric_rules=())


def run_profile_job(tmp_path, monkeypatch, **job) -> list[dict]:
    """A profile job of two stand-in exercises over one program; its events (in a file of
    ``tmp_path`` of its own)."""
    exercises = {"x.first": job_exercise("x.first"), "x.second": job_exercise("x.second", 1)}
    monkeypatch.setattr("grader.exercises.get", exercises.__getitem__)
    cells = [{"index": 0, "role": "setup", "exercise_id": None, "source": KERNELS},
             *({"index": k, "role": "exercise", "exercise_id": exercise_id, "source": "pass"}
               for k, exercise_id in enumerate(exercises, 1))]
    path = tmp_path / f"events-{len(list(tmp_path.iterdir()))}.jsonl"
    events = runner.Events(str(path))
    runner.profile_job({"mode": "sim", "action": "profile", "exercise_ids": list(exercises),
                        "programs": [["student", None, cells]], **job}, events)
    events.file.close()
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.sim_only
def test_a_profile_job_names_the_kernels_each_segment_launched_in_the_range(tmp_path,
                                                                            monkeypatch,
                                                                            range_calls):
    """Only the launches inside the range are named: not the warm-ups, not the first pass's
    (unprofiled) launches; with the job's kernels (ncu's filter), only those of the filter."""
    events = run_profile_job(tmp_path, monkeypatch)
    assert [e["segment"] for e in events if "segment" in e] == [
        ["x.first", "student", 0, ["measured_kernel", "helper_kernel", "measured_kernel"]],
        ["x.second", "student", 1, ["measured_kernel", "helper_kernel", "measured_kernel"]]]
    assert range_calls[-1] == "stop"  # the segments ran, and closed their range
    events = run_profile_job(tmp_path, monkeypatch, kernels=["measured_kernel"])
    assert [e["segment"] for e in events if "segment" in e] == [
        ["x.first", "student", 0, ["measured_kernel", "measured_kernel"]],
        ["x.second", "student", 1, ["measured_kernel", "measured_kernel"]]]


@pytest.mark.sim_only
def test_a_marked_profile_job_opens_each_segment_with_the_marker(tmp_path, monkeypatch,
                                                                 range_calls):
    """The fallback run: the marker kernel inside the range before each segment's launches,
    and events of three fields before the segments."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    launched = []
    call = FakeCUDAKernel.__call__

    def record(kernel, *args):
        if not kernel._device:
            launched.append((kernel.__name__, R.in_profiled_range()))
        return call(kernel, *args)

    monkeypatch.setattr(FakeCUDAKernel, "__call__", record)
    events = run_profile_job(tmp_path, monkeypatch, markers=True)
    assert [e["segment"] for e in events if "segment" in e] == [["x.first", "student", 0],
                                                                ["x.second", "student", 1]]
    inside = [name for name, in_range in launched if in_range]
    segment = ["workbook_profile_marker", "measured_kernel", "helper_kernel", "measured_kernel"]
    assert inside == segment + segment
