"""Bounded checks and interrupts in the simulator (workbook/sim/watchdog.py, scheduler.py).

A check whose kernel never finishes stops after ``WORKBOOK_CHECK_TIMEOUT`` seconds per
case and says which threads were looping or waiting, and where; an interrupt (Jupyter's
stop button sends SIGINT) stops a running simulated kernel within a second or two; after
either, the next launch and the next check run normally. On a GPU, where a kernel that never
ends cannot be stopped from inside the process, a check still running after that long says how
to get out.
"""

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from interrupts import run_interrupting
from sim_threads import threads_left_behind
from solution_cells import namespace_with
from test_grading import write_notebook

from grader.exercise import SIZE_PER_BOUND, Case, case_time_limit, check_exercise
from grader.exercises import get
from grader.results import PASSED, TIMEOUT
from workbook.sim.watchdog import (
    LOOP_CAUSE,
    KernelStopped,
    StoppableLock,
    where_threads_are,
)

SIM = pytest.mark.sim_only  # kernels that never end: on a GPU they could not be stopped

ROOT = Path(__file__).resolve().parents[1]
LESSON = "02_reduction"
# seconds per case in these tests (WORKBOOK_CHECK_TIMEOUT): a hanging case costs this much,
# and the correct cases before it must finish within it on a loaded two-core machine too (a
# case takes well under a second alone)
BOUND = 5
# An upper bound on stopping the threads after the bound, loose enough for a loaded two-core
# machine: what it guards against is a check that is never stopped (it would run on to the
# grader's own process timeout, or forever)
SLACK = 30
NO_STRIDE_UPDATE = ("        stride *= 2\n", "")  # the loop of reduction.simple never advances


def timed_check(exercise_id: str, namespace: dict):
    start = time.monotonic()
    result = check_exercise(get(exercise_id), namespace, "sim", seed=1)
    return result, time.monotonic() - start


@pytest.fixture
def short_bound(monkeypatch):
    monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", str(BOUND))


@SIM
def test_forgotten_stride_update_is_stopped_and_diagnosed(short_bound):
    result, seconds = timed_check("reduction.simple",
                                  namespace_with(LESSON, "reduction.simple", *NO_STRIDE_UPDATE))
    assert result.status == TIMEOUT, result.summary()
    assert BOUND <= seconds < BOUND + SLACK, seconds
    message = result.messages[0]
    assert message.startswith(f"n=2, integers: reduction.simple did not finish case n=2, "
                              f"integers within {BOUND} s (WORKBOOK_CHECK_TIMEOUT); it was "
                              f"stopped."), message
    # the one thread of the first case keeps passing its barrier: a loop that never ends
    assert "thread 0: waiting at cuda.syncthreads() at <cell 11> line 10: cuda.syncthreads()" \
        in message, message
    assert "forgotten `stride *= 2`" in message
    assert result.cases[-1].status == TIMEOUT
    assert not threads_left_behind(), "the stopped kernel's threads still run"
    # the next check runs normally
    result, _ = timed_check("reduction.simple", namespace_with(LESSON, "reduction.simple"))
    assert result.status == PASSED, result.summary()


@SIM
def test_threads_waiting_for_a_looping_thread_are_told_apart(short_bound):
    loop = "    stride = 1\n    if t == 1:\n        while True:\n            pass\n"
    result, seconds = timed_check("reduction.simple", namespace_with(
        LESSON, "reduction.simple", "    stride = 1\n", loop))
    assert result.status == TIMEOUT and seconds < BOUND + SLACK, (seconds, result.summary())
    message = result.messages[0]
    assert "case n=8, integers" in message  # the first case with more than one thread
    assert "threads 0, 2-3: waiting at cuda.syncthreads() at <cell 11> line 13" in message, message
    assert "thread 1: running at <cell 11> line 8: while True:" in message, message
    assert "a cuda.syncthreads() or *_sync call inside a branch or loop" in message
    assert not threads_left_behind()


