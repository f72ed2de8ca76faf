"""The grader's phases: one process per phase and notebook, restarted after a failure,
compute-sanitizer reports split by exercise, ncu reports split by segment, the
command-line options for a quick run."""

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from gpu_tools import needs_compute_sanitizer, needs_ncu
from test_grading import SIMPLE_OK, results_by_id, write_notebook
from tool_fixtures import tool_output

import workbook
from grader import grade as grading
from grader import sanitizer as tools
from grader.exercises import get
from grader.notebook import load
from grader.profiling import (
    WARM_UPS_PROFILED_SKIP,
    UnsplitReport,
    _read_attempt,
    segment_kernels,
    segment_skip,
    split_report,
    split_segments,
)
from grader.results import FAILED, PASSED, ExerciseResult
from grader.runner import MARKER, MARKER_KERNEL
from grader.session import Attempt, run_exercises
from grader.stages import simulate

ROOT = Path(__file__).resolve().parents[1]
REDUCTION = next((ROOT / "solutions" / "02_reduction").glob("*.ipynb"))
# the first line of a racecheck report (tests/fixtures/tools, see tool_fixtures)
RACE_LINE = next(line for line in tool_output("racecheck-shared-barrier-removed").splitlines()
                 if line.startswith("========= Error: Race reported"))


def test_one_process_checks_every_exercise_and_times_each(tmp_path):
    notebook = load(REDUCTION)
    order = ["reduction.simple", "reduction.convergent", "reduction.shared"]
    cells = [asdict(c) for c in notebook.program_for(order[-1])]
    job = {"mode": workbook.MODE, "action": "check", "exercise_ids": order, "cells": cells}
    attempts = run_exercises(job, timeout=120)
    assert len(attempts) == 1, "passing exercises must share one process"
    results = [ExerciseResult.from_dict(e["result"]) for e in attempts[0].events
               if "result" in e]
    assert [r.id for r in results] == order and all(r.passed for r in results)
    assert set(attempts[0].seconds) == set(order) and all(s > 0 for s in
                                                          attempts[0].seconds.values())


def test_grading_processes_run_numpy_on_one_thread(monkeypatch):
    """OpenBLAS and OpenMP would start a spinning thread per core in every grading process."""
    monkeypatch.setenv("OMP_NUM_THREADS", "16")  # an instructor's shell setting does not leak in
    notebook = load(REDUCTION)
    cells = [asdict(c) for c in notebook.program_for("reduction.simple")]
    probe = ("import os\nprint('threads:', *(os.environ.get(v) for v in "
             "('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')))\n")
    cells.insert(0, {"index": -1, "role": "setup", "exercise_id": None, "source": probe})
    job = {"mode": workbook.MODE, "action": "check", "exercise_ids": ["reduction.simple"],
           "cells": cells}
    attempts = run_exercises(job, timeout=120)
    assert "threads: 1 1 1" in attempts[0].output


def test_grading_processes_keep_bytecode_where_the_environment_turns_it_off(monkeypatch,
                                                                           tmp_path):
    """With PYTHONDONTWRITEBYTECODE (container images), every grading process compiled
    numpy's, numba's and the grader's sources again; they share a bytecode cache of their
    own instead, and the sources' folders stay untouched."""
    import tempfile

    from grader import session

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir reads TMPDIR again
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = session.child_env("sim")
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / f"workbook-{os.getuid()}-bytecode")
    source = tmp_path / "src" / "probe_module.py"
    source.parent.mkdir()
    source.write_text("VALUE = 1\n")
    subprocess.run([sys.executable, "-c", "import probe_module"], check=True,
                   env={**env, "PYTHONPATH": str(source.parent)})
    cached = list(Path(env["PYTHONPYCACHEPREFIX"]).rglob("probe_module*.pyc"))
    assert len(cached) == 1 and not (source.parent / "__pycache__").exists()
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    if not sys.flags.dont_write_bytecode:  # writing allowed: the environment as it is
        assert "PYTHONPYCACHEPREFIX" not in session.child_env("sim")


def test_a_failed_exercise_restarts_the_process_and_the_rest_is_graded(tmp_path):
    wrong = SIMPLE_OK.replace("output[0] = ", "output[0] = 1 + ")
    assert wrong != SIMPLE_OK
    path = write_notebook(tmp_path / "s.ipynb", {"reduction.simple": wrong,
                                                "reduction.convergent": SIMPLE_OK.replace(
                                                    "simple_sum_kernel",
                                                    "convergent_sum_kernel")})
    report = grading.grade_notebook(load(path), workbook.MODE, timeout=60,
                                    exercises=["reduction.simple", "reduction.convergent"])
    got = results_by_id(report)
    assert got["reduction.simple"].status == FAILED
    assert [r.id for r in report.exercises] == ["reduction.simple", "reduction.convergent"]
    # the interleaved tree is a correct (if slow) convergent kernel
    assert got["reduction.convergent"].status in (PASSED, FAILED)
    assert got["reduction.convergent"].cases and got["reduction.convergent"].cases[0].passed
    assert all(r.seconds > 0 and r.timings for r in report.exercises)


def test_unknown_exercise_filter_is_a_clear_error():
    with pytest.raises(ValueError, match="has no exercise reduction.nope"):
        grading.selected_exercises(load(REDUCTION), ["reduction.nope"])


def test_skipped_phases_are_reported_as_not_assessed():
    exercise = get("reduction.shared")
    result = ExerciseResult(id=exercise.id, title=exercise.title, status=PASSED, score=1.0,
                            max_score=1.0, messages=["all tests passed"], mode="gpu")
    grading.finish(result, exercise, "gpu", metrics=False, sanitizers=False)
    text = result.summary()
    assert "not assessed (skipped on request (--no-metrics))" in text
    assert "compute-sanitizer and the simulator pass: not run" in text
    assert all(r["status"] == "not assessed" for r in result.metrics["rules"])


def test_simulator_findings_fail_a_gpu_graded_exercise():
    def result(status, messages):
        return ExerciseResult(id="reduction.simple", title="t", status=status, score=1.0,
                              max_score=1.0, messages=messages)

    graded = result(PASSED, ["all 8 tests passed (gpu mode)"])
    simulate.apply(graded, result("error", ["RaceError: racecheck: data race on global memory"]))
    assert graded.status == FAILED and graded.score == 0
    assert "simulator (small cases, sanitizer on): error: RaceError" in graded.summary()
    kept = result(PASSED, [])
    simulate.apply(kept, result("timeout", ["did not finish"]))
    assert kept.status == PASSED and "not assessed" in kept.summary()


# --- compute-sanitizer: one run per tool, the report split by exercise -------------------------

@pytest.fixture
def tool_that_reports_a_race(tmp_path):
    """A stand-in compute-sanitizer: runs the runner it is given and adds a race report
    inside the part of the output that belongs to reduction.shared."""
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        "#!/bin/sh\n"
        "while [ \"$1\" != \"" + sys.executable + "\" ]; do shift; done\n"
        f"\"$@\" | sed '/{MARKER} begin reduction.shared/a {RACE_LINE}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_tools_report_is_split_by_exercise(tool_that_reports_a_race):
    notebook = load(REDUCTION)
    order = ["reduction.simple", "reduction.shared"]
    cells = [asdict(c) for c in notebook.program_for(order[-1])]
    findings = tools.sanitize_notebook(tool_that_reports_a_race, "racecheck", order, cells, 120,
                                       mode=workbook.MODE)
    assert findings["reduction.simple"].errors == 0
    assert findings["reduction.shared"].errors == 1
    assert "Race reported" in findings["reduction.shared"].message()


def test_split_by_exercise_keeps_late_reports_with_their_exercise():
    output = "\n".join([f"{MARKER} begin a.x", "x", f"{MARKER} end a.x", "late report of x",
                        f"{MARKER} begin a.y", "y", f"{MARKER} end a.y"])
    parts = tools.split_by_exercise(output)
    assert parts == {"a.x": "x\nlate report of x", "a.y": "y"}


def test_a_part_counts_errors_not_warnings():
    text = "\n".join([RACE_LINE, RACE_LINE.replace("Error", "Warning"),
                      "=========     Saved host backtrace up to driver entry point"])
    assert tools.parse_part("racecheck", text).errors == 1
    assert tools.parse_part("racecheck", "nothing to report").errors == 0


