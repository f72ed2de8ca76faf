"""Metric grading on a GPU: profile the student's kernel and the reference solution
in the same run with Nsight Compute, then apply the exercise's :class:`MetricRule` s.

A notebook is profiled in one ncu run (:func:`profile_notebook`): one process
executes the student's cells and the reference solution's side by side and makes
each exercise's profiling launches for both, each behind a marker kernel that
separates the segments in the report. :func:`assess` profiles one exercise alone
(``grader profile`` and ``benchmarks/metric_rules.py``).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import asdict
from pathlib import Path

from grader import exercises as catalogue
from grader import ncu
from grader.metric_rules import FAILED, format_outcome
from grader.ncu import NotAssessed, read_metrics
from grader.notebook import load
from grader.runner import MARKER_KERNEL
from grader.session import exercise_seconds, run_exercises

PROFILE_TIMEOUT = 600.0  # seconds an exercise's profiling may take under ncu


def metric_names(exercises) -> list[str]:
    return sorted({rule.metric for ex in exercises for rule in ex.metric_rules})


def profiled_kernels(exercise) -> list[str]:
    return list(exercise.profile_kernels or (exercise.entry,))


def profile_cells(exercise, cells, workdir: Path, label: str,
                  timeout: float = PROFILE_TIMEOUT) -> dict[str, float]:
    """Run the exercise's profile launch for ``cells`` under ncu; return its metrics."""
    metrics, kernels = metric_names([exercise]), profiled_kernels(exercise)
    report = workdir / f"{label}.ncu-rep"
    prefix = ncu.command(kernels, metrics, report, launch_skip=exercise.profile_skip,
                         launch_count=1)
    job = {"mode": "gpu", "action": "profile", "exercise_ids": [exercise.id], "cells": cells}
    (attempt, *_) = run_exercises(job, timeout, wrap=lambda n, folder: (prefix, {}))
    problems = [e["why"] for e in attempt.events if "skipped" in e or "failed" in e]
    if problems:
        raise NotAssessed(f"the profiling launch failed: {problems[0]}")
    if attempt.timed_out:
        raise NotAssessed(f"ncu did not finish within {timeout:g} s")
    return read_metrics(ncu.check_output(attempt.output, report, kernels), metrics)[0]


def reference_cells(exercise) -> list[dict]:
    path = catalogue.solution_notebook(exercise.lesson)
    if path is None:
        raise NotAssessed(f"no reference solution notebook for {exercise.lesson}")
    return [asdict(c) for c in load(path).program_for(exercise.id)]


def assess(exercise, student_cells: list[dict], mode: str, keep: Path | None = None) -> dict:
    """Metric section of an exercise result: one outcome per rule."""
    rules = exercise.metric_rules
    if mode != "gpu":
        return not_assessed(exercise, "simulator mode has no hardware counters")
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        workdir = keep or Path(tmp)
        try:
            student = profile_cells(exercise, student_cells, workdir, "student")
            reference = profile_cells(exercise, reference_cells(exercise), workdir, "reference")
        except NotAssessed as exc:
            return not_assessed(exercise, str(exc))
    outcomes = [r.evaluate(student[r.metric], reference[r.metric]) for r in rules]
    return {"rules": outcomes, "student": student, "reference": reference}


def not_assessed(exercise, reason: str) -> dict:
    return {"rules": [r.not_assessed(reason) for r in exercise.metric_rules]}


