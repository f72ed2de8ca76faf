"""grader gradescope-bundle: the bundle's contents, and its run_autograder on a fake
/autograder layout (sim mode, two exercises of lesson 02)."""

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.cli import app
from grader.exercises import get

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ("reduction.simple", "reduction.shuffle")  # 1 and 2 points, quick in sim mode
# Gradescope's results.json keys (gradescope-autograders.readthedocs.io, "Specifications")
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format",
            "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests",
            "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output",
             "output_format", "tags", "visibility", "extra_data"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "reduction-autograder.zip"
    args = ["gradescope-bundle", "02_reduction", str(out)]
    for exercise_id in EXERCISES:
        args += ["-e", exercise_id]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "lesson 02_reduction, 2 exercises" in result.output
    return out


def test_bundle_contents(bundle):
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        config = json.loads(archive.read("autograder.json"))
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "autograder.json"} <= names  # at the root
    for script in ("setup.sh", "run_autograder"):
        assert stat.S_ISREG(modes[script]) and modes[script] & 0o111 == 0o111, script
    assert config == {"lesson": "02_reduction", "notebook": "reduction.ipynb",
                      "exercises": list(EXERCISES), "timeout": None}
    source = "numba-cuda-workbook/"
    for tracked in subprocess.run(["git", "ls-files", "grader", "workbook", "pyproject.toml"],
                                  cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.split():
        if (ROOT / tracked).exists():
            assert source + tracked in names, tracked
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert all(n.startswith(source) for n in names - {"setup.sh", "run_autograder",
                                                       "autograder.json"})
    assert setup.startswith("#!/usr/bin/env bash") and run.startswith("#!/usr/bin/env bash")
    assert '"$ROOT/source/numba-cuda-workbook"' in setup
    assert "python -m grader.gradescope run" not in setup and "grader.gradescope run" in run
    for text in (setup, run):  # both scripts parse
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_bundle_usage_errors(tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(app, ["gradescope-bundle", "07_nothing", str(tmp_path / "x.zip")])
    assert unknown.exit_code == 2 and "no lesson '07_nothing'; the lessons are" in \
        unknown.output
    foreign = runner.invoke(app, ["gradescope-bundle", "lessons/02_reduction",
                                  str(tmp_path / "x.zip"), "-e", "softmax.cpu"])
    assert foreign.exit_code == 2 and "softmax.cpu belongs to lesson 03_softmax" in \
        foreign.output
    assert not (tmp_path / "x.zip").exists()


def autograde(bundle: Path, tmp_path: Path, *notebooks: Path) -> tuple[dict, str]:
    """Gradescope's layout in ``tmp_path/autograder``: the bundle in source/,
    run_autograder beside it, the notebooks in submission/; then run_autograder, with
    the bundle's own grader and workbook (PYTHONPATH) and this environment's packages."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)  # extractall drops the mode; Gradescope keeps it
    for notebook in notebooks:
        shutil.copy(notebook, root / "submission" / notebook.name)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), WORKBOOK_PYTHON=sys.executable,
               PYTHONPATH=str(root / "source" / "numba-cuda-workbook"))
    env.pop("WORKBOOK_MODE", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)  # run_autograder sets the mode itself
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert set(results) <= TOP_KEYS and isinstance(results["score"], int | float)
    for test in results["tests"]:
        assert set(test) <= TEST_KEYS and test["status"] in ("passed", "failed")
        assert isinstance(test["score"], int | float) and test["max_score"] > 0
    assert results["output_format"] == "text"
    return results, done.stdout


def points(results: dict) -> dict[str, tuple[float, float, str]]:
    return {t["name"].split(":", 1)[0]: (t["score"], t["max_score"], t["status"])
            for t in results["tests"]}


def test_run_autograder_grades_a_solution(bundle, tmp_path):
    results, stdout = autograde(bundle, tmp_path,
                                ROOT / "solutions" / "02_reduction" / "reduction.ipynb")
    bundled = tmp_path / "autograder" / "source" / "numba-cuda-workbook" / "grader"
    assert f"grader from {bundled}" in stdout  # the bundle's grader, not this checkout's
    expected = {i: (get(i).points, get(i).points, "passed") for i in EXERCISES}
    assert points(results) == expected and results["score"] == 3  # 1 + 2 points
    assert "graded in sim mode" in results["output"]


def test_run_autograder_grades_a_stub(bundle, tmp_path):
    results, _ = autograde(bundle, tmp_path, ROOT / "lessons" / "02_reduction" /
                           "reduction.ipynb")
    assert points(results) == {"reduction.simple": (0, 1, "failed"),
                               "reduction.shuffle": (0, 2, "failed")}
    assert results["score"] == 0
    assert all("NotImplementedError" in t["output"] for t in results["tests"])


def test_run_autograder_without_a_lesson_notebook(bundle, tmp_path):
    """Nothing to grade: every exercise is still listed, with 0 points and the reason."""
    results, _ = autograde(bundle, tmp_path, ROOT / "lessons" / "03_softmax" / "softmax.ipynb")
    assert points(results) == {"reduction.simple": (0, 1, "failed"),
                               "reduction.shuffle": (0, 2, "failed")}
    assert "softmax.ipynb: skipped (lesson 03_softmax has none of the selected exercises)" in \
        results["output"]
    assert all("not graded: no notebook of lesson 02_reduction in the submission "
               "(reduction.ipynb)" in t["output"] for t in results["tests"])


def test_run_autograder_with_an_empty_submission(bundle, tmp_path):
    results, _ = autograde(bundle, tmp_path)
    assert results["score"] == 0 and len(results["tests"]) == 2
    reason = "no notebook (.ipynb) in the submission: upload reduction.ipynb (lesson 02_reduction)"
    assert reason in results["output"]
    assert all(t["output"] == f"not graded: {reason}" for t in results["tests"])
