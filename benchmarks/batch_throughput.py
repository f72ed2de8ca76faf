"""Throughput of ``grader batch``: a class of solution copies, some with planted bugs.

    python benchmarks/batch_throughput.py --out OUT_DIR [--copies 20] [--buggy 5]
        [--workers N] [--mode auto|sim|gpu] [--lessons 02_reduction ...]
        [-e EXERCISE_ID ...] [--no-metrics] [--no-sanitizers] [--timeout S]

Builds a class in a temporary folder: COPIES students, each handing in the solution
notebook of every lesson in LESSONS (one folder per student, as nbgrader's
``submitted/<student>/`` holds them); in BUGGY of them one exercise carries a bug the
test suite plants (the ``BUGGY`` lists of tests/test_<lesson>_exercises.py, applied
as ``benchmarks/buggy_variants.py`` applies them). Grades the class with
:func:`grader.batch.grade_class` on the local cluster (one worker per GPU in gpu
mode, per CPU core in sim mode, or ``--workers``), the way ``grader batch`` does, and
records in OUT_DIR/batch_throughput.json and .md: wall time (cluster start included),
exercises per minute, workers, device, and each student's verdict (clean copies must
pass everything, a planted bug must fail its exercise). Exit code 1 if a verdict is
wrong. The graded reports stay in OUT_DIR/grades/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import buggy_variants  # noqa: E402  (beside this script: the planted bugs)

LESSONS = tuple(buggy_variants.LESSON_TESTS)


def build_class(folder: Path, lessons: list[str], copies: int, buggy: int, mode: str,
                exercises: list[str]) -> dict[str, dict | None]:
    """``folder/student<k>/<lesson>.ipynb`` for each copy; returns each student's planted
    bug (None for a clean copy). Bugs go to evenly spaced students, cycling through the
    variants of the chosen lessons (in gpu mode, those the GPU's own checks catch)."""
    bugs = [v for v in buggy_variants.variants(False) if v["lesson"] in lessons
            and (not exercises or v["exercise"] in exercises)
            and not (mode == "gpu" and "sim_only" in v["marks"])]
    if buggy and not bugs:
        raise SystemExit("no planted bug applies to the chosen lessons and exercises")
    chosen = [round(i * copies / buggy) for i in range(buggy)] if buggy else []
    students: dict[str, dict | None] = {}
    scratch = folder.parent / "planting"
    scratch.mkdir()
    for k in range(copies):
        student = f"student{k:02d}"
        (folder / student).mkdir(parents=True)
        bug = bugs[chosen.index(k) * len(bugs) // buggy] if k in chosen else None
        for lesson in lessons:
            target = folder / student / f"{lesson}.ipynb"
            if bug and bug["lesson"] == lesson:
                shutil.move(buggy_variants.planted_notebook(bug, scratch), target)
            else:
                shutil.copy(next((ROOT / "solutions" / lesson).glob("*.ipynb")), target)
        students[student] = bug
    return students


def _report(path: Path) -> dict:
    """A student's report; an empty one where the run was interrupted before it."""
    if path.exists():
        return json.loads(path.read_text())
    return {"score": 0, "max_score": 0, "errors": [{"error": "not graded (interrupted)"}]}


def verdict(report: dict, bug: dict | None) -> dict:
    failed = sorted(e["id"] for nb in report.get("notebooks", []) for e in nb["exercises"]
                    if not e["passed"])
    row = {"score": report.get("score"), "max_score": report.get("max_score"),
           "failed": failed, "errors": [e["error"][:200] for e in report.get("errors", [])]}
    if bug is None:
        row.update(planted=None, ok=not failed and not row["errors"])
    else:
        row.update(planted=f"{bug['exercise']}: {bug['bug']}", ok=bug["exercise"] in failed,
                   also_failed=[i for i in failed if i != bug["exercise"]])
    return row


def device(mode: str) -> dict:
    if mode != "gpu":
        return {"name": "CUDA simulator", "gpus": 0}
    from workbook.bench import device_name
    from workbook.mode import gpu_count

    return {"name": device_name(), "gpus": gpu_count()}


def table(record: dict) -> str:
    lines = [f"{record['device']['name']} ({record['device']['gpus']} GPUs), "
             f"{record['date']}, {record['mode']} mode, {record['workers']} workers: "
             f"{record['exercises']} exercises in {record['notebooks']} notebooks graded in "
             f"{record['wall_seconds']:.1f} s = **{record['exercises_per_minute']:.1f} "
             f"exercises/min** ({record['notebooks_per_minute']:.2f} notebooks/min)", "",
             "| student | planted bug | score | failed | verdict |",
             "| --- | --- | --- | --- | --- |"]
    for name, row in record["students"].items():
        lines.append(f"| {name} | {row['planted'] or ''} | {row['score']:g}/"
                     f"{row['max_score']:g} | {', '.join(row['failed'] + row['errors'])} | "
                     f"{'ok' if row['ok'] else '**WRONG**'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--buggy", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--mode", default="auto", choices=("auto", "sim", "gpu"))
    parser.add_argument("--lessons", nargs="+", default=list(LESSONS), choices=LESSONS)
    parser.add_argument("-e", "--exercise", action="append", default=[])
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--no-sanitizers", action="store_true")
    parser.add_argument("--timeout", type=float, default=None)
    options = parser.parse_args()
    if not 0 <= options.buggy <= options.copies:
        parser.error("--buggy must be between 0 and --copies")

    from rich.console import Console

    from grader.batch import grade_class
    from workbook.mode import resolve

    mode = resolve(options.mode)
    options.out.mkdir(parents=True, exist_ok=True)
    grades = options.out / "grades"
    shutil.rmtree(grades, ignore_errors=True)  # a fresh measurement: nothing to reuse
    with tempfile.TemporaryDirectory(prefix="batch-throughput-") as tmp:
        submitted = Path(tmp) / "submitted"
        bugs = build_class(submitted, options.lessons, options.copies, options.buggy, mode,
                           options.exercise)
        start = time.monotonic()
        result = grade_class(submitted, grades, mode=mode, exercises=options.exercise,
                             metrics=not options.no_metrics,
                             sanitizers=not options.no_sanitizers, timeout=options.timeout,
                             workers=options.workers, console=Console())
        wall = time.monotonic() - start
    students = {s: verdict(_report(grades / f"{s}.json"), bug) for s, bug in bugs.items()}
    record = {
        "date": datetime.date.today().isoformat(), "host": platform.node(),
        "device": device(mode), "mode": mode, "workers": result.workers,
        "copies": options.copies, "buggy": options.buggy, "lessons": options.lessons,
        "exercise_filter": options.exercise, "metrics": not options.no_metrics,
        "sanitizers": not options.no_sanitizers, "timeout": options.timeout,
        "notebooks": result.submissions, "exercises": result.exercises,
        "wall_seconds": round(wall, 2), "batch_seconds": result.seconds,
        "exercises_per_minute": round(result.exercises / wall * 60, 2),
        "notebooks_per_minute": round(len(result.graded) / wall * 60, 3),
        "not_graded": result.errors, "interrupted": result.interrupted,
        "students": students,
    }
    (options.out / "batch_throughput.json").write_text(json.dumps(record, indent=1) + "\n")
    text = table(record)
    (options.out / "batch_throughput.md").write_text(text)
    print(text)
    wrong = [s for s, row in students.items() if not row["ok"]]
    if wrong:
        print(f"wrong verdicts: {', '.join(wrong)}")
    return 1 if wrong or result.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
