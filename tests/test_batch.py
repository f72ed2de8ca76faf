"""grader batch: a class of submissions graded on a Dask cluster, resumable, contained."""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from interrupts import default_sigint
from typer.testing import CliRunner

from grader.batch import BatchError, Options, discover, grade_class, safe_name
from grader.batch_cluster import (
    PROCESSES_ENV,
    ROLE_ENV,
    Machine,
    default_workers,
    local_cluster,
    local_worker_env,
)
from grader.batch_reports import (
    ClassSummary,
    Entry,
    feedback_markdown,
    gradescope_results,
    student_report,
)
from grader.cli import app
from grader.results import ExerciseResult

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "02_reduction" / "reduction.ipynb"
EXERCISES = ("reduction.simple", "reduction.convergent")  # the two quickest to grade
WRONG_STRIDE = ("reduction.simple", "stride *= 2", "stride *= 4")  # test_reduction_exercises
HANG = ("reduction.convergent", None, "while True:\n    pass\n")


def planted(dest: Path, bug=None) -> Path:
    """The reduction solution notebook, with ``bug`` = (exercise id, old, new) planted in
    that exercise's cell (old None: new replaces the whole cell)."""
    nb = nbformat.read(SOLUTION, as_version=4)
    if bug:
        exercise_id, old, new = bug
        (cell,) = [c for c in nb.cells if c.get("metadata", {}).get("workbook", {}).get(
            "exercise_id") == exercise_id and c.metadata.workbook.role == "exercise"]
        assert old is None or cell.source.count(old) == 1
        cell.source = new if old is None else cell.source.replace(old, new)
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest


def touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------- discovery (no grading)


def test_discovery_of_the_layouts(tmp_path):
    touch(tmp_path / "alice.ipynb", "{}")  # a bare notebook
    touch(tmp_path / "bob" / "ps1" / "reduction.ipynb", "{}")  # nbgrader submitted/<s>/<a>/
    touch(tmp_path / "bob" / "ps1" / "timestamp.txt", "2026")
    touch(tmp_path / "bob" / "ps2" / "softmax.ipynb", "{}")
    touch(tmp_path / "bob" / "ps1" / ".ipynb_checkpoints" / "reduction-checkpoint.ipynb", "{}")
    touch(tmp_path / "submission_123" / "work" / "reduction.ipynb", "{}")  # Gradescope
    touch(tmp_path / "submission_metadata.yml", "submission_123: {}\n")
    (tmp_path / "empty").mkdir()  # handed in nothing
    touch(tmp_path / ".hidden" / "x.ipynb", "{}")
    found = [(s.student, s.file, s.path) for s in discover(tmp_path)]
    assert found == [
        ("alice", "alice.ipynb", tmp_path / "alice.ipynb"),
        ("bob", "ps1/reduction.ipynb", tmp_path / "bob/ps1/reduction.ipynb"),
        ("bob", "ps2/softmax.ipynb", tmp_path / "bob/ps2/softmax.ipynb"),
        ("empty", "", None),
        ("submission_123", "work/reduction.ipynb",
         tmp_path / "submission_123" / "work" / "reduction.ipynb"),
    ]


def test_discovery_errors(tmp_path):
    with pytest.raises(BatchError, match="not a folder"):
        discover(tmp_path / "missing")
    touch(tmp_path / "notes.txt", "x")
    with pytest.raises(BatchError, match="no submissions"):
        discover(tmp_path)
    touch(tmp_path / "a b.ipynb", "{}")
    touch(tmp_path / "a_b.ipynb", "{}")
    with pytest.raises(BatchError, match="share the result file a_b.json"):
        discover(tmp_path)
    assert safe_name("../x y") == "_.._x_y" and safe_name("ok-1@x.edu") == "ok-1@x.edu"


# ---------------------------------------------------------------- reports (no grading)


def result(exercise_id, status, score=None, max_score=1.0, messages=(), cases=()):
    passed = status == "passed"
    return {"id": exercise_id, "title": exercise_id, "status": status, "passed": passed,
            "score": (max_score if passed else 0.0) if score is None else score,
            "max_score": max_score, "messages": list(messages), "cases": list(cases),
            "metrics": {}, "mode": "sim", "seconds": 0.1, "timings": {"check": 0.1}}


def notebook_report(*results):
    return {"path": "x.ipynb", "lesson": "02_reduction", "mode": "sim", "exercises":
            list(results), "warnings": [], "seconds": 1.0,
            "score": sum(r["score"] for r in results),
            "max_score": sum(r["max_score"] for r in results),
            "passed": all(r["passed"] for r in results)}


# messages as `grader check` printed them for a planted bug (stride *= 4 in reduction.simple),
# the second with other numbers: the same bug failing the same test with other inputs
WRONG_SUM = ("n=8, integers: expected 38 (float64 reference), got 12; |diff| 26 > tolerance "
             "1.29e-05 = gamma_4 * sum|x| with u = 5.96e-08 and 4 roundings in the longest "
             "addition chain (log2 n + 0 sequential block results + 1). It equals the sum of the "
             "first 4 elements only. [seed 3569644785]")
WRONG_SUM_2 = WRONG_SUM.replace("38", "41").replace("got 12", "got 9").replace(
    "|diff| 26", "|diff| 32").replace("3569644785", "77")
HANG_MESSAGE = ("did not finish within 20 s: an infinite loop, or threads waiting at a barrier "
                "some threads never reach?")


def failing(exercise_id, message, status="failed", max_score=1.0):
    return result(exercise_id, status, max_score=max_score, messages=[message],
                  cases=[{"name": "n=8, integers", "status": status, "message": message,
                          "seed": 1}])


