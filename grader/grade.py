"""Grade notebooks: one child process per exercise, with a timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader import exercises as catalogue
from grader.notebook import LessonNotebook, NotebookError
from grader.profiling import apply_metric_rules
from grader.results import ERROR, NOT_IMPLEMENTED, TIMEOUT, ExerciseResult
from grader.sanitizer import apply_sanitizers

DEFAULT_TIMEOUT = {"sim": 300.0, "gpu": 300.0}


@dataclass
class NotebookReport:
    path: str
    lesson: str
    mode: str
    exercises: list[ExerciseResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.exercises)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exercises"] = [e.to_dict() for e in self.exercises]
        d.update(score=self.score, max_score=self.max_score, passed=self.passed)
        return d


def _placeholder(exercise, status: str, message: str, mode: str) -> ExerciseResult:
    return ExerciseResult(id=exercise.id, title=exercise.title, status=status, score=0.0,
                          max_score=exercise.points, messages=[message], mode=mode)


def grade_notebook(
    notebook: LessonNotebook,
    mode: str,
    timeout: float | None = None,
    seed: int | None = None,
    on_result: Callable[[ExerciseResult], None] | None = None,
) -> NotebookReport:
    """Grade every exercise the notebook's lesson declares."""
    if notebook.lesson not in catalogue.LESSONS:
        raise NotebookError(f"{notebook.path}: unknown lesson {notebook.lesson!r}")
    report = NotebookReport(str(notebook.path), notebook.lesson, mode)
    present = notebook.exercise_ids()
    declared = catalogue.LESSONS[notebook.lesson]
    unknown = sorted(set(present) - {e.id for e in declared})
    report.warnings.extend(f"cell for unknown exercise {u!r} ignored" for u in unknown)
    for exercise in declared:
        if exercise.id not in present:
            result = _placeholder(exercise, NOT_IMPLEMENTED,
                                  f"no exercise cell for {exercise.id} in the notebook", mode)
        else:
            cells = [asdict(c) for c in notebook.program_for(exercise.id)]
            job = {"mode": mode, "exercise_id": exercise.id, "cells": cells, "seed": seed}
            result = run_in_subprocess(exercise, job, timeout or DEFAULT_TIMEOUT[mode])
            apply_metric_rules(result, exercise, cells, mode)
            apply_sanitizers(result, exercise, cells, mode, timeout or DEFAULT_TIMEOUT[mode], seed)
        report.exercises.append(result)
        if on_result:
            on_result(result)
    return report


def run_in_subprocess(exercise, job: dict, timeout: float) -> ExerciseResult:
    """Run :mod:`grader.runner` on ``job``; turn hangs and crashes into results."""
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        job_path, result_path = Path(tmp, "job.json"), Path(tmp, "result.json")
        job_path.write_text(json.dumps(job))
        env = dict(os.environ, WORKBOOK_MODE=job["mode"], PYTHONUNBUFFERED="1",
                   NUMBA_ENABLE_CUDASIM="1" if job["mode"] == "sim" else "0")
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.runner", str(job_path), str(result_path)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return _placeholder(
                exercise, TIMEOUT,
                f"did not finish within {timeout:g} s: an infinite loop, or threads waiting "
                "at a barrier some threads never reach?", job["mode"])
        if result_path.exists():
            return ExerciseResult.from_dict(json.loads(result_path.read_text()))
        tail = "\n".join(output.strip().splitlines()[-15:])
        how = (f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exit code {proc.returncode}")
        return _placeholder(exercise, ERROR,
                            f"the grading process crashed ({how}); last output:\n{tail}",
                            job["mode"])
