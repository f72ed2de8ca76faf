"""Validate every exercise's metric rules on a GPU and record the ncu reports.

    python benchmarks/metric_rules.py OUT_DIR [LESSON ...] [--only EXERCISE_ID ...]

For each exercise that declares metric rules, profiled against the reference solution
(profiled once per exercise, in the same process): the reference solution itself must pass
every rule, each correct-but-different submission (the ``[[correct]]`` variants of the
corpus, grader/exercises/<lesson>/variants/) must be graded correct and pass every rule,
and the slow-but-correct variant (``[slow]``) must be graded correct on its output yet fail
at least one rule. Each variant's output is graded first, several processes at a time; then
one ncu process profiles the whole lesson, every program behind a marker kernel
(grader.profiling.profile_programs). A table gives, per rule, both groups' ratios and how
far the bound sits from each (``grader.metric_rules.separation``): the evidence a threshold
is set from. Writes OUT_DIR/metric_rules-<lesson>.json (with the seconds each stage took and
the order of the segments in each report), the table (OUT_DIR/metric_rules-<lesson>.md),
and the reports (OUT_DIR/ncu/<lesson>-<attempt>.ncu-rep; one more attempt per crash) that
tests/test_metric_rules.py replays on machines without a GPU. With ``--only``, just those
exercises are validated and their records replace the ones already in
OUT_DIR/metric_rules-<lesson>.json (each record carries its own device and date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import exercises as catalogue  # noqa: E402
from grader.grade import run_in_subprocess  # noqa: E402
from grader.metric_rules import format_outcome, separation  # noqa: E402
from grader.profiling import (  # noqa: E402
    PROFILE_TIMEOUT,
    REPORT,
    profile_programs,
    reference_cells,
)
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
    lessons = lessons or list(catalogue.LESSONS)
    # every lesson's variants graded first, many at a time; then the lessons profiled one
    # after another, nothing else running on the GPU
    groups = {lesson: lesson_groups(lesson, set(only)) for lesson in lessons}
    clock = time.monotonic()
    verdicts = grade_all({key: program for lesson in lessons
                          for key, program in graded_programs(groups[lesson]).items()})
    print(f"graded {len(verdicts)} variants in {time.monotonic() - clock:.0f} s", flush=True)
    problems = [p for lesson in lessons
                for p in validate_lesson(lesson, out, set(only), verdicts, groups[lesson])]
    return 1 if problems else 0


def validated_exercises(lesson: str, only: set[str]) -> list:
    """The lesson's exercises with rules (those named in ``only``, if any) and a slow
    variant."""
    return [e for e in catalogue.LESSONS[lesson] if e.metric_rules
            and (not only or e.id in only) and catalogue.slow_variant(e.id) is not None]


def lesson_groups(lesson: str, only: set[str]) -> dict[str, dict]:
    """``exercise id -> its variant_groups`` for the lesson's validated exercises."""
    return {ex.id: variant_groups(ex) for ex in validated_exercises(lesson, only)}


def graded_programs(groups: dict[str, dict]) -> dict[tuple, tuple]:
    """``(exercise id, label) -> (exercise, cells)`` of every variant in ``groups`` (see
    :func:`lesson_groups`) to grade."""
    return {(exercise_id, label): (catalogue.get(exercise_id), cells)
            for exercise_id, labelled in groups.items()
            for label, (_, cells, _) in labelled.items() if cells is not None}


def graded_correct(ex, cells) -> tuple[bool, list[str]]:
    result = run_in_subprocess(ex, {"mode": "gpu", "exercise_id": ex.id, "cells": cells}, 600)
    return result.passed, result.messages


GRADING_PROCESSES = max(1, min(14, (os.cpu_count() or 2) - 2))  # mostly compiling: CPU-bound


def grade_all(programs: dict[tuple, tuple]) -> dict[tuple, tuple[bool, list[str]]]:
    """Grade every variant's output at once (each in its own process), while nothing is
    being profiled: ncu's measurements are made afterwards. ``programs`` maps a key to
    ``(exercise, cells)``."""
    with ThreadPoolExecutor(GRADING_PROCESSES) as pool:
        futures = {key: pool.submit(graded_correct, ex, cells)
                   for key, (ex, cells) in programs.items()}
        return {key: future.result() for key, future in futures.items()}


def variant_groups(ex) -> dict[str, tuple[str, list[dict] | None, bool]]:
    """The exercise's profiled groups, ``label -> (description, cells, should pass)``: the
    reference solution (profiled for every exercise, cells None), its slow variant and
    its correct variants."""
    groups = {"solution": ("the reference solution", None, True)}
    slow = catalogue.slow_variant(ex.id)
    groups["slow"] = (slow.description, variant_cells(ex, slow), False)
    for number, variant in enumerate(catalogue.correct_variants(ex.id), 1):
        groups[f"correct-{number}"] = (variant.description, variant_cells(ex, variant), True)
    return groups