def _executable(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_compute_sanitizer_is_found_on_path_then_cuda_home_then_the_default_place(tmp_path,
                                                                                  monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    fallback = _executable(tmp_path / "usr-local-cuda" / "compute-sanitizer")
    monkeypatch.setattr(tools, "FALLBACK_PATHS", (fallback,))
    assert tools.find_tool() == fallback
    (tmp_path / "cuda-path" / "bin").mkdir(parents=True)
    not_executable = tmp_path / "cuda-path" / "bin" / "compute-sanitizer"
    not_executable.write_text("")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda-path"))
    assert tools.find_tool() == fallback  # a file that cannot run is not the tool
    home = _executable(tmp_path / "cuda-home" / "bin" / "compute-sanitizer")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-home"))
    assert tools.find_tool() == home
    on_path = _executable(tmp_path / "bin" / "compute-sanitizer")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert tools.find_tool() == on_path
    monkeypatch.setattr(tools, "FALLBACK_PATHS", ())
    monkeypatch.setenv("PATH", str(empty))
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name)
    assert tools.find_tool() is None


def test_compute_sanitizer_runs_the_runner_under_the_tool():
    command = tools.command("/cuda/bin/compute-sanitizer", "racecheck", Path("job.json"),
                            Path("events.jsonl"))
    assert command[:3] == ["/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    options = dict(zip(command[3:9:2], command[4:9:2]))
    # an error found makes the tool exit with ERROR_EXITCODE, which parse counts as an error
    # even without a summary line; API errors of the grader's own CUDA calls are not reported
    assert options == {"--error-exitcode": str(tools.ERROR_EXITCODE),
                       "--report-api-errors": "no", "--print-limit": "20"}
    assert command[9:] == [sys.executable, "-m", "grader.runner", "job.json", "events.jsonl"]
    assert tools.command("cs", "memcheck") == ["cs", "--tool", "memcheck", *command[3:9]]
    assert tools.parse("racecheck", "no summary\n", tools.ERROR_EXITCODE).errors is None
    clean_but_failed = "========= ERROR SUMMARY: 0 errors\n"
    assert tools.parse("memcheck", clean_but_failed, tools.ERROR_EXITCODE).errors == 1


# --- ncu: one run per notebook, the report split by the kernels each segment launched -----------

def launch(name, value=1.0):
    return {"kernel": f"{name}[abi:v1,xyz]", "gpu__time_duration.sum": value}


def test_segments_split_at_the_marker_kernel():
    launches = [launch(MARKER_KERNEL), launch("a"), launch("a"), launch(MARKER_KERNEL),
                launch("b")]
    assert [[x["kernel"][0] for x in part] for part in split_segments(launches)] == [["a", "a"],
                                                                                      ["b"]]


def names(launches) -> list[str]:
    return [launch["kernel"].split("[")[0] for launch in launches]


def test_a_report_is_split_by_the_kernels_each_segment_recorded():
    launches = [launch("a", 1), launch("b", 2), launch("a", 3), launch("a", 4), launch("b", 5)]
    segments = [["x.a", "student", 0, ["a", "b"]], ["x.a", "reference", 0, []],
                ["x.b", "student", 0, ["a", "a", "b"]]]
    parts = split_report(launches, segments)
    assert [[v["gpu__time_duration.sum"] for v in part] for part in parts] == [[1, 2], [],
                                                                               [3, 4, 5]]
    assert segment_kernels(segments[0]) == ["a", "b"]
    assert segment_kernels(["x.a", "student", 0]) is None  # a marked segment
    assert segment_kernels(["x.a", "student"]) is None


@pytest.mark.parametrize("report,why", [
    (["a", "a", "b", "a", "a", "b"], "launch 2 is a in the report, b in the record"),  # one more
    (["a", "b", "a", "b"], "4 launches profiled, 5 recorded; launch 4 is b in the report, "
                           "a in the record"),  # one fewer
    (["a", "b", "b", "a", "a"], "launch 3 is b in the report, a in the record"),  # reordered
    (["a", "b", "a", "a", "b", "a"], "6 launches profiled, 5 recorded; launch 6 is a in the "
                                     "report, nothing in the record"),  # one more at the end
])
def test_a_report_that_does_not_hold_the_recorded_launches_is_not_split(report, why):
    """A launch the process did not record (or one ncu did not profile) shifts every later
    segment: the report is not split at all, whatever segment the difference is in."""
    segments = [["x.a", "student", 0, ["a", "b"]], ["x.b", "student", 0, ["a", "a", "b"]]]
    with pytest.raises(UnsplitReport, match=why):
        split_report([launch(name) for name in report], segments)


def test_after_a_crash_the_launches_of_the_segment_it_ended_come_last():
    """A process that died in a segment emitted no event for it: the report holds the named
    launches first, then that segment's, which belong to no event."""
    segments = [["x.a", "student", 0, ["a"]], ["x.a", "reference", 0, ["a", "b"]]]
    launches = [launch("a", 1), launch("a", 2), launch("b", 3), launch("a", 4)]
    parts = split_report(launches, segments, complete=False)
    assert [names(part) for part in parts] == [["a"], ["a", "b"]]
    with pytest.raises(UnsplitReport):  # with no crash, a launch no segment recorded
        split_report(launches, segments)
    with pytest.raises(UnsplitReport):  # the named launches must come first, all of them
        split_report(launches[1:], segments, complete=False)


def test_marked_segments_are_split_at_the_marker_and_never_mixed_with_named_ones():
    launches = [launch(MARKER_KERNEL), launch("a", 1), launch(MARKER_KERNEL), launch("a", 2)]
    for segments in ([["x.a", "student"], ["x.a", "reference"]],
                     [["x.a", "student", 0], ["x.a", "reference", 0]]):
        assert split_report(launches, segments) == split_segments(launches)
    with pytest.raises(UnsplitReport, match="mix"):
        split_report(launches, [["x.a", "student", 0], ["x.a", "reference", 0, ["a"]]])


def read_segments(monkeypatch, exercise, segments, launches) -> dict:
    """What _read_attempt finds for ``exercise`` in a report of ``launches`` whose segment
    events are ``segments``."""
    attempt = Attempt(events=[{"segment": segment} for segment in segments],
                      output="", returncode=0, extra={"report": Path("x.ncu-rep")})
    monkeypatch.setattr("grader.profiling.ncu.check_output", lambda output, report, k: report)
    monkeypatch.setattr("grader.profiling.read_metrics", lambda report, metrics: launches)
    found, reasons = {}, {}
    assert not _read_attempt(attempt, [exercise], ["gpu__time_duration.sum"], [exercise.entry],
                             60, found, reasons)
    assert not reasons
    return {who: values["gpu__time_duration.sum"] for who, values in found[exercise.id].items()}


def test_each_named_segment_gives_its_exercise_its_launch(monkeypatch):
    """Segments split by their recorded kernels: the measured launch is the exercise's first
    (profile_skip 0) in its segment, whatever other kernels of ncu's filter come before."""
    exercise = get("reduction.shared")
    kernel = exercise.entry
    launches = [launch("simple_sum_kernel", 9), launch(kernel, 1), launch(kernel, 2),
                launch(kernel, 3)]
    segments = [[exercise.id, "student", 0, ["simple_sum_kernel", kernel, kernel]],
                [exercise.id, "reference", 0, [kernel]]]
    assert read_segments(monkeypatch, exercise, segments, launches) == {"student": 1,
                                                                        "reference": 3}


def test_a_report_that_differs_from_the_record_is_profiled_again(monkeypatch):
    """A report that does not hold the recorded launches gives no metric: its exercises are
    returned to be profiled again (with the reason, should that fail too), except the one
    the process crashed in, which keeps the crash as its reason."""
    exercise, other = get("reduction.shared"), get("reduction.simple")
    kernel = exercise.entry
    events = [{"segment": [other.id, "student", 0, [other.entry]]},
              {"segment": [exercise.id, "student", 0, [kernel]]}]
    launches = [launch(other.entry), launch(kernel), launch(kernel)]  # one not recorded
    monkeypatch.setattr("grader.profiling.ncu.check_output", lambda output, report, k: report)
    monkeypatch.setattr("grader.profiling.read_metrics", lambda report, metrics: launches)
    found, reasons = {}, {}
    attempt = Attempt(events=events, output="", returncode=0, extra={"report": Path("r")})
    unsplit = _read_attempt(attempt, [other, exercise], ["gpu__time_duration.sum"],
                            [kernel, other.entry], 60, found, reasons)
    assert unsplit == {other.id, exercise.id} and not found
    assert "3 launches profiled, 2 recorded" in reasons[exercise.id]
    crashed = Attempt(events=events, output="", returncode=-11, crashed=exercise.id,
                      extra={"report": Path("r")})
    found, reasons = {}, {}
    assert _read_attempt(crashed, [other, exercise], ["gpu__time_duration.sum"],
                         [kernel, other.entry], 60, found, reasons) == set()  # a prefix
    assert found[other.id]["student"]["kernel"] == launches[0]["kernel"]
    assert found[exercise.id]["student"] is launches[1]
    launches[1:] = [launch("another_kernel")]  # the crashed segment's launch is not recorded
    found, reasons = {}, {}
    assert _read_attempt(crashed, [other, exercise], ["gpu__time_duration.sum"],
                         [kernel, other.entry], 60, found, reasons) == {other.id}
    assert reasons[exercise.id].startswith("the profiled process crashed")


def test_each_segment_gives_its_exercise_its_first_launch_in_the_range(monkeypatch):
    """The warm-up launches are not profiled: a segment holds the measured launch first
    (``profile_skip`` 0), whatever other kernels come before or after it."""
    exercise = get("reduction.shared")
    assert exercise.profile_skip == 0
    kernel = exercise.entry
    launches = [launch(MARKER_KERNEL), launch("other", 9), launch(kernel, 1), launch(kernel, 2),
                launch(MARKER_KERNEL), launch(kernel, 3)]
    segments = [[exercise.id, "student", 0], [exercise.id, "reference", 0]]
    assert read_segments(monkeypatch, exercise, segments, launches) == {"student": 1,
                                                                        "reference": 3}
    # the skip comes with each segment: one of 1 takes the launch after the first
    segments = [[exercise.id, "student", 1], [exercise.id, "reference", 0]]
    assert read_segments(monkeypatch, exercise, segments, launches) == {"student": 2,
                                                                        "reference": 3}


def test_a_report_made_with_the_warm_ups_profiled_skips_them(monkeypatch):
    """Segment events of two fields come from reports made while the warm-up launches were
    inside the range: one launch of the exercise's kernels before the measured one."""
    exercise = get("reduction.shared")
    kernel = exercise.entry
    launches = [launch(MARKER_KERNEL), launch(kernel, 1), launch(kernel, 2), launch("other", 9),
                launch(MARKER_KERNEL), launch(kernel, 3), launch(kernel, 4)]
    segments = [[exercise.id, "student"], [exercise.id, "reference"]]
    assert WARM_UPS_PROFILED_SKIP == 1
    assert read_segments(monkeypatch, exercise, segments, launches) == {"student": 2,
                                                                        "reference": 4}
    assert segment_skip([exercise.id, "student"]) == 1
    assert segment_skip([exercise.id, "student", 0]) == 0


def profile_program(who: str, later: str = "") -> list[dict]:
    """A two-exercise program for profile jobs: a setup cell naming ``who``, then lesson
    02's first two exercises (``later`` appended to the second's cell)."""
    return [{"index": 0, "role": "setup", "exercise_id": None, "source": f"who = {who!r}"},
            {"index": 1, "role": "exercise", "exercise_id": "reduction.simple",
             "source": "simple_sum_kernel = max"},
            {"index": 2, "role": "exercise", "exercise_id": "reduction.shared",
             "source": "shared_sum_kernel = max" + later}]


def test_a_profile_job_profiles_each_program_for_the_exercises_it_covers(tmp_path, monkeypatch):
    """benchmarks/metric_rules.py profiles a lesson's variants in one process: a program
    named for one exercise is profiled for that exercise only, the others for each."""
    import json

    from grader import runner

    profiled = []
    monkeypatch.setattr(runner, "_warm_up", lambda ex, namespace: None)
    monkeypatch.setattr(runner, "_profiled_segment",
                        lambda ex, namespace: profiled.append((ex.id, namespace["who"])))

    cells = profile_program

    job = {"mode": "sim", "action": "profile",
           "exercise_ids": ["reduction.simple", "reduction.shared"],
           "programs": [["reference", None, cells("ref")],
                        ["slow", "reduction.shared", cells("slow")]]}
    events = runner.Events(str(tmp_path / "events.jsonl"))
    runner.profile_job(job, events)
    events.file.close()
    assert profiled == [("reduction.simple", "ref"), ("reduction.shared", "ref"),
                        ("reduction.shared", "slow")]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    # each segment with the launches of its kernels before the measured one (profile_skip),
    # and the kernels it launched in the profiled range (none here: the segment is a stand-in)
    assert [e["segment"] for e in events if "segment" in e] == [
        ["reduction.simple", "reference", 0, []], ["reduction.shared", "reference", 0, []],
        ["reduction.shared", "slow", 0, []]]
    assert runner.job_programs({"cells": [1], "reference_cells": [2]}) == [
        ("student", None, [1], None), ("reference", None, [2], None)]


def test_a_profile_job_over_several_notebooks_loads_each_ones_kernels_from_its_cache(
        tmp_path, monkeypatch):
    """A batch profiles two or three notebooks in one ncu run: each program is profiled for
    its own exercises, and the kernels its cells define use its notebook's kernel cache
    (the folder is set while its cells run; "" for none)."""
    from grader import kernel_cache, runner

    profiled, folders = [], {}

    def warm_up(ex, namespace):
        folders[(ex.id, namespace["who"])] = os.environ.get(kernel_cache.CACHE_ENV)

    monkeypatch.setattr(runner, "_warm_up", warm_up)
    monkeypatch.setattr(runner, "_profiled_segment",
                        lambda ex, namespace: profiled.append((ex.id, namespace["who"])))
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path / "first"))
    job = {"mode": "sim", "action": "profile",
           "exercise_ids": ["reduction.simple", "reduction.shared"],
           "programs": [["student 0", ["reduction.shared"], profile_program("a"), "/k/a"],
                        ["student 1", ["reduction.simple", "reduction.shared"],
                         profile_program("b"), "/k/b"],
                        ["reference", None, profile_program("ref"), ""]]}
    events = runner.Events(str(tmp_path / "events.jsonl"))
    runner.profile_job(job, events)
    events.file.close()
    assert profiled == [("reduction.simple", "b"), ("reduction.simple", "ref"),
                        ("reduction.shared", "a"), ("reduction.shared", "b"),
                        ("reduction.shared", "ref")]
    assert folders == {("reduction.simple", "b"): "/k/b", ("reduction.simple", "ref"): "",
                       ("reduction.shared", "a"): "/k/a", ("reduction.shared", "b"): "/k/b",
                       ("reduction.shared", "ref"): ""}


