"""A Gradescope autograder for one lesson: ``grader gradescope-bundle LESSON OUT.zip``.

The bundle (docs/instructors.md, "Gradescope", says how to use it) holds:

* ``setup.sh`` -- run once by Gradescope when it builds the autograder's image: finds or
  installs Python 3.11 or newer and installs this project, from the bundle, into
  ``/autograder/workbook-venv``;
* ``run_autograder`` -- run for each submission: grades the notebooks of
  ``/autograder/submission`` in the CUDA simulator (Gradescope's containers have no GPU)
  with ``python -m grader.gradescope run /autograder``, which writes
  ``/autograder/results/results.json``;
* ``autograder.json`` -- the lesson, its notebook's name, the exercises and the timeout;
* ``numba-cuda-workbook/`` -- the project's packages (``grader``, ``workbook``) and
  ``pyproject.toml``, as this checkout has them.

Each exercise is one Gradescope test, worth its points (``Exercise.points``); the results
come from the writer ``grader batch`` uses (:func:`grader.batch_reports.gradescope_results`).
An exercise that could not be graded (no notebook, a notebook of another lesson, one that
cannot be read) is still listed, with 0 points and the reason.
"""

from __future__ import annotations

import json
import stat
import sys
import time
import traceback
import zipfile
from pathlib import Path
from typing import Annotated

import typer

CONFIG = "autograder.json"
SOURCE = "numba-cuda-workbook"  # the project's folder in the bundle
PACKAGES = ("grader", "workbook")
PROJECT_FILES = ("pyproject.toml", "README.md")

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: install the
# Numba-CUDA Workbook (numba-cuda-workbook/ in this bundle) into a virtual environment.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
VENV="$ROOT/workbook-venv"
export DEBIAN_FRONTEND=noninteractive

python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then  # Ubuntu 22.04's python3 is 3.10: take 3.11 from its archive
  apt-get update -q
  apt-get install -y -q python3.11 python3.11-venv
  python=python3.11
fi
if ! "$python" -m venv "$VENV"; then  # Ubuntu ships the venv module apart
  apt-get update -q
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  apt-get install -y -q "python$version-venv"
  "$python" -m venv --clear "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "$ROOT/source/numba-cuda-workbook"
WORKBOOK_MODE=sim "$VENV/bin/grader" doctor
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for each submission: grade the notebooks in /autograder/submission
# in the CUDA simulator and write /autograder/results/results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${WORKBOOK_PYTHON:-$ROOT/workbook-venv/bin/python}"
export WORKBOOK_MODE=sim NUMBA_ENABLE_CUDASIM=1
mkdir -p "$ROOT/results"
exec "$PYTHON" -m grader.gradescope run "$ROOT"
"""


class BundleError(ValueError):
    """The bundle cannot be built (unknown lesson or exercise, no source checkout)."""


def project_root() -> Path:
    """The checkout this grader runs from (its ``pyproject.toml`` names the project)."""
    root = Path(__file__).resolve().parents[1]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "numba-cuda-workbook"' not in pyproject.read_text():
        raise BundleError(f"{root} is not a checkout of numba-cuda-workbook (no pyproject.toml):"
                          " build the bundle from a clone of the project")
    return root


def lesson_config(lesson: str, exercises=(), timeout: float | None = None) -> dict:
    """``autograder.json`` for ``lesson`` (its folder name, or the folder's path)."""
    from grader.exercises import LESSONS, UnknownExercise, get, solution_notebook

    name = Path(lesson).name
    if name not in LESSONS:
        raise BundleError(f"no lesson {lesson!r}; the lessons are {', '.join(sorted(LESSONS))}")
    ids = [e.id for e in LESSONS[name]]
    for exercise_id in exercises:
        try:
            other = get(exercise_id).lesson
        except UnknownExercise as exc:
            raise BundleError(str(exc).strip("'\"")) from None
        if other != name:
            raise BundleError(f"{exercise_id} belongs to lesson {other}; lesson {name} has "
                              f"{', '.join(ids)}")
    notebook = solution_notebook(name)
    return {"lesson": name, "notebook": notebook.name if notebook else f"{name}.ipynb",
            "exercises": [i for i in ids if not exercises or i in exercises],
            "timeout": timeout}


def _sources(root: Path) -> list[Path]:
    files = [root / name for name in PROJECT_FILES]
    for package in PACKAGES:
        files += sorted(p for p in (root / package).rglob("*") if p.is_file()
                        and not any(part.startswith(".") or part == "__pycache__"
                                    for part in p.relative_to(root).parts)
                        and p.suffix != ".pyc")
    return files


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    archive.writestr(info, data)


def build_bundle(lesson: str, out: Path, exercises=(), timeout: float | None = None
                 ) -> list[str]:
    """Write the autograder bundle for ``lesson`` to ``out`` (a .zip); returns its names."""
    config = lesson_config(lesson, exercises, timeout)
    root = project_root()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as archive:
        _add(archive, "setup.sh", SETUP_SH.encode(), executable=True)
        _add(archive, "run_autograder", RUN_AUTOGRADER.encode(), executable=True)
        _add(archive, CONFIG, (json.dumps(config, indent=2) + "\n").encode())
        for path in _sources(root):
            _add(archive, f"{SOURCE}/{path.relative_to(root).as_posix()}", path.read_bytes())
        return archive.namelist()


# ---------------------------------------------------------------------------- grading


def _notebooks(submission: Path) -> list[Path]:
    return sorted(p for p in submission.rglob("*.ipynb") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(submission).parts))