def test_summary_says_who_failed_what_and_why():
    simple_ok = result("reduction.simple", "passed", messages=["all 6 tests passed (sim mode)"])
    convergent_ok = result("reduction.convergent", "passed", max_score=2.0)
    entries = {
        "ann": [Entry("a.ipynb", "h1", report=notebook_report(simple_ok, convergent_ok))],
        "ben": [Entry("b.ipynb", "h2", report=notebook_report(
            failing("reduction.simple", WRONG_SUM),
            failing("reduction.convergent", HANG_MESSAGE, "timeout", 2.0)))],
        "cat": [Entry("c.ipynb", "h3", report=notebook_report(
            failing("reduction.simple", WRONG_SUM_2), convergent_ok))],
        "cy|d": [Entry("c.ipynb", "h4", error="c.ipynb: not a readable Jupyter notebook")],
        "eve": [Entry("ps1/e.ipynb", "h5", report=notebook_report(simple_ok)),
                Entry("ps2/e.ipynb", "h6", error="ps2/e.ipynb: no exercise cells found")],
    }
    summary = ClassSummary("sim", ["ann", "ben", "cat", "cy|d", "dee", "eve"], entries,
                           {"dee": 1})
    rows = list(csv.DictReader(io.StringIO(summary.csv())))
    # totals out of every column's points (1 + 2); nothing graded: no score, not 0/0
    assert [(r["student"], r["status"], r["score"], r["max_score"]) for r in rows] == [
        ("ann", "passed", "3", "3"), ("ben", "failed", "0", "3"), ("cat", "failed", "2", "3"),
        ("cy|d", "not graded", "", ""), ("dee", "pending", "", ""),
        ("eve", "partly graded", "1", "3")]
    assert rows[1]["reduction.simple"] == "0" and rows[1]["reduction.convergent status"] == \
        "timeout"
    assert "not a readable" in rows[3]["errors"]
    md = summary.markdown()
    assert ("6 students (sim mode): 1 passed, 2 failed, 1 partly graded, 1 not graded, "
            "1 pending.") in md
    assert "Points: reduction.simple 1, reduction.convergent 2 (total 3)." in md
    assert "| ann | passed | 3/3 | 1/1 | 2/2 |" in md
    assert "| cy\\|d | not graded | — |  |  |" in md
    assert "| eve | partly graded | 1/3 | 1/1 |  |" in md
    why = md.split("## Why exercises failed", 1)[1].split("\n## ", 1)[0]
    assert "### reduction.simple: 2 of 4 failed" in why
    assert f"- ben (failed, 0/1): `{WRONG_SUM[:197]}...`" in why  # first line, 200 characters
    assert f"- cat (failed, 0/1): `{WRONG_SUM_2[:197]}...`" in why
    assert "### reduction.convergent: 1 of 3 failed" in why
    assert f"- ben (timeout, 0/2): `{HANG_MESSAGE}`" in why
    common = md.split("## Common failure reasons", 1)[1].split("\n## ", 1)[0]
    assert common.strip().splitlines() == [
        f"- **reduction.simple**, 2 students (ben, cat): `{WRONG_SUM[:197]}...`"]
    assert "- cy\\|d, c.ipynb: `c.ipynb: not a readable Jupyter notebook`" in md
    assert "- eve, ps2/e.ipynb: `ps2/e.ipynb: no exercise cells found`" in md
    assert md.rstrip().endswith("## Pending\n\ndee")


def test_summary_with_nothing_failed_or_shared():
    entries = {"ann": [Entry("a.ipynb", "h1", report=notebook_report(
        result("reduction.simple", "passed")))]}
    md = ClassSummary("gpu", ["ann"], entries, {}).markdown()
    assert "1 students (gpu mode): 1 passed." in md
    assert "Nobody failed an exercise." in md
    assert "No failure reason is shared by two or more students." in md


def test_headline_keeps_the_diagnosis_and_drops_the_details():
    from grader.batch_reports import headline

    # as `grader check` printed it for reduction.simple with stride *= 4
    wrong_sum = ("n=8, integers: expected 8 (float64 reference), got 2.\n"
                 "It equals the sum of the first 6 elements only.\n"
                 "(|diff| 6 > tolerance 4.77e-06 = gamma_4 * sum|x| with u = 5.96e-08 and 4 "
                 "roundings in the longest addition chain (log2 n + 0 sequential block results "
                 "+ 1))\n"
                 "seed 20126 reruns these inputs: check(\"reduction.simple\", seed=20126) in the "
                 "notebook, or grader check NOTEBOOK -e reduction.simple --seed 20126")
    assert headline(wrong_sum) == ("n=8, integers: expected 8 (float64 reference), got 2. It "
                                   "equals the sum of the first 6 elements only.")
    race = ("RaceError: racecheck: data race on shared memory partial[1] in block (0, 0, 0):\n"
            "  read by thread (0, 0, 0) (warp 0, lane 0) at <cell 21>:10 in shared_sum_kernel\n"
            "        partial[t] += partial[t + stride]")
    assert headline(race) == ("RaceError: racecheck: data race on shared memory partial[1] in "
                              "block (0, 0, 0):")
    assert headline("x" * 300) == "x" * 197 + "..."