@SIM
def test_host_code_that_never_returns_is_reported_as_such(short_bound):
    def hang(namespace, inputs, mode):
        while True:
            time.sleep(0.01)

    exercise = replace(get("reduction.simple"), run=hang)
    ok = namespace_with(LESSON, "reduction.simple")
    start = time.monotonic()
    result = check_exercise(exercise, ok, "sim", seed=1)
    assert time.monotonic() - start < BOUND + SLACK
    assert result.status == TIMEOUT
    assert "no kernel was running: the host code did not finish" in result.messages[0]


def test_waiters_for_a_lock_left_held_by_a_stopped_thread_give_up():
    """A stop that lands while a thread holds a warp's lock leaves it held; the threads
    waiting for it must still end once stopped, not block forever out of the stop's reach."""
    lock = StoppableLock()
    condition = threading.Condition(lock)
    holder = threading.Thread(target=lock.acquire)  # ends holding the lock
    holder.start()
    holder.join()
    outcome = []

    def wait_for_lock():
        try:
            with condition:
                outcome.append("acquired")
        except KernelStopped:
            outcome.append("gave up")

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive() and not outcome  # still waiting: the lock is held
    waiter.abort = True
    waiter.join(timeout=2)
    assert not waiter.is_alive() and outcome == ["gave up"]


def test_stoppable_lock_serves_a_condition():
    lock = StoppableLock()
    condition = threading.Condition(lock)
    ready = []

    def notify():
        with condition:
            with condition:  # reentrant, as an RLock
                ready.append(True)
                condition.notify_all()

    with condition:
        threading.Thread(target=notify).start()
        assert condition.wait_for(lambda: ready, timeout=2)
    with pytest.raises(RuntimeError):
        lock.release()  # not held


def test_bound_grows_with_the_case_and_is_configurable(monkeypatch):
    monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", "3")
    with case_time_limit(Case(size=100), "sim") as small:
        pass
    with case_time_limit(Case(size=4 * SIZE_PER_BOUND), "sim") as large:
        pass
    with case_time_limit(Case(size=100), "gpu") as gpu:
        pass
    assert (small, large, gpu) == (3, 12, None)
    monkeypatch.delenv("WORKBOOK_CHECK_TIMEOUT")
    with case_time_limit(Case(size=100), "sim") as default:
        pass
    assert default == 20
    for bad in ("soon", "0", "-1"):
        monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", bad)
        with pytest.raises(ValueError, match="WORKBOOK_CHECK_TIMEOUT"):
            with case_time_limit(Case(size=100), "sim"):
                pass


def test_a_case_that_finishes_in_time_leaves_no_timeout_behind(monkeypatch):
    monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", "0.2")
    with case_time_limit(Case(size=1), "sim"):
        pass
    time.sleep(0.5)  # the timer was cancelled: no KernelTimeout arrives here


@SIM
def test_grader_cli_reports_a_hanging_exercise_in_seconds(tmp_path):
    cell = namespace_cell_without_stride_update()
    path = write_notebook(tmp_path / "hang.ipynb", {"reduction.simple": cell})
    env = dict(os.environ, WORKBOOK_CHECK_TIMEOUT="600")  # the notebook's bound: not the CLI's
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "grader.cli", "check", str(path), "--mode", "sim",
                          "-e", "reduction.simple", "--json", str(tmp_path / "r.json"),
                          "--timeout", str(BOUND)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=240)
    seconds = time.monotonic() - start
    assert run.returncode == 1, run.stdout + run.stderr
    exercise = json.loads((tmp_path / "r.json").read_text())["notebooks"][0]["exercises"][0]
    assert exercise["status"] == "timeout", exercise
    assert f"within {BOUND} s (--timeout)" in exercise["messages"][0], exercise["messages"]
    message = exercise["messages"][0]
    assert "what the simulated threads of block" in message, message
    # the loop passes a barrier per turn: its thread is caught at the barrier or between two
    # (which one depends on the machine's load); caught running, the loop is named the cause
    assert "waiting at cuda.syncthreads()" in message or ": running" in message, message
    assert ": running" not in message or LOOP_CAUSE in message, message
    assert seconds < 60, f"the grader took {seconds:.0f} s for one hanging exercise"