def test_a_check_ends_at_once_and_a_job_under_a_tool_through_the_c_exit():
    """A check ends at once after its last event; a process under compute-sanitizer or ncu
    ends through the C library's exit(), whose handlers hand the tool its report."""
    from grader import runner

    assert runner.ending({"mode": "gpu", "exercise_ids": []}) == runner.AT_ONCE  # a check
    assert runner.ending({"mode": "sim", "action": "check"}) == runner.AT_ONCE
    assert runner.ending({"mode": "gpu", "action": "sanitize"}) == runner.C_EXIT
    assert runner.ending({"mode": "gpu", "action": "profile"}) == runner.C_EXIT


def test_without_the_c_exit_a_job_under_a_tool_ends_with_the_interpreter(monkeypatch):
    from grader import runner

    monkeypatch.setattr(runner, "_c_exit", lambda: None)
    assert runner.ending({"mode": "gpu", "action": "profile"}) == runner.TEARDOWN
    assert runner.ending({"mode": "gpu", "action": "check"}) == runner.AT_ONCE


# a setup cell with an exit handler of the C library (run by its exit(), never by
# os._exit) and one of Python's (run by the interpreter's teardown only)
EXIT_WITNESSES = """import atexit, ctypes, os
c_handler = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)(
    lambda status, arg: os.write(1, b"C exit handlers ran\\n"))
ctypes.CDLL(None).on_exit(c_handler, None)  # glibc's atexit() with arguments
atexit.register(print, "Python teardown ran", flush=True)
"""