def test_failure_reason_names_the_phase_that_failed():
    from grader.batch_reports import failure_reason
    from grader.metric_rules import format_outcome

    race = ("compute-sanitizer racecheck: 2 error(s), a data race on shared memory. First "
            "report:\n    Error: Race reported between Write access at shared_sum_kernel")
    sanitized = result("reduction.shared", "failed", messages=[
        "all 6 tests passed (gpu mode)", race, "simulator (small cases, sanitizer on): no "
        "findings"], cases=[{"name": "n=8", "status": "passed", "message": "", "seed": 1}])
    assert failure_reason(sanitized) == race
    rule = {"label": "instructions executed", "value": 2430.0, "reference": 1000.0,
            "ratio": 2.43, "rule": "<= 1.5x reference", "status": "failed"}
    passed_rule = dict(rule, label="duration", ratio=1.0, status="passed")
    slow = result("reduction.convergent", "failed", messages=[
        "all 6 tests passed (gpu mode)", format_outcome(passed_rule), format_outcome(rule)])
    assert failure_reason(slow) == format_outcome(rule)
    assert failure_reason(failing("reduction.simple", WRONG_SUM)) == WRONG_SUM
    stub = result("reduction.simple", "not implemented", messages=[
        "simple_sum_kernel still raises NotImplementedError: replace the stub with your code."])
    assert failure_reason(stub).startswith("simple_sum_kernel still raises")


def test_feedback_shows_each_failed_exercise_verbatim():
    located = ("RaceError: racecheck: data race on shared memory partial[1] at <cell 21>:10\n"
               "      input[t] += input[t + stride]\n    ``` and `x` stay as written")
    entries = [Entry("ps1/reduction.ipynb", "h1", report=notebook_report(
                   failing("reduction.simple", WRONG_SUM),
                   failing("reduction.shared", located, "error"),
                   result("reduction.convergent", "passed", max_score=2.0))),
               Entry("ps2/softmax.ipynb", "h2", error="ps2/softmax.ipynb: not a readable "
                                                      "Jupyter notebook <x>")]
    text = feedback_markdown("ben", entries)
    assert text.startswith("# Feedback for ben\n\nScore: 2 of 4 points (sim mode).")
    assert "| reduction.simple | failed | 0/1 |" in text
    assert "| reduction.convergent | passed | 2/2 |" in text
    assert "### reduction.convergent" not in text  # only what did not pass is explained
    # each exercise as the notebook's check prints it (ExerciseResult.summary), fenced
    simple = text.split("### reduction.simple: failed\n\n", 1)[1]
    shown = ExerciseResult.from_dict(failing("reduction.simple", WRONG_SUM)).summary()
    assert simple.startswith(f"```text\n{shown}\n```\n")
    assert shown.startswith("[FAILED] reduction.simple - reduction.simple (0/1)\n")
    assert WRONG_SUM in shown  # brackets and seed as written
    shared = text.split("### reduction.shared: error\n\n", 1)[1]
    shown = ExerciseResult.from_dict(failing("reduction.shared", located, "error")).summary()
    fence = "````"  # longer than the message's own ``` run
    assert shared.startswith(f"{fence}text\n{shown}\n{fence}\n")
    assert all(line.strip() in shown for line in located.splitlines())
    assert ("## ps2/softmax.ipynb: not graded\n\n```text\nps2/softmax.ipynb: not a readable "
            "Jupyter notebook <x>\n```") in text
    assert feedback_markdown("zed", []).endswith("Nothing was graded yet.\n")


def test_points_follow_the_size_of_the_solution():
    """docs/instructors.md, "Points": 1 point for a solution of up to 17 lines, 2 for 18-41,
    3 for 42 or more, as the lesson notebooks state it ("the solution has about N lines")."""
    import re

    from grader.exercises import LESSONS

    lines: dict[str, int] = {}
    for notebook in (ROOT / "lessons").glob("*/*.ipynb"):
        for cell in nbformat.read(notebook, as_version=4).cells:
            meta = cell.get("metadata", {}).get("workbook", {})
            if meta.get("role") == "exercise":
                counted = re.findall(r"the solution has about (\d+) lines?\b", cell.source)
                lines[meta["exercise_id"]] = (lines.get(meta["exercise_id"], 0)
                                              + sum(map(int, counted)))
    declared = {e.id: e.points for exercises in LESSONS.values() for e in exercises}
    assert set(lines) == set(declared)
    wrong = {i: (n, declared[i]) for i, n in lines.items()
             if declared[i] != (1 if n <= 17 else 2 if n <= 41 else 3)}
    assert not wrong, f"(solution lines, declared points) off the rule: {wrong}"
    assert len({p for p in declared.values()}) == 3  # the rule is not all one value


def test_student_files_round_trip_and_name_errors():
    entries = [Entry("a.ipynb", "h1", report=notebook_report(result("reduction.simple",
                                                                      "passed"))),
               Entry("b.ipynb", "h2", error="b.ipynb: no such notebook")]
    data = json.loads(json.dumps(student_report("ann", entries)))
    assert data["student"] == "ann" and data["schema_version"] == 1
    assert data["score"] == 1 and data["passed"] is False  # an error is not a pass
    assert data["notebooks"][0]["submission"] == {"file": "a.ipynb", "fingerprint": "h1"}
    assert data["errors"] == [{"file": "b.ipynb", "fingerprint": "h2",
                               "error": "b.ipynb: no such notebook"}]
    scope = gradescope_results(entries)
    assert scope["score"] == 1 and len(scope["tests"]) == 1
    assert "not graded:\nb.ipynb: b.ipynb: no such notebook" in scope["output"]


# ---------------------------------------------------------------- grading a class


