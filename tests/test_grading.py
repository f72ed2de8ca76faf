"""The grader end to end: notebooks in, contained failures, reports out."""

import hashlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import nbformat
import numpy as np
import pytest

import workbook
from grader.exercises import slow_variant
from grader.grade import grade_notebook
from grader.notebook import NotebookError, find_notebooks, load
from grader.report import gradescope_report, json_report

ROOT = Path(__file__).resolve().parents[1]
SETUP = "import workbook\nimport numpy as np\nfrom numba import cuda, float32\nMAX_TPB = 1024\n"
# the interleaved tree is exercise 1's solution (and the convergent exercise's slow variant)
SIMPLE_OK = slow_variant("reduction.convergent").new.replace("convergent_sum_kernel",
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
    # 30 s without progress: the hanging exercise costs that much, and each test case of
    # reduction.simple stays well within it on a loaded two-core machine (the process's start
    # has grader.session.STARTUP_S, 60 s, whatever the timeout)
    report = grade_notebook(load(path), workbook.MODE, timeout=30)
    got = results_by_id(report)
    assert got["reduction.simple"].passed, got["reduction.simple"].summary()
    assert got["reduction.convergent"].status == "timeout"
    assert "did not finish within 30 s" in got["reduction.convergent"].messages[0]
    assert got["reduction.segmented"].status == "failed"  # the student's own cell: their bug
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


# --- what a failed check says ------------------------------------------------------------------

@pytest.mark.parametrize("x,got,says", [
    # x[0] = 6 is also twice the sum 6 - 3 = 3: both causes fit these inputs
    ([6.0, -3.0], 6.0, "These inputs cannot tell 2 causes apart (both fit): it equals (1) twice "
                       "the sum: every element was counted twice; (2) the first element alone"),
    ([1.0, 2.0, 3.0, 4.0], 20.0, "It equals twice the sum: every element was counted twice."),
    ([1.0, 2.0, 3.0, 4.0], 3.0, "It equals the sum of the first 2 elements only."),
    ([1.0, 2.0, 3.0, 4.0], 1.0, "It equals the first element alone: the others were never added."),
])
def test_a_wrong_sum_gets_the_diagnoses_that_fit(x, got, says):
    from grader.exercise import Mismatch
    from grader.verify import expect_sum

    with pytest.raises(Mismatch) as caught:
        expect_sum(got, np.array(x, np.float32))
    lines = str(caught.value).splitlines()
    assert lines[0] == f"expected {sum(x):g} (float64 reference), got {got:g}."
    assert lines[1].startswith(says), lines[1]
    assert lines[2].startswith("(|diff| ") and "tolerance" in lines[2]  # the derivation last
    assert len(lines) == 3


def test_a_lost_block_is_named_in_the_singular():
    from grader.exercise import Mismatch
    from grader.verify import expect_sum

    x = np.arange(1, 201, dtype=np.float32)
    with pytest.raises(Mismatch, match="the first 1 block segment of 100 elements: blocks 1"):
        expect_sum(float(x[:100].sum()), x, segment=100)


def solution_namespace(exercise_id, old="", new=""):
    from solution_cells import namespace_with

    return namespace_with("02_reduction", exercise_id, old, new)


def test_statuses_tell_the_students_bug_from_the_graders():
    """A bug of the student's fails the exercise; ERROR is left for faults of the grader or the
    machine (here: the grader's own launch raising, with no frame of the student's code)."""
    from grader.exercise import check_exercise
    from grader.exercises import get

    exercise = get("reduction.simple")
    broken = replace(exercise, run=json.loads)  # raises TypeError inside the library
    graders = check_exercise(broken, solution_namespace("reduction.simple"), workbook.MODE)
    assert graders.status == "error", graders.summary()
    assert "TypeError" in graders.summary()


@pytest.mark.sim_only  # on a GPU the kernel's division by zero raises nothing
def test_an_exception_in_the_students_kernel_fails_the_exercise():
    from grader.exercise import check_exercise
    from grader.exercises import get

    own = check_exercise(get("reduction.simple"), solution_namespace(
        "reduction.simple", "    i = 2 * t\n", "    i = 2 * t // (t - t)\n"), "sim", seed=1)
    assert own.status == "failed" and "ZeroDivisionError" in own.summary(), own.summary()
    assert "<cell" in own.summary()  # the student's line, not the grader's


@pytest.mark.sim_only  # the simulator's synccheck
def test_a_barrier_inside_an_if_is_named_as_such():
    from grader.exercise import check_exercise
    from grader.exercises import get

    in_branch = solution_namespace(
        "reduction.shared",
        "        cuda.syncthreads()\n        if t < stride:\n            partial[t] += ",
        "        if t < stride:\n            cuda.syncthreads()\n            partial[t] += ")
    got = check_exercise(get("reduction.shared"), in_branch, "sim", seed=1)
    assert got.status == "failed", got.summary()
    text = " ".join(got.summary().split())
    assert "This cuda.syncthreads() is inside `if t < stride:` (line 9)" in text, text
    assert "early return" not in text and "tid=[" not in text and 'File "<cell' not in text
    early = solution_namespace("reduction.shared", "    t = cuda.threadIdx.x\n",
                               "    t = cuda.threadIdx.x\n    if t == 1:\n        return\n")
    got = check_exercise(get("reduction.shared"), early, "sim", seed=1)
    assert got.status == "failed" and "early return before a barrier" in got.summary()


def test_counts_are_written_in_the_singular_and_the_plural():
    from grader.exercise import Case, check_exercise
    from grader.exercises import get
    from grader.results import plural

    assert (plural(1, "element"), plural(2, "element")) == ("1 element", "2 elements")
    one_case = replace(get("reduction.simple"), cases={workbook.MODE: (Case(2, "integers"),)})
    passed = check_exercise(one_case, solution_namespace("reduction.simple"), workbook.MODE)
    assert passed.messages == [f"the test passed ({workbook.MODE} mode)"], passed.messages

    def stub(*args):
        raise NotImplementedError

    stubs = check_exercise(get("reduction.shuffle"),
                           {"shuffle_sum_kernel": stub, "warp_sum": stub}, workbook.MODE)
    assert stubs.messages[0].startswith("shuffle_sum_kernel, warp_sum still raise "
                                        "NotImplementedError"), stubs.messages
    one = check_exercise(get("reduction.simple"), {"simple_sum_kernel": stub}, workbook.MODE)
    assert "simple_sum_kernel still raises NotImplementedError" in one.messages[0]


def test_a_notebook_check_names_cells_as_jupyter_shows_them():
    from grader.locations import in_cell_terms, result_in_cell_terms
    from grader.results import CaseResult, ExerciseResult

    class Compiler:  # IPython's CachingCompiler: a cell's file name -> its execution count
        def format_code_name(self, name):
            counts = {"/tmp/ipykernel_6563/698187053.py": 18}
            return ("Cell", f"In[{counts[name]}]") if name in counts else None

    class Shell:
        compile = Compiler()

    shell = Shell()
    text = ('read at /tmp/ipykernel_6563/698187053.py:7 in k\n'
            '  File "/tmp/ipykernel_6563/698187053.py", line 7, in k\n'
            'thread 0: running at /tmp/ipykernel_6563/698187053.py line 7\n'
            'not a cell: /tmp/ipykernel_6563/111.py:3')
    assert in_cell_terms(text, shell) == (
        'read at <cell In[18]>:7 in k\n  File "<cell In[18]>", line 7, in k\n'
        'thread 0: running at <cell In[18]> line 7\nnot a cell: /tmp/ipykernel_6563/111.py:3')
    assert in_cell_terms(text) == text  # no IPython shell runs this test
    result = ExerciseResult("x", "t", "failed", 0, 1, ["at /tmp/ipykernel_6563/698187053.py:2"],
                            [CaseResult("n=2", "failed", "/tmp/ipykernel_6563/698187053.py:2")])
    result_in_cell_terms(result, shell)
    assert result.messages == ["at <cell In[18]>:2"] and result.cases[0].message == \
        "<cell In[18]>:2"


def test_a_notebook_check_shows_which_case_runs():
    import io

    from grader.exercise import check_exercise
    from grader.exercises import get
    from grader.progress import CheckProgress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    exercise = get("reduction.simple")
    with CheckProgress(exercise.id, workbook.MODE, out=out) as shown:
        check_exercise(exercise, solution_namespace("reduction.simple"), workbook.MODE,
                       on_case=shown.case)
    lines = out.getvalue().split("\r\033[K")
    cases = exercise.cases_for(workbook.MODE)
    assert lines[1] == "reduction.simple: starting the check"
    for k, case in enumerate(cases, 1):
        assert lines[k + 1].startswith(f"reduction.simple: test case {k} of {len(cases)} "
                                       f"({case.name()})"), lines[k + 1]
    assert lines[-1] == "", "the line is cleared at the end"
    quiet = io.StringIO()  # not a terminal (a file, a pipe): nothing
    with CheckProgress(exercise.id, workbook.MODE, out=quiet) as shown:
        shown.case(1, 1, cases[0])
    assert quiet.getvalue() == ""


@pytest.mark.parametrize("marker,problem", [
    ({"role": "exercise", "exercise_id": "reduction.simple"}, "schema_version None"),
    ({"schema_version": 2, "role": "exercise", "exercise_id": "reduction.simple"},
     "schema_version 2; this grader reads version 1"),
    ({"schema_version": 1, "role": "exercise", "exercise_id": "reduction.simple",
      "points": 3}, r"unknown keys \['points'\]"),
    ({"schema_version": 1, "role": "exercise", "exercise_id": "Reduction Simple"},
     "expected LESSON.NAME"),
    ({"schema_version": 1, "role": "grade", "exercise_id": "reduction.simple"},
     "workbook role 'grade'"),
    ({"schema_version": 1, "role": "exercise"}, "needs an exercise_id"),
])
def test_cell_metadata_is_checked_against_its_schema(tmp_path, marker, problem):
    nb = nbformat.v4.new_notebook(metadata={"workbook": {"lesson": "02_reduction"}})
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["workbook"] = marker
    nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "n.ipynb")
    with pytest.raises(NotebookError, match=problem):
        load(tmp_path / "n.ipynb")