def test_a_sanitize_job_ends_through_the_c_exit_with_its_output_and_events(tmp_path):
    """The runner's own entry point on a sanitize job (simulator mode): the exercise's end
    marker (Python's buffered stdout) and its result event arrive, the C library's exit
    handlers ran, Python's teardown did not, and the exit code is 0."""
    cells = [asdict(c) for c in load(REDUCTION).program_for("reduction.simple")]
    cells.insert(1, {"index": 0, "role": "setup", "exercise_id": None,
                     "source": EXIT_WITNESSES})
    job = {"mode": "sim", "action": "sanitize", "exercise_ids": ["reduction.simple"],
           "cells": cells, "seed": 1}
    (attempt,) = run_exercises(job, 60.0, workdir=tmp_path)
    assert attempt.returncode == 0, attempt.output
    assert [e["result"]["status"] for e in attempt.events if "result" in e] == [PASSED]
    assert f"{MARKER} end reduction.simple" in attempt.output
    assert "C exit handlers ran" in attempt.output
    assert "Python teardown ran" not in attempt.output


ORPHANS = """
import ctypes, json, sys
from pathlib import Path
import psutil
from grader.session import run_exercises
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans become ours
(attempt,) = run_exercises(json.loads(sys.argv[1]), 60.0, workdir=Path(sys.argv[2]))
print(json.dumps({"returncode": attempt.returncode, "output": attempt.output,
                  "statuses": [e["result"]["status"] for e in attempt.events if "result" in e],
                  "left": [p.name() for p in psutil.Process().children(recursive=True)]}))
"""


def test_a_check_process_that_ends_at_once_leaves_every_event_and_no_process(tmp_path):
    """The runner's own entry point: a sim-mode check of a notebook ends with exit code 0
    and its result event written, and its GPU-compile worker ended before it (one left
    running, or not waited for, would be handed to the script below as an orphan)."""
    notebook = load(REDUCTION)
    cells = [asdict(c) for c in notebook.program_for("reduction.simple")]
    job = {"mode": "sim", "action": "check", "exercise_ids": ["reduction.simple"],
           "cells": cells, "seed": 1}
    env = {k: v for k, v in os.environ.items() if k != "WORKBOOK_GPU_COMPILE"}  # it starts
    done = subprocess.run([sys.executable, "-c", ORPHANS, json.dumps(job), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.splitlines()[-1])
    assert run["returncode"] == 0, run["output"]
    assert run["statuses"] == [PASSED]
    assert run["left"] == []


def test_a_profile_job_prepares_every_segment_before_it_profiles_one(tmp_path, monkeypatch):
    """ncu holds the GPU's counters from a process's first profiled launch until it exits:
    every program runs and every exercise's launches are made once (compiles, inputs) before
    the first profiled segment. A segment whose preparation raises is reported and skipped;
    a crash while profiling is blamed on the exercise being profiled."""
    import json

    from grader import runner

    calls = []

    def warm_up(ex, namespace):
        calls.append(("warm", ex.id, namespace["who"]))
        if namespace["who"] == "broken+":
            raise ValueError("no kernel today")

    monkeypatch.setattr(runner, "_warm_up", warm_up)
    monkeypatch.setattr(runner, "_profiled_segment",
                        lambda ex, namespace: calls.append(("profile", ex.id, namespace["who"])))

    def cells(who):
        return profile_program(who, later="\nwho = who + '+'")

    job = {"mode": "sim", "action": "profile",
           "exercise_ids": ["reduction.simple", "reduction.shared"],
           "programs": [["reference", None, cells("ref")], ["broken", None, cells("broken")]]}
    events = runner.Events(str(tmp_path / "events.jsonl"))
    runner.profile_job(job, events)
    events.file.close()
    # the later cell's rebinding of who does not reach the first exercise's segment
    assert calls == [("warm", "reduction.simple", "ref"), ("warm", "reduction.simple", "broken"),
                     ("warm", "reduction.shared", "ref+"), ("warm", "reduction.shared", "broken+"),
                     ("profile", "reduction.simple", "ref"),
                     ("profile", "reduction.simple", "broken"),
                     ("profile", "reduction.shared", "ref+")]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["start"] for e in events if "start" in e] == [
        "reduction.simple", "reduction.shared", "reduction.simple", "reduction.shared"]
    (failed,) = [e for e in events if "failed" in e]
    assert failed["failed"] == ["reduction.shared", "broken"] and "no kernel today" in failed["why"]