@pytest.fixture(scope="module")
def scheduler():
    """An in-process Dask cluster of two single-threaded workers (the grading itself runs
    in child processes, as always)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


def grade(root, out, scheduler, graded=None, **options):
    on_result = (lambda sub, entry: graded.append(sub.key)) if graded is not None else None
    # 60 s without progress: the hanging notebook costs that much, and a correct exercise
    # (its process start included) stays well within it on a loaded two-core machine
    return grade_class(root, out, mode="sim", exercises=EXERCISES, timeout=60,
                       scheduler=scheduler, on_result=on_result, **options)


def test_a_class_is_graded_contained_and_resumed(tmp_path, scheduler):
    root, out = tmp_path / "submitted", tmp_path / "grades"
    planted(root / "alice.ipynb")
    planted(root / "bob" / "ps1" / "reduction.ipynb", WRONG_STRIDE)
    planted(root / "carol.ipynb", HANG)
    touch(root / "dave.ipynb", "{not json")
    (root / "erin").mkdir()
    graded: list[str] = []
    result = grade(root, out, scheduler, graded)

    assert sorted(graded) == ["alice/alice.ipynb", "bob/ps1/reduction.ipynb",
                              "carol/carol.ipynb", "dave/dave.ipynb"]
    assert result.students == {"alice": "passed", "bob": "failed", "carol": "failed",
                               "dave": "not graded", "erin": "not graded"}
    assert result.student_counts() == "1 passed, 2 failed, 2 not graded"
    assert not result.passed and result.exercises == 6

    def exercises(student):
        data = json.loads((out / f"{student}.json").read_text())
        return {e["id"]: e["status"] for nb in data["notebooks"] for e in nb["exercises"]}

    assert exercises("alice") == {"reduction.simple": "passed", "reduction.convergent": "passed"}
    assert exercises("bob") == {"reduction.simple": "failed", "reduction.convergent": "passed"}
    assert exercises("carol") == {"reduction.simple": "passed",
                                  "reduction.convergent": "timeout"}
    dave = json.loads((out / "dave.json").read_text())
    assert "not a readable Jupyter notebook" in dave["errors"][0]["error"]
    assert json.loads((out / "erin.json").read_text())["errors"][0]["error"] == \
        "no notebook in the submission"
    scope = json.loads((out / "bob.gradescope.json").read_text())
    assert scope["score"] == 1 and {t["status"] for t in scope["tests"]} == {"passed",
                                                                             "failed"}
    md = (out / "summary.md").read_text()
    assert "5 students (sim mode): 1 passed, 2 failed, 2 not graded." in md
    bob_says = json.loads((out / "bob.json").read_text())["notebooks"][0]["exercises"][0]
    assert bob_says["id"] == "reduction.simple"
    first = bob_says["messages"][0].splitlines()[0]
    assert f"### reduction.simple: 1 of 3 failed\n\n- bob (failed, 0/1): `{first[:150]}" in md
    bob_line = md.split("- bob (failed, 0/1): ", 1)[1].splitlines()[0]
    assert "seed" not in bob_line  # the reason, without its rerun note
    assert "### reduction.convergent: 1 of 3 failed\n\n- carol (timeout, 0/1): `did not " in md
    assert "| dave | not graded | — |" in md
    assert "- dave, dave.ipynb:" in md and "- erin, submission: `no notebook" in md
    feedback = (out / "bob.feedback.md").read_text()  # the grader's message, verbatim
    assert "### reduction.simple: failed" in feedback
    assert all(line in feedback for line in bob_says["messages"][0].splitlines())
    assert "Every exercise passed." in (out / "alice.feedback.md").read_text()
    assert "no notebook in the submission" in (out / "erin.feedback.md").read_text()
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
        (out / "summary.csv").read_text()))}
    assert rows["alice"]["score"] == "2" and rows["bob"]["reduction.simple status"] == "failed"

    # a re-run grades nothing that is graded and unchanged (the unreadable one is retried)
    (out / "alice.feedback.md").unlink()  # as a grader without feedback files left it
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("[abc]*")}
    graded.clear()
    again = grade(root, out, scheduler, graded)
    assert graded == ["dave/dave.ipynb"]
    assert sorted(again.reused) == ["alice/alice.ipynb", "bob/ps1/reduction.ipynb",
                                    "carol/carol.ipynb"]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("[abc]*")
            if p.name != "alice.feedback.md"} == kept  # unchanged files are not rewritten
    assert "Every exercise passed." in (out / "alice.feedback.md").read_text()
    assert again.students == result.students

    # bob fixes his notebook: only his is graded again
    planted(root / "bob" / "ps1" / "reduction.ipynb")
    graded.clear()
    third = grade(root, out, scheduler, graded)
    assert sorted(graded) == ["bob/ps1/reduction.ipynb", "dave/dave.ipynb"]
    assert third.students["bob"] == "passed" and exercises("bob")["reduction.simple"] == "passed"
    assert "bob (failed" not in (out / "summary.md").read_text()
    assert "Every exercise passed." in (out / "bob.feedback.md").read_text()


def test_force_grades_again(tmp_path, scheduler):
    root, out = tmp_path / "in", tmp_path / "out"
    planted(root / "alice.ipynb")
    graded: list[str] = []
    for force in (False, True):
        grade_class(root, out, mode="sim", exercises=EXERCISES[:1], scheduler=scheduler,
                    on_result=lambda sub, entry: graded.append(sub.key), force=force)
    assert graded == ["alice/alice.ipynb"] * 2
    exercises = json.loads((out / "alice.json").read_text())["notebooks"][0]["exercises"]
    assert [e["id"] for e in exercises] == ["reduction.simple"]


def test_fingerprint_covers_content_and_options():
    base = Options("sim", ("reduction.simple",))
    prints = {base.fingerprint(b"nb"), base.fingerprint(b"nb2"),
              Options("gpu", ("reduction.simple",)).fingerprint(b"nb"),
              Options("sim").fingerprint(b"nb"),
              Options("sim", ("reduction.simple",), seed=7).fingerprint(b"nb"),
              Options("sim", ("reduction.simple",), timeout=5).fingerprint(b"nb"),
              Options("sim", ("reduction.simple",), sanitizers=False).fingerprint(b"nb")}
    assert len(prints) == 7
    assert base.fingerprint(b"nb") == Options("sim", ("reduction.simple",)).fingerprint(b"nb")


@pytest.mark.sim_only
def test_gpu_mode_needs_workers_with_a_gpu(tmp_path, scheduler):
    from workbook.mode import ModeError

    planted(tmp_path / "in" / "alice.ipynb")
    with pytest.raises(ModeError, match="no GPU"):
        grade_class(tmp_path / "in", tmp_path / "out", mode="gpu", scheduler=scheduler)
    assert not list((tmp_path / "out").glob("*.json"))


def test_cli_usage_errors():
    runner = CliRunner()
    unknown = runner.invoke(app, ["batch", str(ROOT / "solutions"), "-e", "reduction.nope"])
    assert unknown.exit_code == 2 and "unknown exercise 'reduction.nope'" in unknown.output
    both = runner.invoke(app, ["batch", str(ROOT / "solutions"), "--workers", "2",
                               "--scheduler", "tcp://127.0.0.1:1"])
    assert both.exit_code == 2 and "--workers sizes the local cluster" in both.output
    for extra in (["--profile-workers", "-1"],
                  ["--profile-workers", "2", "--scheduler", "tcp://127.0.0.1:1"]):
        bad = runner.invoke(app, ["batch", str(ROOT / "solutions"), *extra])
        assert bad.exit_code == 2 and "--profile-workers adds profile workers" in bad.output


def test_cli_local_cluster_interrupted_keeps_results(tmp_path):
    """The default local cluster (worker processes); Ctrl-C leaves every result written so
    far, and no grading process behind."""
    root, out = tmp_path / "in", tmp_path / "out"
    planted(root / "alice.ipynb")
    planted(root / "carol.ipynb", ("reduction.simple", None, "while True:\n    pass\n"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader.cli", "batch", str(root), "--out", str(out),
         "--mode", "sim", "--workers", "2", "-e", "reduction.simple", "--timeout", "600"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # a process group of its own, as a terminal gives it
        preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        while not (out / "alice.json").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.2)
        assert (out / "alice.json").exists(), "alice was not graded in 120 s"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, output
    assert "interrupted" in output
    assert json.loads((out / "alice.json").read_text())["passed"] is True
    assert not (out / "carol.json").exists()
    assert "## Pending\n\ncarol" in (out / "summary.md").read_text()
    assert not list(out.glob(".*.tmp"))
    time.sleep(1)
    left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
            if any(str(scratch) in part for part in p.info["cmdline"] or ())]
    assert not left, f"grading processes left running: {left}"


GiB = 1 << 30


@pytest.mark.parametrize("machine,mode,expected", [
    # the measured H100 machines (docs/instructors.md): 6 workers was the best setting on 16
    # cores (43.5 exercises/min, against 12.6 with one worker), 12 on two GPUs and 32 cores
    (Machine(16, 128 * GiB, (("0", 80 * GiB),)), "gpu", [6]),
    (Machine(32, 256 * GiB, (("0", 80 * GiB), ("1", 80 * GiB))), "gpu", [6, 6]),
    (Machine(8, 64 * GiB, (("0", 80 * GiB),)), "gpu", [3]),  # 8 / 2.5
    (Machine(32, 128 * GiB, (("0", 8 * GiB),)), "gpu", [2]),  # 8 GiB / 4 GiB per worker
    (Machine(64, 16 * GiB, (("0", 80 * GiB),)), "gpu", [4]),  # host memory: 16 / 4 GiB
    (Machine(2, 16 * GiB, (("0", 80 * GiB), ("1", 80 * GiB))), "gpu", [1, 1]),  # >= 1 per GPU
    (Machine(16, 0, (("0", 0),)), "gpu", [6]),  # memory unknown: the cores decide
    (Machine(16, 64 * GiB), "sim", [16]),  # one per core
    (Machine(16, 8 * GiB), "sim", [8]),  # one per GiB of host memory
    (Machine(1, 0), "sim", [1]),
])
def test_default_workers_follow_the_sizing_rule(machine, mode, expected):
    assert default_workers(mode, machine) == expected


def test_local_cluster_workers_per_gpu_and_core(monkeypatch, tmp_path):
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    two = Machine(32, 256 * GiB, (("3", 80 * GiB), ("5", 80 * GiB)))
    envs = local_worker_env("gpu", None, two)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["3", "5"] * 6  # the GPUs in turn
    assert {e[ROLE_ENV] for e in envs} == {"stage"}  # no profile workers unless asked for
    # --profile-workers 2: two more per GPU, on its GPU and with its temporary folder
    envs = local_worker_env("gpu", None, two, profilers=2)
    stage = [e for e in envs if e[ROLE_ENV] == "stage"]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in stage] == ["3", "5"] * 6
    profile = [e for e in envs if e[ROLE_ENV] == "profile"]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in profile] == ["3", "3", "5", "5"]
    assert len(envs) == len(stage) + len(profile)
    assert {e["WORKBOOK_MODE"] for e in envs} == {"gpu"}
    assert {e[PROCESSES_ENV] for e in envs} == {"1"}  # 32 cores / 12 workers: under 6 each
    # ncu's lock file lives in TMPDIR: one folder per GPU, shared by that GPU's workers
    folders = {d: {e["TMPDIR"] for e in envs if e["CUDA_VISIBLE_DEVICES"] == d} for d in "35"}
    assert all(len(f) == 1 for f in folders.values()), folders
    assert folders["3"] != folders["5"]
    for (folder,) in folders.values():
        assert Path(folder).is_dir() and Path(folder).parent == tmp_path
    assert [e["CUDA_VISIBLE_DEVICES"] for e in local_worker_env("gpu", 3, two)
            if e[ROLE_ENV] == "stage"] == ["3", "5", "3"]
    one = Machine(16, 128 * GiB, (("0", 80 * GiB),))
    assert [e[PROCESSES_ENV] for e in local_worker_env("gpu", 1, one)
            if e[ROLE_ENV] == "stage"] == ["2"]  # 16 // 6
    sim = local_worker_env("sim", None, Machine(4, 64 * GiB))
    assert len(sim) == 4 and sim[0]["NUMBA_ENABLE_CUDASIM"] == "1"
    assert {e[ROLE_ENV] for e in sim} == {"stage"}
    # sim mode has nothing to profile: no profile workers even when asked for
    assert len(local_worker_env("sim", 2, Machine(4, 0), profilers=2)) == 2
    assert sim[0][PROCESSES_ENV] == "1"  # a core per worker: one grading process each
    monkeypatch.setenv(PROCESSES_ENV, "2")
    assert [e[PROCESSES_ENV] for e in local_worker_env("sim", 2, Machine(4, 0))] == ["2", "2"]


def test_every_gpu_s_workers_share_one_bytecode_cache(monkeypatch, tmp_path):
    """Where the environment turns bytecode off, the grading processes share a cache of
    their own; a worker's per-GPU TMPDIR must not give each GPU a cold one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    two = Machine(32, 256 * GiB, (("3", 80 * GiB), ("5", 80 * GiB)))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    envs = local_worker_env("gpu", None, two)
    assert {e["PYTHONPYCACHEPREFIX"] for e in envs} == {
        str(tmp_path / f"workbook-{os.getuid()}-bytecode")}
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    if not sys.flags.dont_write_bytecode:
        assert not any("PYTHONPYCACHEPREFIX" in e for e in local_worker_env("gpu", None, two))