def profile_lesson(exercises, groups: dict, work: Path):
    """Every group of every exercise, and the reference, profiled in one ncu run (one
    more per crash): see grader.profiling.profile_programs."""
    reference = reference_cells(exercises[-1])
    programs = [("reference", None, reference), ("solution", None, reference)]
    programs += [(label, ex.id, cells) for ex in exercises
                 for label, (_, cells, _) in groups[ex.id].items() if cells is not None]
    return profile_programs(exercises, programs, PROFILE_TIMEOUT, work)


def exercise_record(ex, groups: dict, verdicts: dict, found: dict, reason: str
                    ) -> tuple[dict, list[str]]:
    """One exercise's record (each group's rule outcomes against the reference profiled in
    the same run) and the problems it shows."""
    problems, runs = [], {}
    reference = found.get("reference")
    if reference is None:
        return {"exercise": ex.id, "problem": reason}, [f"{ex.id}: reference {reason}"]
    for label, (description, _, should_pass) in groups.items():
        correct, messages = verdicts.get((ex.id, label), (True, []))
        if not correct:
            problems.append(f"{ex.id} {label} ({description}) is not correct: {messages}")
        student = found.get(label)
        if student is None:
            problems.append(f"{ex.id} {label} ({description}): not assessed: {reason}")
            runs[label] = {"description": description, "correct": correct,
                           "problem": f"not assessed: {reason}"}
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
    record = {"exercise": ex.id, "slow_variant": groups["slow"][0],
              "slow_variant_correct": runs["slow"]["correct"],
              "solution": runs["solution"], "slow": runs["slow"],
              "correct_variants": [runs[k] for k in runs if k.startswith("correct-")]}
    if all("rules" in run for run in (record["solution"], record["slow"])):
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


def validate_lesson(lesson: str, out: Path, only: set[str] = frozenset(),
                    verdicts: dict | None = None, groups: dict | None = None) -> list[str]:
    """Validate one lesson's rules, write OUT/metric_rules-<lesson>.json and its ncu
    reports (OUT/ncu/<lesson>-<attempt>.ncu-rep); return the problems found. The variants
    (``groups``, see :func:`lesson_groups`) are built and graded here unless they and
    their ``verdicts`` (see :func:`grade_all`) come with the call."""
    from workbook.bench import device_name

    device, today = device_name(), datetime.date.today().isoformat()
    declared = [e for e in catalogue.LESSONS[lesson]
                if e.metric_rules and (not only or e.id in only)]
    problems = [f"{ex.id}: fewer than two correct variants declared" for ex in declared
                if len(catalogue.correct_variants(ex.id)) < 2]
    problems += [f"{ex.id}: no slow variant declared" for ex in declared
                 if catalogue.slow_variant(ex.id) is None]
    groups = lesson_groups(lesson, only) if groups is None else groups
    if not groups:
        return problems
    exercises = [catalogue.get(exercise_id) for exercise_id in groups]
    seconds = {}
    if verdicts is None:
        clock = time.monotonic()
        verdicts = grade_all(graded_programs(groups))
        seconds["grading"] = round(time.monotonic() - clock, 1)
    clock = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        found, reasons, attempts = profile_lesson(exercises, groups, Path(tmp))
        reports = []
        for number, attempt in enumerate(attempts):
            report = Path(tmp, str(number), REPORT)
            if report.exists():
                name = f"ncu/{lesson}-{number}.ncu-rep"
                shutil.copy(report, out / name)
                reports.append({"file": name, "segments": [e["segment"] for e in attempt.events
                                                            if "segment" in e]})
    seconds["profiling"] = round(time.monotonic() - clock, 1)
    records = []
    for ex in exercises:
        record, found_problems = exercise_record(ex, groups[ex.id], verdicts,
                                                 found.get(ex.id, {}),
                                                 reasons.get(ex.id, "nothing was profiled"))
        records.append({**record, "device": device, "date": today})
        problems += found_problems
    path = out / f"metric_rules-{lesson}.json"
    if only and path.exists():  # keep the other exercises' records
        previous = json.loads(path.read_text())
        redone = {r["exercise"] for r in records}
        kept = [r for r in previous["exercises"] if r["exercise"] not in redone]
        order = [e.id for e in catalogue.LESSONS[lesson]]
        records = sorted(kept + records, key=lambda r: order.index(r["exercise"]))
        problems = [p for p in previous.get("problems", [])
                    if p.split(":")[0].split()[0] not in redone] + problems
    result = {"device": device, "date": today, "lesson": lesson, "seconds": seconds,
              "reports": reports, "exercises": records, "problems": problems}
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    margins = table(records)
    (out / f"metric_rules-{lesson}.md").write_text(
        f"{lesson}, {device}, {today}: ratio = value / reference value; "
        f"{', '.join(f'{k} {v:g} s' for k, v in seconds.items())}\n\n" + margins)
    print(margins)
    print("\n".join(["", f"{lesson} problems:", *problems]) if problems
          else f"\n{lesson}: all rules validated")
    print(f"{lesson}: {', '.join(f'{k} {v:g} s' for k, v in seconds.items())}", flush=True)
    return problems


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--only", nargs="+", default=[], metavar="EXERCISE_ID")
    options = parser.parse_args()
    sys.exit(main(options.out, options.lessons, options.only))
