"""grader batch: a class of submissions graded on a Dask cluster, resumable, contained."""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from test_watchdog import default_sigint
from typer.testing import CliRunner

from grader.batch import (
    BatchError,
    ClassSummary,
    Entry,
    Options,
    discover,
    grade_class,
    gradescope_results,
    local_cluster,
    safe_name,
    student_report,
)
from grader.cli import app

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


def result(exercise_id, status, score=None):
    return {"id": exercise_id, "title": exercise_id, "status": status, "passed":
            status == "passed", "score": float(status == "passed") if score is None else score,
            "max_score": 1.0, "messages": [], "cases": [], "metrics": {}, "mode": "sim",
            "seconds": 0.1, "timings": {"check": 0.1}}


def notebook_report(*results):
    return {"path": "x.ipynb", "lesson": "02_reduction", "mode": "sim", "exercises":
            list(results), "warnings": [], "seconds": 1.0, "score": 0, "max_score": 0,
            "passed": all(r["passed"] for r in results)}


def test_summary_lists_who_failed_what():
    entries = {
        "ann": [Entry("a.ipynb", "h1", report=notebook_report(
            result("reduction.simple", "passed"), result("reduction.convergent", "passed")))],
        "ben": [Entry("b.ipynb", "h2", report=notebook_report(
            result("reduction.simple", "failed"), result("reduction.convergent", "timeout")))],
        "cy|d": [Entry("c.ipynb", "h3", error="c.ipynb: not a readable Jupyter notebook")],
    }
    summary = ClassSummary("sim", ["ann", "ben", "cy|d", "dee"], entries, {"dee": 1})
    rows = list(csv.DictReader(io.StringIO(summary.csv())))
    assert [(r["student"], r["status"], r["score"]) for r in rows] == [
        ("ann", "passed", "2"), ("ben", "failed", "0"), ("cy|d", "error", "0"),
        ("dee", "pending", "0")]
    assert rows[1]["reduction.simple"] == "0" and rows[1]["reduction.convergent status"] == \
        "timeout"
    assert "not a readable" in rows[2]["errors"]
    md = summary.markdown()
    assert "3 of 4 students graded (sim mode); 1 passed everything" in md
    assert "| ann | passed | 2/2 | 1/1 | 1/1 |" in md
    assert "- **reduction.simple** (1 of 2): ben (failed)" in md
    assert "- **reduction.convergent** (1 of 2): ben (timeout)" in md
    assert "- cy\\|d, c.ipynb: c.ipynb: not a readable Jupyter notebook" in md
    assert md.rstrip().endswith("## Pending\n\ndee")


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
    return grade_class(root, out, mode="sim", exercises=EXERCISES, timeout=15,
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
                               "dave": "error", "erin": "error"}
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
    assert "- **reduction.simple** (1 of 3): bob (failed)" in md
    assert "- **reduction.convergent** (1 of 3): carol (timeout)" in md
    assert "- dave, dave.ipynb:" in md and "- erin, submission: no notebook" in md
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
        (out / "summary.csv").read_text()))}
    assert rows["alice"]["score"] == "2" and rows["bob"]["reduction.simple status"] == "failed"

    # a re-run grades nothing that is graded and unchanged (the unreadable one is retried)
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("[abc]*.json")}
    graded.clear()
    again = grade(root, out, scheduler, graded)
    assert graded == ["dave/dave.ipynb"]
    assert sorted(again.reused) == ["alice/alice.ipynb", "bob/ps1/reduction.ipynb",
                                    "carol/carol.ipynb"]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("[abc]*.json")} == kept
    assert again.students == result.students

    # bob fixes his notebook: only his is graded again
    planted(root / "bob" / "ps1" / "reduction.ipynb")
    graded.clear()
    third = grade(root, out, scheduler, graded)
    assert sorted(graded) == ["bob/ps1/reduction.ipynb", "dave/dave.ipynb"]
    assert third.students["bob"] == "passed" and exercises("bob")["reduction.simple"] == "passed"
    assert "bob (failed)" not in (out / "summary.md").read_text()


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


def test_local_cluster_has_one_worker_per_gpu_or_core(monkeypatch):
    from dask.system import CPU_COUNT

    import workbook.mode
    from grader.batch import PROCESSES_ENV, local_worker_env

    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(workbook.mode, "gpu_count", lambda: 2)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in local_worker_env("gpu", None)] == ["0", "1"]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in local_worker_env("gpu", 3)] == ["0", "1", "0"]
    assert {e["WORKBOOK_MODE"] for e in local_worker_env("gpu", None)} == {"gpu"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert [e["CUDA_VISIBLE_DEVICES"] for e in local_worker_env("gpu", None)] == ["3", "5"]
    sim = local_worker_env("sim", None)
    assert len(sim) == CPU_COUNT and sim[0]["NUMBA_ENABLE_CUDASIM"] == "1"
    assert sim[0][PROCESSES_ENV] == "1"  # a core per worker: one grading process each
    monkeypatch.setenv(PROCESSES_ENV, "2")
    assert [e[PROCESSES_ENV] for e in local_worker_env("sim", 2)] == ["2", "2"]


@pytest.mark.gpu
def test_gpu_class_on_the_default_local_cluster(tmp_path):
    """gpu mode, the default cluster: one worker per GPU, each grading on its own GPU."""
    from workbook.mode import gpu_count

    root, out = tmp_path / "in", tmp_path / "out"
    planted(root / "alice.ipynb")
    planted(root / "bob.ipynb", WRONG_STRIDE)
    result = grade_class(root, out, mode="gpu", exercises=EXERCISES[:1], metrics=False)
    assert result.mode == "gpu" and result.workers == gpu_count()
    assert result.students == {"alice": "passed", "bob": "failed"}
    bob = json.loads((out / "bob.json").read_text())["notebooks"][0]
    assert bob["mode"] == "gpu" and bob["exercises"][0]["status"] == "failed"


def test_two_local_clusters_run_side_by_side():
    """Two instructors' batches on one machine (or two test workers) need their own ports."""
    envs = [{"WORKBOOK_MODE": "sim", "NUMBA_ENABLE_CUDASIM": "1"}]
    with local_cluster(envs) as first, local_cluster(envs) as second:
        assert first.scheduler_address != second.scheduler_address
        assert len(first.scheduler_info["workers"]) == len(second.scheduler_info["workers"]) == 1