def test_machine_detection(monkeypatch):
    from dask.system import CPU_COUNT

    import grader.batch_cluster
    import workbook.mode

    monkeypatch.setattr(workbook.mode, "gpu_count", lambda: 2)
    monkeypatch.setattr(grader.batch_cluster, "gpu_memory", lambda n: [80 * GiB] * n)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    machine = Machine.detect("gpu")
    assert machine.cores == CPU_COUNT and machine.memory > 0
    assert machine.gpus == (("0", 80 * GiB), ("1", 80 * GiB))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a, GPU-b")
    assert [name for name, _ in Machine.detect("gpu").gpus] == ["GPU-a", "GPU-b"]
    assert Machine.detect("sim").gpus == ()


@pytest.mark.gpu
def test_gpu_class_on_the_default_local_cluster(tmp_path):
    """gpu mode, the default cluster: sized from this machine, each worker on one GPU."""
    root, out = tmp_path / "in", tmp_path / "out"
    planted(root / "alice.ipynb")
    planted(root / "bob.ipynb", WRONG_STRIDE)
    result = grade_class(root, out, mode="gpu", exercises=EXERCISES[:1], metrics=False)
    assert result.mode == "gpu"
    assert result.workers == sum(default_workers("gpu", Machine.detect("gpu")))  # stage workers
    assert result.students == {"alice": "passed", "bob": "failed"}
    bob = json.loads((out / "bob.json").read_text())["notebooks"][0]
    assert bob["mode"] == "gpu" and bob["exercises"][0]["status"] == "failed"