FAKE_PROFILE_CHILD = """
import json, os, signal, sys
job = json.load(open(sys.argv[-2]))
events = open(sys.argv[-1], "a")
ids = job["exercise_ids"]
for exercise_id in ids + ids:  # prepared, then profiled; the segment of 'b' crashes
    events.write(json.dumps({"start": exercise_id}) + "\\n"); events.flush()
    if exercise_id == "b" and job.get("crash", True) and len(ids) == 3:
        os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_crash_while_profiling_blames_that_exercise_and_the_next_attempt_goes_on(tmp_path):
    from grader.session import run_exercises

    child = tmp_path / "child.py"
    child.write_text(FAKE_PROFILE_CHILD)
    job = {"mode": "sim", "action": "profile", "exercise_ids": ["a", "b", "c"]}
    attempts = run_exercises(job, 30, wrap=lambda n, folder: ([sys.executable, str(child)], {}))
    assert [a.crashed for a in attempts] == ["b", None]
    assert attempts[1].started() == ["c", "c"]


def test_ncu_is_found_on_path_then_in_the_default_place(tmp_path, monkeypatch):
    from grader import ncu

    monkeypatch.setenv("PATH", str(tmp_path))
    fallback = _executable(tmp_path / "cuda" / "ncu")
    monkeypatch.setattr(ncu, "NCU_FALLBACKS", (fallback,))
    assert ncu.find_ncu() == fallback
    on_path = _executable(tmp_path / "ncu")
    assert ncu.find_ncu() == on_path
    monkeypatch.setenv("PATH", str(tmp_path / "cuda" / "nothing"))
    monkeypatch.setattr(ncu, "NCU_FALLBACKS", ())
    assert ncu.find_ncu() is None


def test_ncu_command_profiles_the_named_kernels_between_the_markers(monkeypatch):
    from grader import ncu

    monkeypatch.setattr(ncu, "find_ncu", lambda: "/opt/ncu")
    command = ncu.command(["a_kernel", MARKER_KERNEL], ["gpu__time_duration.sum", "m.sum"],
                          Path("out/r.ncu-rep"))
    assert command[0] == "/opt/ncu"
    flat = " ".join(command)
    assert "--metrics gpu__time_duration.sum,m.sum" in flat
    assert f"--kernel-name regex:^(a_kernel|{MARKER_KERNEL})\\[" in flat
    assert "--profile-from-start off" in flat  # only between cuda.profile_start and _stop
    assert "--export out/r.ncu-rep" in flat and "--force-overwrite" in command
    whole = ncu.command(["a_kernel"], ["m.sum"], Path("r"))
    assert "--launch-skip" not in whole and "--launch-count" not in whole
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    with pytest.raises(ncu.NotAssessed, match="ncu\\) is not installed"):
        ncu.command(["a_kernel"], ["m.sum"], Path("r"))


def test_ncu_output_is_checked_for_a_report(tmp_path):
    from grader import ncu

    report = tmp_path / "r.ncu-rep"
    with pytest.raises(ncu.NotAssessed, match="profiled no kernel matching \\['k'\\]"):
        ncu.check_output("==PROF== Disconnected\n", report, ["k"])
    report.write_bytes(b"x")
    assert ncu.check_output("", tmp_path / "r", ["k"]) == report  # ncu adds the suffix
    with pytest.raises(ncu.NotAssessed, match="profiled no kernel"):
        ncu.check_output("==WARNING== No kernels were profiled.", report, ["k"])
    with pytest.raises(ncu.NotAssessed, match="ERR_NVGPUCTRPERM"):
        ncu.check_output("==ERROR== ERR_NVGPUCTRPERM", report, ["k"])


def test_a_crash_a_timeout_or_a_missing_launch_is_the_reason_given(monkeypatch):
    exercise = get("reduction.shared")
    kernel = exercise.entry
    attempt = Attempt(events=[{"segment": [exercise.id, "student", 0]},
                              {"failed": ["reduction.simple", "student"], "why": "NameError"}],
                      output="Segmentation fault", returncode=-11, crashed="reduction.segmented",
                      timed_out="reduction.coarsened", extra={"report": Path("x.ncu-rep")})
    launches = [launch(MARKER_KERNEL), launch("other", 1)]  # no launch of the kernel
    monkeypatch.setattr("grader.profiling.ncu.check_output", lambda output, report, k: report)
    monkeypatch.setattr("grader.profiling.read_metrics", lambda report, metrics: launches)
    found, reasons = {}, {}
    _read_attempt(attempt, [exercise], ["gpu__time_duration.sum"], [kernel], 60, found, reasons)
    assert not found
    assert reasons["reduction.simple"] == "the student's profiling launch failed: NameError"
    assert reasons["reduction.coarsened"] == "ncu did not finish within 60 s"
    assert reasons["reduction.segmented"].startswith("the profiled process crashed (signal ")
    assert reasons[exercise.id] == f"ncu profiled no launch of ^({kernel})\\[ for the student"


def test_a_report_that_cannot_be_split_is_profiled_again_with_marker_kernels(tmp_path,
                                                                            monkeypatch):
    """profile_programs: the exercises of a report that differs from the launches recorded
    (here one launch no segment recorded) are profiled again, in a run whose segments open
    with the marker kernel; those of a report that agrees keep what it measured. The marked
    run's reports are numbered after the first run's."""
    from grader import ncu, profiling

    simple, shared = get("reduction.simple"), get("reduction.shared")
    runs = [[[{"segment": [simple.id, "student", 0, [simple.entry]]}],  # two attempts
             [{"segment": [shared.id, "student", 0, [shared.entry]]}]],
            [[{"segment": [shared.id, "student", 0]}]]]  # the marked run
    reports = {0: [launch(simple.entry, 1)], 1: [launch(shared.entry, 2), launch(shared.entry, 3)],
               2: [launch(MARKER_KERNEL), launch(shared.entry, 4)]}
    jobs, exports = [], []

    def run_exercises(job, timeout, wrap, on_event, workdir):
        jobs.append(job)
        attempts = []
        for k, events in enumerate(runs[len(jobs) - 1]):
            command, extra = wrap(k, workdir / str(k))
            exports.append(command[command.index("--export") + 1])
            attempts.append(Attempt(events=events, output="", returncode=0, extra=extra))
        return attempts

    def read_metrics(report, metrics):
        return reports[int(Path(report).parent.name)]

    monkeypatch.setattr(profiling, "run_exercises", run_exercises)
    monkeypatch.setattr(profiling, "read_metrics", read_metrics)
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/opt/ncu")
    monkeypatch.setattr(ncu, "check_output", lambda output, report, kernels: report)

    def profile():
        jobs.clear()
        exports.clear()
        return profiling.profile_programs([simple, shared], [("student", None, [])], 60,
                                          tmp_path)

    found, reasons, attempts = profile()
    assert profiling.marked_exercises(attempts) == {shared.id}
    assert [job["markers"] for job in jobs] == [False, True]
    assert [job["exercise_ids"] for job in jobs] == [[simple.id, shared.id], [shared.id]]
    assert jobs[0]["kernels"] == sorted([simple.entry, shared.entry])
    assert jobs[1]["kernels"] == sorted([shared.entry, MARKER_KERNEL])
    assert exports == [str(tmp_path / str(k) / profiling.REPORT) for k in range(3)]
    assert len(attempts) == 3 and not reasons
    assert found == {simple.id: {"student": reports[0][0]}, shared.id: {"student": reports[2][1]}}
    runs[1] = [[]]  # a marked run that measured nothing: the first run's reason stays
    found, reasons, attempts = profile()
    assert shared.id not in found and simple.id in found
    assert "2 launches profiled, 1 recorded" in reasons[shared.id]
    reports[1] = reports[1][:1]  # a report that agrees: no marked run
    found, reasons, attempts = profile()
    assert [job["markers"] for job in jobs] == [False] and len(attempts) == 2
    assert found[shared.id] == {"student": reports[1][0]} and not reasons
    assert profiling.marked_exercises(attempts) == set()


def test_notebooks_profiled_together_each_get_their_own_measurements(monkeypatch):
    """profile_notebooks (a batch task's notebooks in one ncu run): each notebook's section
    holds its own program's launch as "student"; a notebook whose own launch failed is not
    assessed, with its reason; one that lost a measurement to the shared run (a crash blamed
    on the exercise) is profiled again alone; the run's time is shared."""
    from grader import profiling

    simple, shared = get("reduction.simple"), get("reduction.shared")
    metrics = {r.metric: 1.0 for ex in (simple, shared) for r in ex.metric_rules}

    def measured(value):
        return {**{m: value for m in metrics}, "kernel": "k"}

    calls = []

    def profile_programs(exercises, programs, timeout, workdir, on_event=None):
        calls.append([(label, only, kernels) for label, only, _, kernels in programs])
        if len(calls) == 1:  # the shared run
            found = {simple.id: {"student 0": measured(1.0), "student 1": measured(2.0),
                                 "reference": measured(1.0)},
                     shared.id: {"student 0": measured(1.1), "reference": measured(1.0)}}
            events = [{"start": simple.id}, {"start": shared.id},
                      {"failed": [shared.id, "student 2"], "why": "no kernel today"}]
            reasons = {shared.id: "the profiled process crashed (signal SIGSEGV)"}
            return found, reasons, [Attempt(events=events, output="", returncode=0,
                                            seconds={simple.id: 3.0, shared.id: 6.0})]
        found = {shared.id: {"student": measured(1.2), "reference": measured(1.0)}}
        return found, {}, [Attempt(events=[], output="", returncode=0,
                                   seconds={shared.id: 5.0})]

    monkeypatch.setattr(profiling, "profile_programs", profile_programs)
    seconds = [{}, {}, {}]
    first, second, third = profiling.profile_notebooks(
        [([simple, shared], ["cells a"], "/k/a"), ([simple, shared], ["cells b"], "/k/b"),
         ([shared], ["cells c"], "/k/c")], 60, seconds)
    assert calls[0] == [("student 0", [simple.id, shared.id], "/k/a"),
                        ("student 1", [simple.id, shared.id], "/k/b"),
                        ("student 2", [shared.id], "/k/c"), ("reference", None, "")]
    assert calls[1:] == [[("student", None, "/k/b"), ("reference", None, None)]]  # alone
    assert first[simple.id]["student"] == measured(1.0)
    assert first[shared.id]["student"] == measured(1.1)
    assert second[simple.id]["student"] == measured(2.0)
    assert second[shared.id]["student"] == measured(1.2)  # from the run alone
    assert list(third) == [shared.id]  # its own launch failed: not profiled again
    assert all(r["status"] == "not assessed" and "the student's profiling launch failed: no "
               "kernel today" in r["reason"] for r in third[shared.id]["rules"])
    assert seconds[0] == {simple.id: 1.0, shared.id: 2.0}
    assert seconds[1] == {simple.id: 1.0, shared.id: 2.0 + 5.0}


def _rule_runs(monkeypatch, student_values, reasons=None):
    """profile_programs stood in for: run k measures reduction.shared's students at
    ``student_values[k]`` times the reference (a number, or one per label; None: nothing
    measured); returns the exercise and the calls."""
    from grader import profiling

    shared = get("reduction.shared")
    calls = []

    def profile_programs(exercises, programs, timeout, workdir, on_event=None):
        calls.append([(label, only, kernels) for label, only, _, kernels in programs])
        value = student_values[len(calls) - 1]
        labels = [label for label, *_ in programs]
        found = {} if value is None else {shared.id: {
            **{label: {r.metric: value[label] if isinstance(value, dict) else value
                       for r in shared.metric_rules} for label in labels
               if label != "reference"},
            "reference": {r.metric: 1.0 for r in shared.metric_rules}}}
        why = {} if value is not None else {shared.id: reasons or "nothing was profiled"}
        return found, why, [Attempt(events=[], output="", returncode=0,
                                    seconds={shared.id: 2.0})]

    monkeypatch.setattr(profiling, "profile_programs", profile_programs)
    return shared, calls


def test_a_failed_rule_is_measured_again_and_the_second_measurement_decides(monkeypatch):
    """A clean notebook graded beside a batch's other work once measured its 4.5 us kernel
    at 1.53x the reference (an H200 pair, 2026-11-28): a failed rule gets a second ncu run of
    its own notebook and the reference, whose measurement decides, with a note saying so."""
    from grader import profiling

    shared, calls = _rule_runs(monkeypatch, [{"student 0": 1.6, "student 1": 1.2}, 1.1])
    seconds = [{}, {}]
    first, second = profiling.profile_notebooks(
        [([shared], ["cells a"], "/k/a"), ([shared], ["cells b"], "/k/b")], 60, seconds)
    assert calls[1:] == [[("student", None, "/k/a"), ("reference", None, None)]]
    assert [o["status"] for o in first[shared.id]["rules"]] == ["passed", "passed"]
    assert "measured again" in first[shared.id]["note"]
    assert "duration (1.60x the reference)" in first[shared.id]["note"]
    assert "note" not in second[shared.id] and seconds[1] == {shared.id: 1.0}
    assert seconds[0] == {shared.id: 1.0 + 2.0}  # its share of the shared run, then its own
    result = ExerciseResult(id=shared.id, title=shared.title, status=PASSED,
                            score=shared.points, max_score=shared.points)
    profiling.apply_metrics(result, shared, first[shared.id])
    assert result.status == PASSED and first[shared.id]["note"] in result.messages


def test_a_kernel_slow_in_both_measurements_still_fails(monkeypatch):
    """A slow kernel fails its second measurement too: it loses its points, one extra run and
    no more."""
    from grader import profiling

    shared, calls = _rule_runs(monkeypatch, [1.6, 1.7, 1.1])
    (sections,) = profiling.profile_notebooks([([shared], ["cells"], None)], 60)
    assert len(calls) == 2
    assert all(o["status"] == "failed" for o in sections[shared.id]["rules"])
    assert all(o["value"] == 1.7 for o in sections[shared.id]["rules"])
    result = ExerciseResult(id=shared.id, title=shared.title, status=PASSED,
                            score=shared.points, max_score=shared.points)
    profiling.apply_metrics(result, shared, sections[shared.id])
    assert result.status == "failed" and result.score < shared.points


def test_a_failed_count_is_not_measured_again(monkeypatch):
    """A count (instructions, load requests) does not vary with what else runs on the GPU: a
    kernel that fails only such a rule keeps its first measurement, with no second ncu run.
    reduction.shared's load requests at 1.6x and its duration at the reference's own: the
    duration passes, the count fails, once."""
    from grader import profiling
    from grader.metric_rules import is_timed

    shared, calls = _rule_runs(monkeypatch, [None])
    timed = {r.metric: is_timed(r.metric) for r in shared.metric_rules}
    assert sorted(timed.values()) == [False, True]  # a count and a duration
    count = next(m for m, t in timed.items() if not t)
    section = {"rules": [r.evaluate(1.6 if r.metric == count else 1.0, 1.0)
                         for r in shared.metric_rules]}
    assert [o["status"] for o in section["rules"]].count("failed") == 1
    profiling.measure_again(([shared], ["cells"], None), {shared.id: section}, 60, None)
    assert calls == [] and "note" not in section


def test_metrics_that_measure_time():
    """Nsight Compute's names (its metric reference): durations, cycles and rates over the
    elapsed time are timed; counts of instructions, requests, sectors and conflicts are not."""
    from grader.metric_rules import is_timed

    timed = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
             "sm__cycles_elapsed.avg", "dram__bytes.sum.per_second"]
    counts = ["smsp__inst_executed.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
              "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
              "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
              "sm__inst_executed_pipe_tensor_op_hmma.sum"]
    assert [is_timed(m) for m in timed] == [True] * len(timed)
    assert [is_timed(m) for m in counts] == [False] * len(counts)


