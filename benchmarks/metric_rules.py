"""Validate every exercise's metric rules on a GPU and record the ncu reports.

    python benchmarks/metric_rules.py OUT_DIR [LESSON ...] [--only EXERCISE_ID ...]

For each exercise that declares metric rules: the reference solution must pass
every rule against itself-in-the-same-run, and the lesson's slow-but-correct
variant (``SLOW_VARIANTS`` beside the exercise) must be graded correct on its
output yet fail every rule. Writes OUT_DIR/metric_rules-<lesson>.json, a table, and the
.ncu-rep files (OUT_DIR/ncu/<exercise>-{solution,reference,slow}.ncu-rep) that
tests/test_metric_rules.py replays on machines without a GPU. With ``--only``, just those
exercises are validated and their records replace the ones already in
OUT_DIR/metric_rules-<lesson>.json (each record carries its own device and date).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import exercises as catalogue  # noqa: E402
from grader.grade import run_in_subprocess  # noqa: E402
from grader.metric_rules import format_outcome  # noqa: E402
from grader.profiling import assess, reference_cells  # noqa: E402
from workbook.mode import select_mode  # noqa: E402


def slow_cells(exercise, variant) -> list[dict]:
    """The reference cells with the exercise's cell replaced by the slow variant."""
    _, old, new = variant
    cells = reference_cells(exercise)
    for cell in cells:
        if cell["exercise_id"] == exercise.id:
            if old is None:
                cell["source"] = new
            else:
                assert cell["source"].count(old) == 1, (exercise.id, old)
                cell["source"] = cell["source"].replace(old, new)
    return cells


def main(out: Path, lessons: list[str], only: list[str]) -> int:
    select_mode("gpu")
    (out / "ncu").mkdir(parents=True, exist_ok=True)
    if only:
        lessons = sorted({catalogue.get(e).lesson for e in only})
    problems = [p for lesson in lessons or list(catalogue.LESSONS)
                for p in validate_lesson(lesson, out, set(only))]
    return 1 if problems else 0


def validate_lesson(lesson: str, out: Path, only: set[str] = frozenset()) -> list[str]:
    """Validate one lesson's rules, write OUT/metric_rules-<lesson>.json; return problems."""
    from workbook.bench import device_name

    device, today = device_name(), datetime.date.today().isoformat()

    exercises = catalogue.LESSONS[lesson]
    # exercise ids are "<module>.<name>": the module beside the exercises holds the variants
    module = importlib.import_module(f"grader.exercises.{exercises[0].id.split('.')[0]}")
    variants = getattr(module, "SLOW_VARIANTS", {})
    records, problems = [], []
    for ex in (e for e in exercises if e.metric_rules and (not only or e.id in only)):
        variant = variants.get(ex.id)
        if variant is None:
            problems.append(f"{ex.id}: no slow variant declared")
            continue
        correct = run_in_subprocess(ex, {"mode": "gpu", "exercise_id": ex.id,
                                         "cells": slow_cells(ex, variant)}, 600)
        if not correct.passed:
            problems.append(f"{ex.id}: slow variant is not correct: {correct.messages}")
        runs = {}
        for label, cells in (("solution", reference_cells(ex)), ("slow", slow_cells(ex, variant))):
            with tempfile.TemporaryDirectory() as tmp:
                runs[label] = assess(ex, cells, "gpu", keep=Path(tmp))
                reports = out / "ncu"
                for name, kept in (("student", label), ("reference", "reference")):
                    if Path(tmp, f"{name}.ncu-rep").exists():
                        shutil.copy(Path(tmp, f"{name}.ncu-rep"),
                                    reports / f"{ex.id}-{kept}.ncu-rep")
        for label, want in (("solution", "passed"), ("slow", "failed")):
            for outcome in runs[label]["rules"]:
                print(f"{ex.id:24s} {label:8s} {format_outcome(outcome)}", flush=True)
                if outcome["status"] != want:
                    problems.append(f"{ex.id} {label}: {outcome['label']} {outcome['status']}"
                                    f" (expected {want})")
        records.append({"exercise": ex.id, "device": device, "date": today,
                        "slow_variant": variant[0], "slow_variant_correct": correct.passed,
                        **runs})
    path = out / f"metric_rules-{lesson}.json"
    if only and path.exists():  # keep the other exercises' records
        previous = json.loads(path.read_text())
        redone = {r["exercise"] for r in records}
        kept = [r for r in previous["exercises"] if r["exercise"] not in redone]
        records = sorted(kept + records, key=lambda r: [e.id for e in exercises].index(
            r["exercise"]))
        problems = [p for p in previous.get("problems", [])
                    if p.split(":")[0].split()[0] not in redone] + problems
    result = {"device": device, "date": today, "lesson": lesson, "exercises": records,
              "problems": problems}
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print("\n".join(["", f"{lesson} problems:", *problems]) if problems
          else f"\n{lesson}: all rules validated")
    return problems


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--only", nargs="+", default=[], metavar="EXERCISE_ID")
    options = parser.parse_args()
    sys.exit(main(options.out, options.lessons, options.only))