def grade(submission: Path, config: dict) -> dict:
    """Gradescope's results for the notebooks in ``submission``: each is graded for the
    configured exercises; the best-scoring graded notebook counts."""
    from grader.batch import grade_submission
    from grader.batch_reports import Entry, gradescope_results

    options = {"mode": "sim", "exercises": list(config["exercises"]), "metrics": True,
               "sanitizers": True, "timeout": config.get("timeout"), "seed": None}
    entries = []
    for path in _notebooks(submission):
        shown = path.relative_to(submission).as_posix()
        outcome = grade_submission(path.name, shown, path.read_bytes(), options)
        entries.append(Entry(shown, "", outcome.get("report"), outcome.get("error"),
                             outcome.get("skipped")))
    graded = [e for e in entries if e.report is not None]
    counted = max(graded, key=lambda e: e.report["score"]) if graded else None
    data = gradescope_results([e for e in entries if e is counted or e.report is None])
    notes = [f"{e.file}: {e.report['score']:g}/{e.report['max_score']:g}, not counted (the "
             f"best notebook is {counted.file})" for e in graded if e is not counted]
    if not entries:
        notes.append(f"no notebook (.ipynb) in the submission: upload {config['notebook']} "
                     f"(lesson {config['lesson']})")
    missing = _ungraded_tests(config, counted, "; ".join(notes) or "no notebook of lesson "
                              f"{config['lesson']} in the submission ({config['notebook']})")
    data["tests"] += missing
    data["output"] = "\n".join(filter(None, [data.get("output", ""), *notes]))
    return data


def _ungraded_tests(config: dict, counted, reason: str) -> list[dict]:
    """A 0-point test for each configured exercise the counted notebook did not grade."""
    from grader.exercises import get

    done = {r["id"] for r in (counted.report["exercises"] if counted else [])}
    return [{"name": f"{i}: {get(i).title}", "score": 0.0, "max_score": get(i).points,
             "status": "failed", "output": f"not graded: {reason}", "visibility": "visible"}
            for i in config["exercises"] if i not in done]


def run(root: Path) -> dict:
    """``run_autograder``'s work: grade ``root/submission`` with ``root/source``'s
    configuration and write ``root/results/results.json``, also when grading fails."""
    from grader.batch import grader_version

    start = time.monotonic()
    root = Path(root)
    print(f"numba-cuda-workbook {grader_version()}, grader from {Path(__file__).parent}",
          flush=True)
    try:
        config = json.loads((root / "source" / CONFIG).read_text())
        data = grade(root / "submission", config)
    except Exception:  # noqa: BLE001  (the autograder's own failure: reported, never silent)
        trace = traceback.format_exc()
        print(trace, flush=True)
        data = {"score": 0.0, "tests": [], "output_format": "text",
                "output": "The autograder failed on this submission (not a fault of the "
                          "notebook's exercises); the instructor can see why in the "
                          f"autograder's output.\n{trace.strip().splitlines()[-1]}"}
    data["execution_time"] = round(time.monotonic() - start)
    results = root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(data, indent=2) + "\n")
    print(f"score {data.get('score', 0):g}; wrote {results}", flush=True)
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "run":
        print("usage: python -m grader.gradescope run AUTOGRADER_ROOT", file=sys.stderr)
        return 2
    run(Path(argv[1]))
    return 0


# ---------------------------------------------------------------------------- command


def gradescope_bundle(
    lesson: Annotated[str, typer.Argument(
        help="The lesson: its folder name (02_reduction) or the folder's path.")],
    out: Annotated[Path, typer.Argument(help="The .zip to write.")],
    exercise: Annotated[list[str] | None, typer.Option(
        "--exercise", "-e", help="Grade only this exercise of the lesson (repeatable); "
        "default: all of them.", show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds a test case may run (default: the grader's).", show_default=False)]
    = None,
) -> None:
    """Build a Gradescope autograder for a lesson: setup.sh, run_autograder and this project,
    grading in the CUDA simulator on Gradescope's CPU containers.

    Upload the .zip as a programming assignment's autograder (docs/instructors.md,
    "Gradescope", step by step). Example: grader gradescope-bundle 02_reduction
    reduction-autograder.zip
    """
    from rich.console import Console
    from rich.text import Text

    console = Console()
    try:
        names = build_bundle(lesson, out, tuple(exercise or ()), timeout)
    except BundleError as exc:
        console.print(Text.assemble(("error:", "red"), " ", str(exc)), soft_wrap=True)
        raise typer.Exit(2) from None
    config = lesson_config(lesson, tuple(exercise or ()), timeout)
    console.print(Text(f"wrote {out}: {len(names)} files, lesson {config['lesson']}, "
                       f"{len(config['exercises'])} exercises "
                       f"({', '.join(config['exercises'])})"), soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