def namespace_cell_without_stride_update() -> str:
    from solution_cells import exercise_cell

    source = exercise_cell(LESSON, "reduction.simple")
    assert source.count(NO_STRIDE_UPDATE[0]) == 1
    return source.replace(*NO_STRIDE_UPDATE)


INTERRUPT_SECONDS = 20  # an interrupt stops a kernel well within this (1-2 s on an idle machine)


INTERRUPTED = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
import numpy as np
import workbook
from numba.cuda.simulator.kernel import BlockThread
from solution_cells import namespace_with
from grader.exercise import check_exercise
from grader.exercises import get

def say(**event):
    print(json.dumps(event), flush=True)

def alive():
    return sum(isinstance(t, BlockThread) and t.is_alive() for t in threading.enumerate())

hang = namespace_with("02_reduction", "reduction.simple", "        stride *= 2\n", "")
values = np.arange(64, dtype=np.int64)
try:
    say(step="launch")
    hang["simple_sum_kernel"][1, 32](values.copy(), np.zeros(1, np.int64))
    say(step="finished")
except KeyboardInterrupt:
    say(step="interrupted", alive=alive())
try:
    say(step="check")
    check_exercise(get("reduction.simple"), hang, "sim", seed=1)
    say(step="finished")
except KeyboardInterrupt:
    say(step="interrupted", alive=alive())
ok = namespace_with("02_reduction", "reduction.simple")
out = np.zeros(1, np.int64)
ok["simple_sum_kernel"][1, 32](values.copy(), out)
result = check_exercise(get("reduction.simple"), ok, "sim", seed=1)
say(step="after", sum=int(out[0]), status=result.status, alive=alive())
"""


@SIM
def test_interrupt_stops_a_running_kernel_and_the_next_ones_run(tmp_path):
    """SIGINT, as Jupyter's stop button sends it, during a plain launch and during a check."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    env = dict(os.environ, WORKBOOK_MODE="sim", WORKBOOK_CHECK_TIMEOUT="120",
               PYTHONUNBUFFERED="1")
    # 1.5 s after a launch or a check starts, the kernel's threads are looping
    lines, steps = run_interrupting(script, env, at=("launch", "check"), wait=1.5, give_up=180)
    interrupted = [step for step in steps if step["step"] == "interrupted"]
    assert all(step["alive"] == 0 for step in interrupted), \
        "threads of the interrupted kernel still run"
    assert [step for step in steps if step["step"] == "after"] == [
        {"step": "after", "sum": 2016, "status": PASSED, "alive": 0}], "".join(lines)
    delays = [step["delay"] for step in interrupted]
    assert len(delays) == 2, "".join(lines)
    # the check's own bound is 120 s here: an interrupt that did not stop the kernel would
    # take that long; a loaded machine can take several seconds to stop 32 threads
    assert max(delays) < INTERRUPT_SECONDS, delays
    assert "Exception in thread" not in "".join(lines), "stopped threads must end silently"


# --- on a GPU: a kernel that never ends cannot be stopped in-process; the check says so ---

def test_gpu_check_still_running_prints_the_way_out(monkeypatch):
    import io

    from grader.exercise import gpu_hang_notice

    monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", "0.3")
    late, quick, sim = io.StringIO(), io.StringIO(), io.StringIO()
    with gpu_hang_notice("reduction.simple", "gpu", out=late):
        time.sleep(1.0)
    with gpu_hang_notice("reduction.simple", "gpu", out=quick):
        pass
    with gpu_hang_notice("reduction.simple", "sim", out=sim):  # bounded there instead
        time.sleep(0.6)
    time.sleep(0.6)  # past the bound: a finished check's timer never fires
    text = " ".join(late.getvalue().split())
    assert text.startswith("reduction.simple: the check is still running after 0.3 s."), text
    for words in ("cannot be stopped from inside the notebook", "Kernel > Restart Kernel",
                  "grader check NOTEBOOK -e reduction.simple --timeout 60",
                  "%env WORKBOOK_MODE=sim"):
        assert words in text, words
    assert quick.getvalue() == "" and sim.getvalue() == ""


