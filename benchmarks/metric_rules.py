"""Validate every exercise's metric rules on a GPU and record the ncu reports.

    python benchmarks/metric_rules.py OUT_DIR [LESSON ...] [--only EXERCISE_ID ...]

For each exercise that declares metric rules, profiled against the reference solution
(one profile of it per exercise): the reference solution itself must pass every rule, each
correct-but-different submission (``CORRECT_VARIANTS`` beside the exercise) must be graded
correct and pass every rule, and the lesson's slow-but-correct variant (``SLOW_VARIANTS``)
must be graded correct on its output yet fail at least one rule. A table gives, per rule, both
groups' ratios and how far the bound sits from each (``grader.metric_rules.separation``):
the evidence a threshold is set from. Writes OUT_DIR/metric_rules-<lesson>.json, the table
(OUT_DIR/metric_rules-<lesson>.md), and the .ncu-rep files
(OUT_DIR/ncu/<exercise>-{solution,reference,slow}.ncu-rep) that tests/test_metric_rules.py
replays on machines without a GPU. With ``--only``, just those exercises are validated and
their records replace the ones already in OUT_DIR/metric_rules-<lesson>.json (each record
carries its own device and date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import exercises as catalogue  # noqa: E402
from grader.grade import run_in_subprocess  # noqa: E402
from grader.metric_rules import format_outcome, separation  # noqa: E402
from grader.ncu import NotAssessed  # noqa: E402
from grader.profiling import profile_cells, reference_cells  # noqa: E402
from workbook.mode import select_mode  # noqa: E402


def variant_cells(exercise, variant) -> list[dict]:
    """The reference cells with the variant (:mod:`grader.exercises.corpus`) written into
    the exercise's cell."""
    cells = reference_cells(exercise)
    for cell in cells:
        if cell["exercise_id"] == exercise.id:
            cell["source"] = variant.apply(cell["source"])
    return cells


def main(out: Path, lessons: list[str], only: list[str]) -> int:
    select_mode("gpu")
    (out / "ncu").mkdir(parents=True, exist_ok=True)
    if only:
        lessons = sorted({catalogue.get(e).lesson for e in only})
    problems = [p for lesson in lessons or list(catalogue.LESSONS)
                for p in validate_lesson(lesson, out, set(only))]
    return 1 if problems else 0


def graded_correct(ex, cells) -> tuple[bool, list[str]]:
    result = run_in_subprocess(ex, {"mode": "gpu", "exercise_id": ex.id, "cells": cells}, 600)
    return result.passed, result.messages