def test_two_local_clusters_run_side_by_side():
    """Two instructors' batches on one machine (or two test workers) need their own ports."""
    envs = [{"WORKBOOK_MODE": "sim", "NUMBA_ENABLE_CUDASIM": "1"}]
    with local_cluster(envs) as first, local_cluster(envs) as second:
        assert first.scheduler_address != second.scheduler_address
        assert len(first.scheduler_info["workers"]) == len(second.scheduler_info["workers"]) == 1


def test_an_interrupt_between_a_result_s_writes_leaves_the_summary_right(tmp_path, monkeypatch):
    """Ctrl-C can come after a result's own files are written and before the summary is: the
    flush after the interrupt rewrites the summary from what was recorded (alice done, carol
    pending), as the interrupted batch's files must say."""
    from grader.batch import Submission, _Results
    from grader.batch_reports import Entry

    subs = [Submission("alice", "a.ipynb", tmp_path / "a.ipynb"),
            Submission("carol", "c.ipynb", tmp_path / "c.ipynb")]
    results = _Results(tmp_path, "sim", subs)
    for sub in subs:
        results.pending[sub.student] += 1
    results.write_summary()
    real = results.write_summary

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "write_summary", interrupted)
    with pytest.raises(KeyboardInterrupt):
        results.record(subs[0], Entry("a.ipynb", "f", error="no exercise cells"))
    assert (tmp_path / "alice.json").exists()
    assert "## Pending\n\nalice, carol" in (tmp_path / "summary.md").read_text()  # stale
    monkeypatch.setattr(results, "write_summary", real)
    results.flush()
    assert "## Pending\n\ncarol\n" in (tmp_path / "summary.md").read_text()


# ---------------------------------------------------------------- tasks of several notebooks


@pytest.mark.parametrize("mode, metrics, notebooks, workers, expected", [
    ("gpu", True, 24, 6, 2),  # two tasks per worker
    ("gpu", True, 500, 6, 3),  # at most three to a task
    ("gpu", True, 5, 6, 1),
    ("gpu", False, 24, 6, 1),  # no ncu run to share
    ("sim", True, 24, 6, 1),
])
def test_a_task_grades_a_few_notebooks_only_where_they_share_an_ncu_run(
        mode, metrics, notebooks, workers, expected):
    from grader.batch import PROFILE_GROUP_MAX, group_size

    assert PROFILE_GROUP_MAX == 3
    assert group_size(notebooks, workers, Options(mode, metrics=metrics)) == expected