def test_notebook_check_in_gpu_mode_arms_the_notice(monkeypatch, capsys):
    import grader
    import grader.exercise
    import workbook

    def slow_check(exercise, namespace, mode, seed=None, **options):
        assert mode == "gpu"
        time.sleep(0.8)
        return "result"

    monkeypatch.setenv("WORKBOOK_CHECK_TIMEOUT", "0.2")
    monkeypatch.setenv("WORKBOOK_CHECK_PROCESS", "notebook")  # else a child process checks
    monkeypatch.setattr(workbook, "current_mode", lambda: "gpu")
    monkeypatch.setattr(grader.exercise, "check_exercise", slow_check)
    assert grader.check("reduction.simple", namespace={}) == "result"
    assert "reduction.simple: the check is still running after 0.2 s" in capsys.readouterr().out


def test_a_stop_that_lands_in_a_callback_is_not_reported_other_errors_are(monkeypatch):
    """A KernelStopped raised in a thread while it runs a weakref callback or __del__ is
    'Exception ignored in ...' for Python: the stop did its job, nothing to report."""
    import types

    from workbook.sim import watchdog

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    watchdog._quiet_stopped_threads()
    watchdog._quiet_stopped_threads()  # idempotent: wrapped once
    for exc_type in (watchdog.KernelStopped, ValueError):
        sys.unraisablehook(types.SimpleNamespace(exc_type=exc_type))
    assert [a.exc_type for a in seen] == [ValueError]


def test_a_report_of_threads_left_behind_says_where_each_waits():
    """The tests' report of threads that outlived their kernel names each one's innermost
    frames, so a leak seen once (under load, in CI) tells where the thread was kept."""
    release = threading.Event()

    def held_at_an_event():
        release.wait()

    thread = threading.Thread(target=held_at_an_event, name="kept", daemon=True)
    thread.start()
    try:
        time.sleep(0.05)
        report = where_threads_are([thread])
    finally:
        release.set()
        thread.join(5)
    assert report.startswith("kept: threading.py:"), report
    assert " wait <- " in report and "held_at_an_event" in report, report
    assert "(aborted)" not in report


def test_no_module_is_first_imported_by_a_simulated_thread():
    """The simulator's error and sanitizer paths (a barrier some threads skip, a race, a
    shuffle outside its mask) import nothing new inside the kernel's threads: a CI run once
    left three stopped threads waiting forever for the import lock of workbook.sim.branches,
    which one of them had been importing."""
    script = Path(__file__).with_name("sim_first_imports.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
    assert done.returncode == 0, done.stderr
    assert "early_return_before_barrier BarrierError" in done.stderr, done.stderr
    assert "racing_shared RaceError" in done.stderr, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_stop_waits_for_a_thread_to_finish_its_import(tmp_path, monkeypatch):
    """A thread that is importing a module is raised in only once the import is done, so the
    stop cannot end it holding the module's import lock."""
    from workbook.sim.watchdog import importing, stop_threads

    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(1.0)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started, seen_importing = threading.Event(), []

    def imports_then_loops():
        started.set()
        import slow_to_import  # noqa: F401
        while True:  # ended only by the stop
            pass

    thread = threading.Thread(target=imports_then_loops, daemon=True)
    thread.abort, thread.syncthreads_blocked = False, False
    thread.syncthreads_event = threading.Event()
    thread.start()
    started.wait(5)
    time.sleep(0.1)
    seen_importing.append(importing(sys._current_frames().get(thread.ident)))
    left = stop_threads([thread])
    assert seen_importing == [True]
    assert left == [] and not thread.is_alive()
    assert sys.modules["slow_to_import"].DONE  # the import finished before the stop landed
    sys.modules.pop("slow_to_import", None)
