"""The profile functions' warm-up launches stay outside ncu's profiled range: ``unprofiled``
stops the range only inside a profiled segment, every profile function makes its warm-up
there, and the launch measured now (``profile_skip`` launches into the range) is the one
measured when the warm-ups were profiled too."""

from types import SimpleNamespace

import pytest
from solution_cells import namespace_with

from grader import launch as L
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
    with L.unprofiled():
        range_calls.append("warm-up")
        assert not L.in_profiled_range()
    assert range_calls == ["warm-up"]


def test_unprofiled_leaves_the_range_of_a_profiled_segment_and_comes_back(range_calls):
    with L.profiled_segment():
        assert L.in_profiled_range()
        with L.unprofiled():
            assert not L.in_profiled_range()
            with L.unprofiled():  # already outside: nothing more
                range_calls.append("warm-up")
        assert L.in_profiled_range()
        range_calls.append("measured")
    assert not L.in_profiled_range()
    assert range_calls == ["start", "sync", "stop", "warm-up", "sync", "start", "measured",
                           "stop"]


def test_a_warm_up_that_raises_restarts_the_range_and_closes_the_segment(range_calls):
    with pytest.raises(ValueError), L.profiled_segment(), L.unprofiled():
        raise ValueError("no kernel")
    assert range_calls == ["start", "sync", "stop", "start", "stop"]
    assert not L.in_profiled_range()
    with L.unprofiled():  # the segment is closed: nothing
        pass
    assert range_calls[-1] == "stop" and len(range_calls) == 5


def test_the_runner_s_profiled_segment_leaves_the_range_for_the_warm_up(range_calls):
    def profile(ns):
        with L.unprofiled():
            range_calls.append(("warm-up", L.in_profiled_range()))
        range_calls.append(("measured", L.in_profiled_range()))

    runner._marker_kernel()  # compiled (and launched) before any segment
    range_calls.clear()
    runner._profiled_segment(SimpleNamespace(profile=profile), {})
    assert range_calls == ["start", "sync", "stop", ("warm-up", False), "sync", "start",
                           ("measured", True), "sync", "stop"]


# --- every exercise's profile function, its kernels recorded instead of run --------------------

PROFILED = [e for lesson in sorted(LESSONS) for e in LESSONS[lesson] if e.profile is not None]


@pytest.fixture
def recorded_launches(monkeypatch, range_calls):
    """Every kernel launch in the simulator, as ``(kernel name, threads, in the range)``,
    recorded without running it: the profile functions at their GPU sizes."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    launches = []

    def record(kernel, *args):
        grid, block = kernel.grid_dim, kernel.block_dim
        threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
        launches.append((kernel.__name__, threads, L.in_profiled_range()))

    monkeypatch.setattr(FakeCUDAKernel, "__call__", record)
    monkeypatch.setattr(reduction_profiles, "_sms", lambda: H100_SMS)
    yield launches
    L.forget_built()  # the inputs at GPU sizes


@pytest.mark.sim_only
@pytest.mark.parametrize("exercise", PROFILED, ids=lambda e: e.id)
def test_the_warm_ups_are_unprofiled_and_the_same_launch_is_measured(exercise,
                                                                     recorded_launches):
    ns = namespace_with(exercise.lesson, exercise.id)
    with L.profiled_segment():
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
    assert reference_profiles.WARM_UPS == L.WARM_UPS == "unprofiled"
    monkeypatch.setattr(reference_profiles, "WARM_UPS", "profiled")
    assert key() != today
