"""Metric grading on a GPU: profile the student's kernel and the reference solution
in the same run with Nsight Compute, then apply the exercise's :class:`MetricRule` s."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from grader import exercises as catalogue
from grader.metric_rules import FAILED, format_outcome
from grader.ncu import NotAssessed, profile, read_metrics
from grader.notebook import load


def profile_cells(exercise, cells, workdir: Path, label: str) -> dict[str, float]:
    """Run the exercise's profile launch for ``cells`` under ncu; return its metrics."""
    job = {"mode": "gpu", "exercise_id": exercise.id, "cells": cells, "profile": True}
    job_path = workdir / f"{label}-job.json"
    job_path.write_text(json.dumps(job))
    command = [sys.executable, "-m", "grader.runner", str(job_path),
               str(workdir / f"{label}-result.json")]
    env = dict(os.environ, WORKBOOK_MODE="gpu", NUMBA_ENABLE_CUDASIM="0")
    metrics = sorted({rule.metric for rule in exercise.metric_rules})
    report = profile(command, list(exercise.profile_kernels or (exercise.entry,)), metrics,
                     workdir / f"{label}.ncu-rep", launch_skip=exercise.profile_skip, env=env)
    return read_metrics(report, metrics)[0]


def reference_cells(exercise) -> list[dict]:
    path = catalogue.solution_notebook(exercise.lesson)
    if path is None:
        raise NotAssessed(f"no reference solution notebook for {exercise.lesson}")
    return [asdict(c) for c in load(path).program_for(exercise.id)]


def assess(exercise, student_cells: list[dict], mode: str, keep: Path | None = None) -> dict:
    """Metric section of an exercise result: one outcome per rule."""
    rules = exercise.metric_rules
    if mode != "gpu":
        reason = "simulator mode has no hardware counters"
        return {"rules": [r.not_assessed(reason) for r in rules]}
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        workdir = keep or Path(tmp)
        try:
            student = profile_cells(exercise, student_cells, workdir, "student")
            reference = profile_cells(exercise, reference_cells(exercise), workdir, "reference")
        except NotAssessed as exc:
            return {"rules": [r.not_assessed(str(exc)) for r in rules]}
    outcomes = [r.evaluate(student[r.metric], reference[r.metric]) for r in rules]
    return {"rules": outcomes, "student": student, "reference": reference}


METRIC_SHARE = 0.5  # share of an exercise's points that its metric rules carry


def apply_metric_rules(result, exercise, student_cells: list[dict], mode: str) -> None:
    """Add the metric section to a checked exercise; a failed rule costs METRIC_SHARE."""
    if not exercise.metric_rules:
        return
    if not result.passed:
        reason = "the output is not correct yet"
        result.metrics = {"rules": [r.not_assessed(reason) for r in exercise.metric_rules]}
        return
    result.metrics = assess(exercise, student_cells, mode)
    result.messages.extend(format_outcome(o) for o in result.metrics["rules"])
    if any(o["status"] == FAILED for o in result.metrics["rules"]):
        result.status = FAILED
        result.score = exercise.points * (1 - METRIC_SHARE)