def test_a_second_run_that_measures_nothing_leaves_the_first_measurement(monkeypatch):
    from grader import profiling

    shared, calls = _rule_runs(monkeypatch, [1.6, None], reasons="the process crashed")
    (sections,) = profiling.profile_notebooks([([shared], ["cells"], None)], 60)
    assert len(calls) == 2 and "note" not in sections[shared.id]
    assert all(o["status"] == "failed" and o["value"] == 1.6
               for o in sections[shared.id]["rules"])


def test_an_exercise_profiled_again_says_so_in_its_result(monkeypatch):
    """The fallback costs a second ncu run: the exercises it measured carry a note, which the
    result's messages show (a batch that grades slower than it should says why)."""
    from grader import profiling

    simple, shared = get("reduction.simple"), get("reduction.shared")
    metrics = {r.metric: 1.0 for ex in (simple, shared) for r in ex.metric_rules}
    runs = {"student": metrics, "reference": metrics}
    attempts = [Attempt(events=[{"segment": [simple.id, "student", 0, [simple.entry]]},
                                {"segment": [shared.id, "student", 0, []]}],
                        output="", returncode=0),
                Attempt(events=[{"segment": [shared.id, "student", 0]},
                                {"segment": [shared.id, "reference", 0]}],
                        output="", returncode=0)]
    monkeypatch.setattr(profiling, "profile_programs",
                        lambda *args, **kwargs: ({simple.id: runs, shared.id: runs}, {},
                                                 attempts))
    sections = profiling.profile_notebook([simple, shared], [], 60)
    assert "note" not in sections[simple.id]
    assert sections[shared.id]["note"] == profiling.PROFILED_AGAIN
    for exercise, expected in ((simple, False), (shared, True)):
        result = ExerciseResult(id=exercise.id, title=exercise.title, status=PASSED,
                                score=exercise.points, max_score=exercise.points)
        profiling.apply_metrics(result, exercise, sections[exercise.id])
        assert (profiling.PROFILED_AGAIN in result.messages) is expected
        assert result.status == PASSED


# --- the command line ---------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, COLUMNS="200"))