@pytest.mark.parametrize(("notebooks", "workers", "expected"), [
    (24, 6, [1, 2, 3, 1, 2, 3, 3, 2, 1, 3, 2, 1]),  # tasks of two: two staggered rounds
    (20, 5, [1, 2, 3, 1, 2, 3, 2, 1, 3, 2]),
    (10, 2, [1, 2, 3, 2, 2]),
    (18, 6, [1, 2, 3, 1, 2, 3, 3, 2, 1]),  # the second round cut short
    (72, 6, [2, 3, 3, 2, 3, 3, 3, 3, 2, 3, 3, 2, *[3] * 13, 1]),  # tasks of three: at most 3
    (12, 6, [1] * 12),  # tasks of one: nothing to stagger
])
def test_the_first_two_rounds_of_a_batch_hold_tasks_of_staggered_sizes(
        notebooks, workers, expected):
    """One fewer, as many and one more notebook than the others in turn, then the mirror image;
    every notebook in exactly one task."""
    from grader.batch import task_sizes

    sizes = task_sizes(notebooks, workers, Options("gpu", metrics=True))
    assert sizes == expected
    assert sum(sizes) == notebooks


def test_a_batch_without_profiles_grades_a_notebook_a_task():
    from grader.batch import task_sizes

    assert task_sizes(24, 6, Options("sim", metrics=True)) == [1] * 24
    assert task_sizes(24, 6, Options("gpu", metrics=False)) == [1] * 24


def test_a_task_of_several_notebooks_reports_each_on_its_own(tmp_path):
    """grade_submissions: each notebook gets its own outcome, in order, its own path in its
    messages; one that cannot be read costs only itself."""
    from grader.batch import grade_submissions

    good = planted(tmp_path / "alice.ipynb").read_bytes()
    wrong = planted(tmp_path / "bob.ipynb", WRONG_STRIDE).read_bytes()
    options = {"mode": "sim", "exercises": ["reduction.simple"], "metrics": True,
               "sanitizers": True, "timeout": 60.0, "seed": None}
    outcomes = grade_submissions([("a.ipynb", "in/alice.ipynb", good),
                                  ("broken.ipynb", "in/carol.ipynb", b"{not json"),
                                  ("b.ipynb", "in/bob.ipynb", wrong)], options)
    assert [sorted(o) for o in outcomes] == [["report", "worker"], ["error", "worker"],
                                            ["report", "worker"]]
    alice, carol, bob = outcomes
    assert alice["report"]["path"] == "in/alice.ipynb" and alice["report"]["passed"]
    assert bob["report"]["path"] == "in/bob.ipynb" and not bob["report"]["passed"]
    assert "in/carol.ipynb" in carol["error"]


def test_a_grader_failure_in_the_stages_costs_the_task_s_notebooks_each_under_its_name(
        tmp_path, monkeypatch):
    """The stages of a task's notebooks run together: a failure of the grader there is
    reported for each of them, under its own name, and their kernel caches are removed; a
    notebook that could not be read keeps its own error."""
    from grader import grade, kernel_cache
    from grader.batch import grade_submissions

    caches = []

    def broken(staged, *args):
        caches.extend(s.kernels for s in staged)
        raise RuntimeError(f"stages failed for {staged[-1].report.path}")

    monkeypatch.setattr(grade, "run_stages", broken)
    monkeypatch.setattr(kernel_cache, "for_notebook", gpu_cache(kernel_cache.for_notebook))
    good = planted(tmp_path / "alice.ipynb").read_bytes()
    options = {"mode": "sim", "exercises": ["reduction.simple"], "metrics": True,
               "sanitizers": True, "timeout": 60.0, "seed": None}
    alice, carol, bob = grade_submissions([("a.ipynb", "in/alice.ipynb", good),
                                           ("broken.ipynb", "in/carol.ipynb", b"{not json"),
                                           ("b.ipynb", "in/bob.ipynb", good)], options)
    assert alice["error"].startswith("the grader failed on this notebook:")
    assert "stages failed for in/bob.ipynb\n" in bob["error"]  # not a path below it
    assert "grader-batch-" not in alice["error"] + bob["error"]
    assert "bob" not in alice["error"]  # another student's notebook is named by no name
    assert "stages failed for <another notebook of the task>" in alice["error"]
    assert "in/carol.ipynb" in carol["error"] and "grader failed" not in carol["error"]
    assert len(caches) == 2 and all(c and not os.path.exists(c) for c in caches)


def gpu_cache(for_notebook):
    """kernel_cache.for_notebook as in gpu mode, whatever the mode: a folder per notebook."""
    def made(mode, folder=None, remove=True):
        return for_notebook("gpu", folder, remove)

    return made


def test_a_grader_failure_after_the_stages_names_each_notebook_as_shown(tmp_path, monkeypatch):
    """A failure of the profile stage or the report costs the task's notebooks their
    results, each reported under its own name, never the worker's temporary path, and
    another student's notebook under no name."""
    from grader import grade
    from grader.batch import grade_submissions

    def broken(staged, *args):
        raise RuntimeError(f"report failed for {staged[0].report.path}")

    monkeypatch.setattr(grade, "profile_and_report", broken)
    good = planted(tmp_path / "alice.ipynb").read_bytes()
    options = {"mode": "sim", "exercises": ["reduction.simple"], "metrics": True,
               "sanitizers": True, "timeout": 60.0, "seed": None}
    outcome, bob = grade_submissions([("a.ipynb", "in/alice.ipynb", good),
                                      ("b.ipynb", "in/bob.ipynb", good)], options)
    assert outcome["error"].startswith("the grader failed on this notebook:")
    assert "report failed for in/alice.ipynb\n" in outcome["error"]  # not a path below it
    assert "grader-batch-" not in outcome["error"] + bob["error"]
    assert "report failed for <another notebook of the task>\n" in bob["error"]  # no name