def profile_notebook(exercises, student_cells: list[dict], timeout: float = PROFILE_TIMEOUT,
                     seconds: dict[str, float] | None = None,
                     on_event=None) -> dict[str, dict]:
    """Metric sections of ``exercises`` (in notebook order) from one ncu run over the
    student's cells and the reference solution's."""
    if not exercises:
        return {}
    lesson = exercises[0].lesson
    solution = catalogue.solution_notebook(lesson)
    if solution is None:
        reason = f"no reference solution notebook for {lesson}"
        return {ex.id: not_assessed(ex, reason) for ex in exercises}
    reference = [asdict(c) for c in load(solution).program_for(exercises[-1].id)]
    metrics = metric_names(exercises)
    kernels = sorted({k for ex in exercises for k in profiled_kernels(ex)} | {MARKER_KERNEL})
    job = {"mode": "gpu", "action": "profile", "exercise_ids": [ex.id for ex in exercises],
           "cells": student_cells, "reference_cells": reference}

    def under_ncu(number: int, folder: Path):
        report = folder / "notebook.ncu-rep"
        return ncu.command(kernels, metrics, report), {"report": report}

    found: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        try:
            attempts = run_exercises(job, timeout, wrap=under_ncu, workdir=Path(tmp),
                                     on_event=on_event)
        except NotAssessed as exc:
            return {ex.id: not_assessed(ex, str(exc)) for ex in exercises}
        for attempt in attempts:
            _read_attempt(attempt, exercises, metrics, kernels, timeout, found, reasons)
    if seconds is not None:
        seconds.update(exercise_seconds(attempts))
    sections = {}
    for ex in exercises:
        runs = found.get(ex.id, {})
        if {"student", "reference"} <= set(runs):
            sections[ex.id] = {"rules": [r.evaluate(runs["student"][r.metric],
                                                    runs["reference"][r.metric])
                                         for r in ex.metric_rules], **runs}
        else:
            sections[ex.id] = not_assessed(ex, reasons.get(ex.id, "nothing was profiled"))
    return sections


def _read_attempt(attempt, exercises, metrics, kernels, timeout, found, reasons) -> None:
    """Split one ncu report into its segments and keep each exercise's profiled launch."""
    by_id = {ex.id: ex for ex in exercises}
    for event in attempt.events:
        for key in ("skipped", "failed"):
            if key in event:
                exercise_id, who = event[key]
                reasons[exercise_id] = f"the {who}'s profiling launch failed: {event['why']}"
    for blamed in (attempt.timed_out, attempt.crashed):
        if blamed:
            reasons[blamed] = (f"ncu did not finish within {timeout:g} s" if blamed ==
                               attempt.timed_out else f"the profiled process crashed "
                               f"({attempt.how_it_ended()}): {attempt.tail(4)}")
    segments = [tuple(e["segment"]) for e in attempt.events if "segment" in e]
    if not segments:
        return
    try:
        report = ncu.check_output(attempt.output, attempt.extra["report"], kernels)
        launches = read_metrics(report, metrics)
    except NotAssessed as exc:
        for exercise_id, _ in segments:
            reasons.setdefault(exercise_id, str(exc))
        return
    for (exercise_id, who), part in zip(segments, split_segments(launches)):
        exercise = by_id[exercise_id]
        pattern = re.compile(r"^(" + "|".join(profiled_kernels(exercise)) + r")\[")
        matching = [launch for launch in part if pattern.match(launch["kernel"])]
        if len(matching) > exercise.profile_skip:
            found.setdefault(exercise_id, {})[who] = matching[exercise.profile_skip]
        else:
            reasons.setdefault(exercise_id, f"ncu profiled no launch of {pattern.pattern} "
                                            f"for the {who}")


def split_segments(launches: list[dict]) -> list[list[dict]]:
    """Launches grouped by the marker kernel that opens each segment."""
    segments: list[list[dict]] = []
    for launch in launches:
        if launch["kernel"].startswith(MARKER_KERNEL + "["):
            segments.append([])
        elif segments:
            segments[-1].append(launch)
    return segments


METRIC_SHARE = 0.5  # share of an exercise's points that its metric rules carry


def apply_metric_rules(result, exercise, student_cells: list[dict], mode: str) -> None:
    """Add the metric section to a checked exercise; a failed rule costs METRIC_SHARE."""
    if not exercise.metric_rules:
        return
    if not result.passed:
        apply_metrics(result, exercise, not_assessed(exercise, "the output is not correct yet"))
        return
    apply_metrics(result, exercise, assess(exercise, student_cells, mode))


def apply_metrics(result, exercise, section: dict) -> None:
    """Record a metric section in the result; a failed rule costs METRIC_SHARE."""
    result.metrics = section
    if not result.passed:
        return
    result.messages.extend(format_outcome(o) for o in section["rules"])
    if any(o["status"] == FAILED for o in section["rules"]):
        result.status = FAILED
        result.score = exercise.points * (1 - METRIC_SHARE)