def test_cli_grades_only_the_named_exercises(tmp_path):
    out = tmp_path / "r.json"
    result = run_cli("check", "solutions", "-e", "reduction.shared", "-e", "softmax.cpu",
                     "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    notebooks = json.loads(out.read_text())["notebooks"]
    graded = {e["id"] for nb in notebooks for e in nb["exercises"]}
    assert graded == {"reduction.shared", "softmax.cpu"}
    assert "graded in" in result.stdout


def test_cli_rejects_an_unknown_exercise():
    result = run_cli("check", "solutions/02_reduction", "-e", "reduction.nope")
    assert result.returncode == 2 and "unknown exercise 'reduction.nope'" in result.stdout


# --- on a GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_alone
@needs_ncu
@pytest.mark.parametrize("lesson,segments", [("02_reduction", "named"), ("03_softmax", "named"),
                                             ("02_reduction", "marked")])
def test_one_ncu_run_profiles_every_exercise_of_a_notebook(lesson, segments, monkeypatch):
    """A solution notebook and its reference in one ncu run, the report split by the kernels
    each segment recorded (lesson 03's dispatch launches through a prepared launch's own
    driver call); and, where a report is not split (here made so), in the marked run."""
    from grader import profiling, reference_profiles
    from grader.profiling import profile_notebook

    monkeypatch.delenv(reference_profiles.CACHE_ENV, raising=False)
    if segments == "marked":
        split = profiling.split_report

        def not_named(launches, events, complete=True):
            if any(profiling.segment_kernels(event) is not None for event in events):
                raise profiling.UnsplitReport("not split by name in this test")
            return split(launches, events, complete)

        monkeypatch.setattr(profiling, "split_report", not_named)
    notebook = load(next((ROOT / "solutions" / lesson).glob("*.ipynb")))
    exercises = [e for e in map(get, notebook.exercise_ids()) if e.metric_rules]
    cells = [asdict(c) for c in notebook.program_for(exercises[-1].id)]
    events = []
    sections = profile_notebook(exercises, cells, on_event=events.append)
    fields = [len(e["segment"]) for e in events if "segment" in e]
    assert len(fields) == 2 * len(exercises) * (1 if segments == "named" else 2), fields
    assert set(fields) == ({4} if segments == "named" else {3, 4}), fields
    for exercise in exercises:
        outcomes = sections[exercise.id]["rules"]
        assert [o["status"] for o in outcomes] == ["passed"] * len(outcomes), [
            (o["label"], o.get("reason") or o["ratio"]) for o in outcomes]


@pytest.mark.gpu
@needs_compute_sanitizer
def test_racecheck_blames_only_the_exercise_without_its_barrier():
    tool = tools.find_tool()
    notebook = load(REDUCTION)
    order = ["reduction.simple", "reduction.shared", "reduction.segmented"]
    cells = [asdict(c) for c in notebook.program_for(order[-1])]
    for cell in cells:
        if cell["exercise_id"] == "reduction.shared":
            cell["source"] = cell["source"].replace("        cuda.syncthreads()\n", "", 1)
    findings = tools.sanitize_notebook(tool, "racecheck", order, cells, 300)
    assert findings["reduction.shared"].errors, findings["reduction.shared"].message()
    assert findings["reduction.simple"].errors == 0
    assert findings["reduction.segmented"].errors == 0


def test_the_tools_wait_for_a_result_they_can_judge():
    calls = []

    def tool(*args):
        calls.append(args)
        return {"ran": True}

    stubs_only = grading._Gate()
    stubs_only.result({"result": {"status": "not implemented"}})
    stubs_only.close()
    assert stubs_only.then(tool, 1) is None and not calls
    finished = grading._Gate()
    finished.result({"result": {"status": "failed"}})
    assert finished.then(tool, 2) == {"ran": True} and calls == [(2,)]


def test_the_marker_kernel_has_a_name_ncu_can_demangle():
    """ncu reports a kernel by its demangled function name ("name[abi:...]"); numba's mangled
    name of a kernel without parameters does not demangle, and the report's segments then
    never open (every metric rule came back "nothing was profiled" on an H100)."""
    code = ("import re; from numba import cuda, int64; "
            "from grader.runner import workbook_profile_marker as k; "
            "ptx, _ = cuda.compile_ptx(k, (int64,), cc=(9, 0)); "
            "print(re.search(r'\\.entry\\s+(\\S+?)\\(', ptx).group(1))")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    mangled = done.stdout.strip()
    assert "23workbook_profile_marker" in mangled
    assert not mangled.endswith("E"), f"{mangled}: no parameter types after the name"


# --- the pipeline: check || sanitize || simulate, then profile ------------------------------------

@pytest.mark.parametrize("mode", ["gpu", "sim"], ids=["gpu-mode", "sim-mode"])
def test_the_pipeline_runs_its_stages_in_order(mode, monkeypatch):
    """The tools wait until the check has a result they can judge, their findings amend the
    results they can judge, and profiling runs last, for the exercises that passed; in sim
    mode the check runs alone. The stages here are stand-ins that record when they run."""
    from grader.sanitizer import Finding
    from grader.stages import check, profile, sanitize, simulate

    order = ["reduction.simple", "reduction.convergent", "reduction.shared"]
    statuses = dict(zip(order, ["not implemented", PASSED, PASSED]))  # the check's verdicts
    log = []  # (stage, what), as it happened
    lock = threading.Lock()

    def note(*entry):
        with lock:
            log.append(entry)

    def result(exercise_id, status, phase, seconds):
        exercise = get(exercise_id)
        made = ExerciseResult(id=exercise_id, title=exercise.title, status=status,
                              score=exercise.points if status == PASSED else 0.0,
                              max_score=exercise.points, messages=[f"{phase}: {status}"],
                              mode=mode)
        made.add_time(phase, seconds)
        return made

    def fake_check(notebooks, check_mode, timeout, seed, progress, on_result=None):
        (part, cells, _), = notebooks  # the check: one notebook per process
        assert check_mode == mode and cells
        results = {}
        for exercise_id in part:
            time.sleep(0.3)  # time enough for a tool that did not wait to start
            results[exercise_id] = result(exercise_id, statuses[exercise_id], "check", 1.0)
            note("check", exercise_id)
            on_result({"result": results[exercise_id].to_dict()})
        return [results]

    def fake_simulate(notebooks, timeout, seed, progress):
        (part, cells, _), = notebooks
        note("simulate", tuple(part))
        return [{i: result(i, PASSED, "simulator", 2.0) for i in part}]

    def fake_sanitize(notebooks, timeout, seed, progress, tool_path, tool):
        (part, cells, _), = notebooks
        note(tool, tuple(part))
        assert tool_path == "/opt/cuda/bin/compute-sanitizer"
        race = Finding(tool, 1, ["Error: Race reported"])
        return [{i: (race if (tool, i) == ("racecheck", "reduction.shared")
                     else Finding(tool, 0, []), 3.0) for i in part}]

    def fake_profile(notebooks, timeout, progress):
        (part, cells, kernels), = notebooks  # one notebook, its cache in the environment
        note("profile", tuple(part))
        return [{i: ({"rules": []}, 4.0) for i in part}]

    monkeypatch.setattr(check, "run", fake_check)
    monkeypatch.setattr(simulate, "run", fake_simulate)
    monkeypatch.setattr(sanitize, "run", fake_sanitize)
    monkeypatch.setattr(profile, "run", fake_profile)
    monkeypatch.setattr(tools, "find_tool", lambda: "/opt/cuda/bin/compute-sanitizer")
    monkeypatch.setenv(tools.TOOLS_ENV, "memcheck,racecheck")
    monkeypatch.delenv(tools.SWITCH_ENV, raising=False)
    monkeypatch.setenv(grading.PROCESSES_ENV, "1")
    monkeypatch.setenv("WORKBOOK_KERNEL_CACHE", "0")

    report = grading.grade_notebook(load(REDUCTION), mode, exercises=order)
    got = results_by_id(report)
    if mode == "sim":
        assert [stage for stage, _ in log] == ["check"] * 3
        assert all(list(r.timings) == ["check"] for r in report.exercises)
        return
    first_judgeable = log.index(("check", "reduction.convergent"))
    tools_ran = [i for i, (stage, _) in enumerate(log) if stage != "check"]
    assert sorted(stage for stage, _ in log[first_judgeable + 1:]) == [
        "check", "memcheck", "profile", "racecheck", "simulate"], log
    assert min(tools_ran) > first_judgeable, f"a tool started before a judgeable result: {log}"
    assert log[-1] == ("profile", ("reduction.convergent",)), log  # last, the passed ones only
    assert got["reduction.simple"].status == "not implemented"
    assert list(got["reduction.simple"].timings) == ["check"]  # nothing to judge: no findings
    assert got["reduction.shared"].status == FAILED  # racecheck's finding
    assert "Race reported" in got["reduction.shared"].summary()
    assert got["reduction.shared"].timings == {"check": 1.0, "memcheck": 3.0, "racecheck": 3.0,
                                               "simulator": 2.0}
    assert got["reduction.convergent"].status == PASSED
    assert list(got["reduction.convergent"].timings.items()) == [
        ("check", 1.0), ("memcheck", 3.0), ("racecheck", 3.0), ("simulator", 2.0),
        ("profile", 4.0)]


# --- a batch task's notebooks: each checked on its own, the tools' runs shared -------------------

def test_a_job_names_one_notebook_s_exercises_by_id_and_several_notebooks_by_unit_key():
    from grader.job_units import job_exercises, per_notebook, split_unit, unit_key

    a = (["x.one", "x.two"], [{"source": "a"}], "/cache/a")
    b = (["x.one"], [{"source": "b"}], None)
    assert job_exercises([a]) == {"exercise_ids": ["x.one", "x.two"],
                                  "cells": [{"source": "a"}], "kernel_cache": "/cache/a"}
    assert job_exercises([a, b]) == {
        "exercise_ids": ["0:x.one", "0:x.two", "1:x.one"],
        "notebooks": [{"cells": [{"source": "a"}], "kernel_cache": "/cache/a"},
                      {"cells": [{"source": "b"}], "kernel_cache": ""}]}
    assert split_unit(unit_key(1, "x.one")) == (1, "x.one")
    assert split_unit("x.one") == (0, "x.one")
    assert per_notebook({"0:x.one": 1, "1:x.one": 2, "0:x.two": 3}, 3) == [
        {"x.one": 1, "x.two": 3}, {"x.one": 2}, {}]


def two_notebooks(tmp_path) -> list[tuple[list[str], list[dict], None]]:
    """Two students' notebooks: the first with a wrong reduction.simple, the second right."""
    order = ["reduction.simple", "reduction.convergent"]
    wrong = SIMPLE_OK.replace("output[0] = ", "output[0] = 1 + ")
    assert wrong != SIMPLE_OK
    convergent = SIMPLE_OK.replace("simple_sum_kernel", "convergent_sum_kernel")
    notebooks = []
    for name, simple in (("wrong", wrong), ("right", SIMPLE_OK)):
        path = write_notebook(tmp_path / f"{name}.ipynb", {"reduction.simple": simple,
                                                           "reduction.convergent": convergent})
        notebooks.append((order, [asdict(c) for c in load(path).program_for(order[-1])], None))
    return notebooks


def test_one_job_works_through_two_notebooks_each_in_its_own_namespace(tmp_path):
    """The first notebook's failed exercise restarts the process; the rest, the second
    notebook's exercises too, is graded, each result under its notebook's name."""
    from grader.job_units import job_exercises

    job = {"mode": workbook.MODE, "action": "check", **job_exercises(two_notebooks(tmp_path))}
    attempts = run_exercises(job, timeout=120)
    assert [a.started() for a in attempts] == [
        ["0:reduction.simple"], ["0:reduction.convergent", "1:reduction.simple",
                                 "1:reduction.convergent"]]
    results = {e["unit"]: ExerciseResult.from_dict(e["result"]).status
               for a in attempts for e in a.events if "result" in e}
    assert results == {"0:reduction.simple": FAILED, "0:reduction.convergent": PASSED,
                       "1:reduction.simple": PASSED, "1:reduction.convergent": PASSED}


def test_the_check_stage_gives_each_notebook_its_own_results(tmp_path):
    from grader.stages import check

    wrong, right = check.run(two_notebooks(tmp_path), workbook.MODE, 120, None)
    assert {i: r.status for i, r in wrong.items()} == {"reduction.simple": FAILED,
                                                       "reduction.convergent": PASSED}
    assert {i: r.status for i, r in right.items()} == {"reduction.simple": PASSED,
                                                       "reduction.convergent": PASSED}
    assert all(r.timings["check"] > 0 for r in [*wrong.values(), *right.values()])


@pytest.fixture
def tool_that_reports_a_race_in_the_second_notebook(tmp_path):
    """A stand-in compute-sanitizer that logs each start and adds a race report inside the
    part of the output that belongs to the second notebook's reduction.shared."""
    script = tmp_path / "compute-sanitizer"
    starts = tmp_path / "starts.txt"
    script.write_text(
        "#!/bin/sh\n"
        f"echo started >> {starts}\n"
        "while [ \"$1\" != \"" + sys.executable + "\" ]; do shift; done\n"
        f"\"$@\" | sed '/{MARKER} begin 1:reduction.shared/a {RACE_LINE}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), starts


def test_one_tool_run_covers_two_notebooks_and_blames_the_right_one(
        tool_that_reports_a_race_in_the_second_notebook):
    tool, starts = tool_that_reports_a_race_in_the_second_notebook
    order = ["reduction.simple", "reduction.shared"]
    cells = [asdict(c) for c in load(REDUCTION).program_for(order[-1])]
    seconds: list[dict[str, float]] = [{}, {}]
    first, second = tools.sanitize_notebooks(tool, "racecheck", [(order, cells, None)] * 2, 120,
                                             seconds=seconds, mode=workbook.MODE)
    assert starts.read_text().count("started") == 1, "one tool process for both notebooks"
    assert {i: f.errors for i, f in first.items()} == {"reduction.simple": 0,
                                                       "reduction.shared": 0}
    assert {i: f.errors for i, f in second.items()} == {"reduction.simple": 0,
                                                        "reduction.shared": 1}
    assert "Race reported" in second["reduction.shared"].message()
    assert all(set(s) == set(order) for s in seconds)


def test_the_pipeline_checks_each_notebook_alone_and_runs_each_tool_once(tmp_path, monkeypatch):
    """side_by_side over two notebooks: a check process per notebook, one run of each tool
    and one simulator pass for both; each finding amends its own notebook's result, and the
    check's marks go to each notebook's own kernel cache."""
    from grader import kernel_cache
    from grader.sanitizer import Finding
    from grader.stages import check, sanitize

    order = ["reduction.simple", "reduction.shared"]
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    for folder in folders:
        os.mkdir(folder)
    notebooks = [(order, [{"source": "a"}], folders[0]), (order, [{"source": "b"}], folders[1])]
    calls = []
    lock = threading.Lock()

    def result(exercise_id, phase):
        exercise = get(exercise_id)
        made = ExerciseResult(id=exercise_id, title=exercise.title, status=PASSED,
                              score=exercise.points, max_score=exercise.points, mode="gpu")
        made.add_time(phase, 1.0)
        return made

    def fake_check(given, check_mode, timeout, seed, progress, on_result=None):
        with lock:
            calls.append(("check", [cells[0]["source"] for _, cells, _ in given]))
        (part, _, _), = given
        results = {i: result(i, "check") for i in part}
        for made in results.values():
            on_result({"result": made.to_dict()})
        return [results]

    def fake_simulate(given, timeout, seed, progress):
        with lock:
            calls.append(("simulator", [cells[0]["source"] for _, cells, _ in given]))
        return [{i: result(i, "simulator") for i in part} for part, _, _ in given]

    def fake_sanitize(given, timeout, seed, progress, tool_path, tool):
        with lock:
            calls.append((tool, [cells[0]["source"] for _, cells, _ in given]))
        race = Finding(tool, 1, ["Error: Race reported"])
        return [{i: (race if (k, i) == (1, "reduction.shared") else Finding(tool, 0, []), 3.0)
                 for i in part} for k, (part, _, _) in enumerate(given)]

    monkeypatch.setattr(check, "run", fake_check)
    monkeypatch.setattr(grading.simulate, "run", fake_simulate)
    monkeypatch.setattr(sanitize, "run", fake_sanitize)
    monkeypatch.setattr(tools, "find_tool", lambda: "/opt/cuda/bin/compute-sanitizer")
    monkeypatch.setenv(tools.TOOLS_ENV, "memcheck,racecheck")
    monkeypatch.delenv(tools.SWITCH_ENV, raising=False)
    monkeypatch.setenv(grading.PROCESSES_ENV, "1")
    first, second = grading.side_by_side(notebooks, "gpu", 60, None, True,
                                         lambda phase, exercise_id: None)
    assert sorted(calls) == [("check", ["a"]), ("check", ["b"]), ("memcheck", ["a", "b"]),
                             ("racecheck", ["a", "b"]), ("simulator", ["a", "b"])]
    assert {i: r.status for i, r in first.items()} == {i: PASSED for i in order}
    assert second["reduction.simple"].status == PASSED
    assert second["reduction.shared"].status == FAILED
    assert "Race reported" in second["reduction.shared"].summary()
    assert first["reduction.shared"].timings == {"check": 1.0, "memcheck": 3.0,
                                                 "racecheck": 3.0, "simulator": 1.0}
    for folder in folders:
        marks = sorted(p.name for p in Path(folder).iterdir())
        assert marks == sorted(kernel_cache.CHECKED_MARK.format(i) for i in ("all", *order))


@pytest.mark.gpu
@needs_compute_sanitizer
def test_a_task_s_tools_blame_only_the_notebook_whose_barrier_is_missing(tmp_path):
    """Two notebooks through the check, sanitize and simulate stages together, on a GPU: the
    second lacks reduction.shared's barrier; racecheck, in one run for both, fails it there
    and only there, each notebook's kernels loaded from its own cache."""
    from grader import kernel_cache

    order = ["reduction.simple", "reduction.shared"]
    staged = []
    for _ in ("right", "racy"):
        with kernel_cache.for_notebook("gpu", remove=False):
            staged.append(grading.prepare(load(REDUCTION), "gpu", 300, exercises=order))
    for cell in staged[1].cells:
        if cell["exercise_id"] == "reduction.shared":
            cell["source"] = cell["source"].replace("        cuda.syncthreads()\n", "", 1)
    try:
        grading.run_stages(staged)
    finally:
        for s in staged:
            shutil.rmtree(s.kernels, ignore_errors=True)
    right, racy = (s.results for s in staged)
    assert all(r.status == PASSED for r in right.values()), [r.summary() for r in right.values()]
    assert racy["reduction.simple"].status == PASSED
    assert racy["reduction.shared"].status == FAILED
    assert "compute-sanitizer racecheck" in racy["reduction.shared"].summary()