# --- gpu mode with metrics: stages and profiles as tasks of their own -----------------------------

def test_the_profile_queue_hands_each_free_profile_worker_what_waited():
    from grader.batch_profiles import ProfileQueue

    queue = ProfileQueue(workers=2, most=3)
    assert queue.ready() == []
    queue.add("a")
    assert queue.ready() == [["a"]]  # a free worker takes one notebook at once
    for name in "bcdef":
        queue.add(name)
    assert queue.ready() == [["b", "c", "d"]]  # the other worker: at most three
    assert queue.ready() == [] and queue.waiting == ["e", "f"]  # none free
    queue.done()
    queue.done()
    queue.add("g")
    assert queue.ready() == [["e", "f", "g"]]
    assert queue.free == 1


def test_local_cluster_workers_hold_their_role_s_resource():
    from distributed import Client

    from grader.batch_profiles import cluster_roles

    envs = [{"WORKBOOK_MODE": "sim", "NUMBA_ENABLE_CUDASIM": "1", ROLE_ENV: role}
            for role in ("stage", "stage", "profile")]
    with local_cluster(envs) as cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(3)
        assert cluster_roles(client) == {"stage": 2, "profile": 1}


def stand_in_stage(item, options):
    """grader.batch_profiles.stage_submission's stand-in: a notebook staged, or an error."""
    from distributed import get_worker

    name, shown_as, content = item
    assert get_worker().name.startswith("stage-"), get_worker().name  # else: an error outcome
    if content == b"broken":
        return {"error": f"{shown_as}: not a notebook", "worker": get_worker().name}
    return {"staged": SimpleNamespace(name=shown_as, kernels=None), "worker": get_worker().name}


def stand_in_profile(staged, shown_as):
    """grader.batch_profiles.profile_staged's stand-in: a report per staged notebook, with
    the profile worker and the size of its group."""
    from distributed import get_worker

    from grader.grade import NotebookReport

    assert [s.name for s in staged] == shown_as
    reports = []
    for name in shown_as:
        report = NotebookReport(name, "02_reduction", "gpu").to_dict()
        report["warnings"] = [f"profiled by {get_worker().name} with {len(staged)}"]
        reports.append({"report": report, "worker": get_worker().name})
    return reports


def test_gpu_batch_stages_on_stage_workers_and_profiles_on_profile_workers(tmp_path,
                                                                          monkeypatch):
    """The client's side of gpu mode with metrics, on an in-process cluster of two stage and
    one profile worker: each notebook is staged on a stage worker, then profiled on the
    profile worker in groups of at most three; one whose stages end in an error is done
    without a profile; every notebook is recorded once."""
    from distributed import SpecCluster, Worker

    from grader import batch

    monkeypatch.setattr(batch, "stage_submission", stand_in_stage)
    monkeypatch.setattr(batch, "profile_staged", stand_in_profile)
    monkeypatch.setattr(batch, "_worker_mode", lambda requested: "gpu")
    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    students = [f"s{k}" for k in range(7)]
    for student in students:
        (root / f"{student}.ipynb").write_bytes(b"broken" if student == "s3" else b"{}")
    workers = {name: {"cls": Worker, "options": {"nthreads": 1, "resources": {role: 1}}}
               for name, role in (("stage-a", "stage"), ("stage-b", "stage"),
                                  ("profile-a", "profile"))}
    scheduler = {"cls": "distributed.Scheduler", "options": {"dashboard_address": ":0"}}
    graded = []
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster:
        result = grade_class(root, out, mode="gpu", scheduler=cluster.scheduler_address,
                             on_result=lambda sub, entry: graded.append((sub.student, entry)))
    assert sorted(student for student, _ in graded) == students
    assert result.workers == 2  # the stage workers
    by_student = dict(graded)
    assert by_student["s3"].error == f"{root / 's3.ipynb'}: not a notebook"
    assert all(by_student[s].error is None for s in students if s != "s3")
    profiled = [by_student[s].report["warnings"][0] for s in students if s != "s3"]
    assert all(line.startswith("profiled by profile-a with ") for line in profiled), profiled
    assert all(1 <= int(line.rsplit(" ", 1)[1]) <= 3 for line in profiled), profiled


def test_a_notebook_staged_on_one_worker_is_reported_by_another(tmp_path):
    """stage_submission and profile_staged, run directly (sim mode: nothing to profile):
    the staged notebook travels as data, its report carries the name it is shown as, and
    one that cannot be read ends after its stages with its error."""
    import pickle

    from grader.batch_profiles import profile_staged, stage_submission

    good = planted(tmp_path / "alice.ipynb").read_bytes()
    options = {"mode": "sim", "exercises": ["reduction.simple"], "metrics": True,
               "sanitizers": True, "timeout": 60.0, "seed": None}
    staged = stage_submission(("a.ipynb", "in/alice.ipynb", good), options)
    assert sorted(staged) == ["staged", "worker"]
    notebook = pickle.loads(pickle.dumps(staged["staged"]))  # as it reaches the client
    (outcome,) = profile_staged([notebook], ["in/alice.ipynb"])
    assert outcome["report"]["path"] == "in/alice.ipynb" and outcome["report"]["passed"]
    broken = stage_submission(("b.ipynb", "in/bob.ipynb", b"{not json"), options)
    assert sorted(broken) == ["error", "worker"] and "in/bob.ipynb" in broken["error"]
