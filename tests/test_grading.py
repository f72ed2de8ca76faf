"""The grader end to end: notebooks in, contained failures, reports out."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import workbook
from grader.exercises.reduction import SLOW_VARIANTS
from grader.grade import grade_notebook
from grader.notebook import NotebookError, find_notebooks, load
from grader.report import gradescope_report, json_report

ROOT = Path(__file__).resolve().parents[1]
SETUP = "import workbook\nimport numpy as np\nfrom numba import cuda, float32\nMAX_TPB = 1024\n"
# the interleaved tree is exercise 1's solution (and the convergent exercise's slow variant)
SIMPLE_OK = SLOW_VARIANTS["reduction.convergent"][2].replace("convergent_sum_kernel",
                                                               "simple_sum_kernel")


def write_notebook(path: Path, exercise_cells: dict[str, str], lesson="02_reduction") -> Path:
    nb = nbformat.v4.new_notebook(metadata={"workbook": {"lesson": lesson}})
    setup = nbformat.v4.new_code_cell(SETUP)
    setup.metadata["workbook"] = {"schema_version": 1, "role": "setup"}
    nb.cells.append(setup)
    nb.cells.append(nbformat.v4.new_markdown_cell("text"))
    for exercise_id, source in exercise_cells.items():
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["workbook"] = {"schema_version": 1, "role": "exercise",
                                     "exercise_id": exercise_id}
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def results_by_id(report):
    return {r.id: r for r in report.exercises}


def test_hang_crash_and_errors_are_contained(tmp_path):
    path = write_notebook(tmp_path / "student.ipynb", {
        "reduction.simple": SIMPLE_OK,
        "reduction.convergent": "while True:\n    pass\n",
        "reduction.segmented": "def segmented_sum_kernel(:\n",
        "reduction.coarsened": "COARSE_FACTOR = 2\n"
                               "def coarsened_sum_kernel(a, b, n):\n"
                               "    raise NotImplementedError('todo')\n",
        "reduction.generic": "import os\nos._exit(3)\n",
    })
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    # 60 s without progress: the hanging exercise costs that much, and reduction.simple (the
    # process start included) stays well within it on a loaded two-core machine
    report = grade_notebook(load(path), workbook.MODE, timeout=60)
    got = results_by_id(report)
    assert got["reduction.simple"].passed, got["reduction.simple"].summary()
    assert got["reduction.convergent"].status == "timeout"
    assert "did not finish within 60 s" in got["reduction.convergent"].messages[0]
    assert got["reduction.segmented"].status == "error"
    assert "SyntaxError" in got["reduction.segmented"].messages[0]
    coarsened = got["reduction.coarsened"]
    assert coarsened.status == "not implemented"
    assert any("was skipped (CellTimeout" in m for m in coarsened.messages), coarsened.messages
    assert got["reduction.shared"].status == "not implemented"
    assert "no exercise cell" in got["reduction.shared"].messages[0]
    assert got["reduction.generic"].status == "error"
    assert "crashed (exit code 3)" in got["reduction.generic"].messages[0]
    assert not report.passed and report.score == 1
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, "notebook was modified"


def test_reports_are_machine_readable(tmp_path):
    path = write_notebook(tmp_path / "one.ipynb", {"reduction.simple": SIMPLE_OK})
    report = grade_notebook(load(path), workbook.MODE, timeout=60)
    data = json.loads(json.dumps(json_report([report])))
    assert data["schema_version"] == 1 and data["passed"] is False
    first = data["notebooks"][0]["exercises"][0]
    assert {"id", "passed", "score", "max_score", "messages", "metrics", "status"} <= set(first)
    assert first["id"] == "reduction.simple" and first["passed"] is True
    scope = gradescope_report([report])
    assert scope["score"] == 1 and len(scope["tests"]) == len(report.exercises)
    assert {t["status"] for t in scope["tests"]} == {"passed", "failed"}


@pytest.mark.parametrize("make,problem", [
    (lambda p: p / "missing.ipynb", "no such notebook"),
    (lambda p: (p / "bad.ipynb").write_text("{not json") and p / "bad.ipynb", "not a readable"),
    (lambda p: nbformat.write(nbformat.v4.new_notebook(), p / "plain.ipynb") or p / "plain.ipynb",
     "no exercise cells found"),
])
def test_bad_notebooks_get_clear_errors(tmp_path, make, problem):
    with pytest.raises(NotebookError, match=problem):
        load(make(tmp_path))


def test_unknown_lesson_is_an_error(tmp_path):
    path = write_notebook(tmp_path / "x.ipynb", {"other.one": "x = 1\n"}, lesson="99_nothing")
    with pytest.raises(NotebookError, match="unknown lesson"):
        grade_notebook(load(path), workbook.MODE)


def test_folder_expansion_skips_checkpoints(tmp_path):
    write_notebook(tmp_path / "a.ipynb", {"reduction.simple": SIMPLE_OK})
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write_notebook(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", {})
    assert find_notebooks([tmp_path]) == [tmp_path / "a.ipynb"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotebookError, match="no notebooks found"):
        find_notebooks([tmp_path / "empty"])
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotebookError, match="not a notebook or a folder"):
        find_notebooks([tmp_path / "notes.txt"])
    with pytest.raises(NotebookError, match="no such file or folder"):
        find_notebooks([tmp_path / "gone"])


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)


@pytest.mark.slow
def test_cli_solutions_pass_and_lessons_fail(tmp_path):
    ok = run_cli("check", "solutions/02_reduction", "--json", str(tmp_path / "ok.json"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads((tmp_path / "ok.json").read_text())["passed"] is True
    todo = run_cli("check", "lessons/02_reduction", "--json", str(tmp_path / "todo.json"),
                   "--gradescope", str(tmp_path / "gs.json"))
    assert todo.returncode == 1, todo.stdout + todo.stderr
    exercises = json.loads((tmp_path / "todo.json").read_text())["notebooks"][0]["exercises"]
    assert exercises and all(e["status"] == "not implemented" for e in exercises)
    assert json.loads((tmp_path / "gs.json").read_text())["score"] == 0


def test_cli_usage_errors_exit_2(tmp_path):
    result = run_cli("check", str(tmp_path / "nothing.ipynb"))
    assert result.returncode == 2 and "no such file or folder" in result.stdout