GRADING_PROCESSES = max(1, min(8, (os.cpu_count() or 2) // 2))


def grade_all(ex, programs: dict[str, list[dict]]) -> dict[str, tuple[bool, list[str]]]:
    """Grade every variant's output at once (each in its own process), while nothing is
    being profiled: ncu's measurements are made afterwards, one process at a time."""
    with ThreadPoolExecutor(GRADING_PROCESSES) as pool:
        futures = {label: pool.submit(graded_correct, ex, cells)
                   for label, cells in programs.items()}
        return {label: future.result() for label, future in futures.items()}


def profile(ex, cells, work: Path, label: str) -> dict | str:
    """The exercise's metrics for ``cells``, or why they could not be measured."""
    try:
        return profile_cells(ex, cells, work, label)
    except NotAssessed as exc:
        return f"not assessed: {exc}"


def validate_exercise(ex, slow, correct_variants, reports: Path) -> tuple[dict, list[str]]:
    """Profile the reference, the solution, the correct variants and the slow variant."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reference = profile(ex, reference_cells(ex), work, "reference")
        if isinstance(reference, str):
            return {"exercise": ex.id, "problem": reference}, [f"{ex.id}: reference {reference}"]
        groups = {"solution": ("the reference solution", reference_cells(ex), True)}
        groups["slow"] = (slow.description, variant_cells(ex, slow), False)
        for number, variant in enumerate(correct_variants, 1):
            groups[f"correct-{number}"] = (variant.description, variant_cells(ex, variant), True)
        runs = {}
        verdicts = grade_all(ex, {label: cells for label, (_, cells, _) in groups.items()
                                  if label != "solution"})
        for label, (description, cells, should_pass) in groups.items():
            correct, messages = verdicts.get(label, (True, []))
            if not correct:
                problems.append(f"{ex.id} {label} ({description}) is not correct: {messages}")
            student = profile(ex, cells, work, label)
            if isinstance(student, str):
                problems.append(f"{ex.id} {label} ({description}): {student}")
                runs[label] = {"description": description, "correct": correct,
                               "problem": student}
                continue
            outcomes = [r.evaluate(student[r.metric], reference[r.metric])
                        for r in ex.metric_rules]
            for outcome in outcomes:
                print(f"{ex.id:24s} {label:10s} {format_outcome(outcome)}", flush=True)
                if should_pass and outcome["status"] != "passed":
                    problems.append(f"{ex.id} {label} ({description}): {outcome['label']} "
                                    f"{outcome['status']} (expected passed)")
            # a slow variant is caught by one failed rule; each rule guards its own mistake
            if not should_pass and not any(o["status"] == "failed" for o in outcomes):
                problems.append(f"{ex.id} {label} ({description}) passed every rule "
                                f"(expected at least one failed)")
            runs[label] = {"description": description, "correct": correct, "rules": outcomes,
                           "student": student, "reference": reference}
        for label in ("solution", "reference", "slow"):
            if (work / f"{label}.ncu-rep").exists():
                shutil.copy(work / f"{label}.ncu-rep", reports / f"{ex.id}-{label}.ncu-rep")
    record = {"exercise": ex.id, "slow_variant": slow.description,
              "slow_variant_correct": runs["slow"]["correct"],
              "solution": runs["solution"], "slow": runs["slow"],
              "correct_variants": [runs[k] for k in runs if k.startswith("correct-")]}
    record["separation"] = separations(ex, record)
    return record, problems


def separations(ex, record: dict) -> list[dict]:
    """Per ratio bound: the correct group's worst ratio, the slow variant's, and margins."""
    measured = [run for run in (record["solution"], *record["correct_variants"])
                if "rules" in run]
    if "rules" not in record["slow"] or not measured:
        return []
    entries = []
    for index, rule in enumerate(ex.metric_rules):
        ratios = [run["rules"][index]["ratio"] for run in measured]
        slow = record["slow"]["rules"][index]["ratio"]
        if None not in ratios and slow is not None:
            entries += separation(rule, ratios, slow)
    return entries


def table(records: list[dict]) -> str:
    """Markdown: per rule, both groups' ratios and the bound's margins."""
    lines = ["| exercise | rule | bound | solution | correct variants | slow | headroom "
             "| slow margin | balanced bound |", "|" + " --- |" * 9]
    for record in records:
        for entry in record.get("separation", []):
            index = next(i for i, o in enumerate(record["solution"]["rules"])
                         if o["metric"] == entry["metric"])
            correct = ", ".join(f"{run['rules'][index]['ratio']:.2f}"
                                for run in record["correct_variants"] if "rules" in run)
            suggested = f"{entry['suggested']:.2f}" if entry["suggested"] else "none"
            lines.append(f"| {record['exercise']} | {entry['label']} | {entry['bound']} "
                         f"| {record['solution']['rules'][index]['ratio']:.2f} | {correct} "
                         f"| {entry['slow']:.2f} | {entry['headroom']:.2f} "
                         f"| {entry['slow_margin']:.2f} | {suggested} |")
    return "\n".join(lines) + "\n"


def validate_lesson(lesson: str, out: Path, only: set[str] = frozenset()) -> list[str]:
    """Validate one lesson's rules, write OUT/metric_rules-<lesson>.json; return problems."""
    from workbook.bench import device_name

    device, today = device_name(), datetime.date.today().isoformat()

    exercises = catalogue.LESSONS[lesson]
    records, problems = [], []
    for ex in (e for e in exercises if e.metric_rules and (not only or e.id in only)):
        slow, correct = catalogue.slow_variant(ex.id), catalogue.correct_variants(ex.id)
        if slow is None:
            problems.append(f"{ex.id}: no slow variant declared")
            continue
        if len(correct) < 2:
            problems.append(f"{ex.id}: fewer than two correct variants declared")
        record, found = validate_exercise(ex, slow, correct, out / "ncu")
        records.append({**record, "device": device, "date": today})
        problems += found
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
    margins = table(records)
    (out / f"metric_rules-{lesson}.md").write_text(
        f"{lesson}, {device}, {today}: ratio = value / reference value\n\n" + margins)
    print(margins)
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
