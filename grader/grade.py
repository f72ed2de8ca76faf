"""Grade notebooks: each phase runs a notebook's exercises in one child process.

Phases, for the exercises of one notebook:

* ``check``      -- the exercise's tests in the chosen mode (every mode);
* ``memcheck``, ``racecheck``, ``synccheck`` -- NVIDIA's compute-sanitizer tools on the
  small cases (gpu mode; :mod:`grader.sanitizer`);
* ``simulator``  -- the simulator's cases with the workbook's sanitizer (gpu mode),
  which sees what the GPU tools cannot (races on global memory within a block,
  reads of memory nobody wrote);
* ``profile``    -- one ncu run for the metric rules of the exercises that passed
  (gpu mode; :mod:`grader.profiling`).

The checks, the sanitizer tools and the simulator run at the same time (each
exercise's tools cannot change its check); profiling runs after them, alone on the
GPU, since concurrent work would distort its timings. On a GPU the phases' processes share
the notebook's compiled kernels (:mod:`grader.kernel_cache`). Each phase runs through
:mod:`grader.session`: a hang or crash costs the exercise it happened in, never
the others.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from grader import exercises as catalogue
from grader import kernel_cache
from grader import sanitizer as tools
from grader.notebook import LessonNotebook, NotebookError
from grader.profiling import apply_metrics, not_assessed, profile_notebook
from grader.results import ERROR, FAILED, NOT_IMPLEMENTED, PASSED, TIMEOUT, ExerciseResult
from grader.session import HANG_HINT, exercise_seconds, run_exercises

# seconds a test case may run (--timeout): the simulator stops it and says what each thread
# was doing; on a GPU its process is killed
DEFAULT_TIMEOUT = {"sim": 20.0, "gpu": 300.0}
SKIPPED_METRICS = "skipped on request (--no-metrics)"
SIM_METRICS = "simulator mode has no hardware counters"
SKIPPED_SANITIZERS = ("compute-sanitizer and the simulator pass: not run (skipped on request, "
                      "--no-sanitizers)")

# called with (phase, exercise id) when a phase starts an exercise, (phase, None) when done
PhaseCallback = Callable[[str, str | None], None]


@dataclass
class NotebookReport:
    path: str
    lesson: str
    mode: str
    exercises: list[ExerciseResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole notebook

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


def placeholder(exercise, status: str, message: str, mode: str) -> ExerciseResult:
    return ExerciseResult(id=exercise.id, title=exercise.title, status=status, score=0.0,
                          max_score=exercise.points, messages=[message], mode=mode)


def selected_exercises(notebook: LessonNotebook, only: Sequence[str] = ()) -> list:
    """The lesson's exercises to grade: all of them, or those named in ``only``."""
    if notebook.lesson not in catalogue.LESSONS:
        raise NotebookError(f"{notebook.path}: unknown lesson {notebook.lesson!r}")
    declared = catalogue.LESSONS[notebook.lesson]
    unknown = sorted(set(only) - {e.id for e in declared})
    if unknown:
        known = ", ".join(e.id for e in declared)
        raise NotebookError(f"{notebook.path}: lesson {notebook.lesson} has no exercise "
                            f"{', '.join(unknown)}; its exercises are {known}")
    return [e for e in declared if not only or e.id in only]


def exercises_in(notebook: LessonNotebook, only: Sequence[str]) -> list[str] | None:
    """The exercises of ``only`` that the notebook's lesson declares ([] for all of them),
    or None when ``only`` names none of them; an id no lesson declares is an error."""
    if not only:
        return []
    try:
        lessons = {catalogue.get(i).lesson for i in only}
    except catalogue.UnknownExercise as exc:
        raise NotebookError(str(exc).strip("'\"")) from None
    mine = [i for i in only if catalogue.get(i).lesson == notebook.lesson]
    return mine if notebook.lesson in lessons else None


def grade_notebook(
    notebook: LessonNotebook,
    mode: str,
    timeout: float | None = None,
    seed: int | None = None,
    on_result: Callable[[ExerciseResult], None] | None = None,
    *,
    exercises: Sequence[str] = (),
    metrics: bool = True,
    sanitizers: bool = True,
    on_phase: PhaseCallback | None = None,
) -> NotebookReport:
    """Grade the lesson's exercises (or those named in ``exercises``) in ``notebook``."""
    import time

    start = time.monotonic()
    chosen = selected_exercises(notebook, exercises)
    report = NotebookReport(str(notebook.path), notebook.lesson, mode)
    declared_ids = {e.id for e in catalogue.LESSONS[notebook.lesson]}
    present = notebook.exercise_ids()
    report.warnings.extend(f"cell for unknown exercise {u!r} ignored"
                           for u in sorted(set(present) - declared_ids))
    order = [i for i in present if i in {e.id for e in chosen}]  # notebook order
    cells = ([asdict(c) for c in notebook.program_for(order[-1])] if order else [])
    timeout = timeout or DEFAULT_TIMEOUT[mode]
    progress = on_phase or (lambda phase, exercise_id: None)

    by_id = {e.id: e for e in chosen}
    with kernel_cache.for_notebook(mode):  # the phases' processes share compiled kernels
        results = run_phases(order, cells, mode, timeout, seed, sanitizers, progress)
        if mode == "gpu" and metrics:
            profile_passed(results, [by_id[i] for i in order], cells, timeout, progress)
    for exercise in chosen:
        result = results.get(exercise.id) or placeholder(
            exercise, NOT_IMPLEMENTED, f"no exercise cell for {exercise.id} in the notebook",
            mode)
        finish(result, exercise, mode, metrics, sanitizers)
        report.exercises.append(result)
        if on_result:
            on_result(result)
    if mode == "gpu" and not metrics:
        report.warnings.append(f"metric rules were not assessed: {SKIPPED_METRICS}")
    if mode == "gpu" and not sanitizers:
        report.warnings.append(SKIPPED_SANITIZERS)
    report.seconds = round(time.monotonic() - start, 3)
    return report


PROCESSES_ENV = "WORKBOOK_GRADER_PROCESSES"  # processes per phase and notebook


def processes_per_phase(exercises: int) -> int:
    """How many processes share each phase's exercises: one per six CPU cores (each phase
    runs beside the others), at most three; ``WORKBOOK_GRADER_PROCESSES`` overrides."""
    text = os.environ.get(PROCESSES_ENV)
    wanted = int(text) if text else min(3, (os.cpu_count() or 1) // 6)
    return max(1, min(wanted, exercises))


def run_phases(order: list[str], cells: list[dict], mode: str, timeout: float,
               seed: int | None, sanitizers: bool,
               progress: PhaseCallback) -> dict[str, ExerciseResult]:
    """The check, and in gpu mode the sanitizer tools and the simulator pass, side by side,
    each phase's exercises shared among :func:`processes_per_phase` processes."""
    if not order:
        return {}
    tool_path = tools.find_tool() if mode == "gpu" and sanitizers else None
    tool_names = tools.selected_tools() if tool_path else ()
    count = processes_per_phase(len(order))
    parts = [order[i::count] for i in range(count)]  # each part stays in notebook order
    phases = 1 + len(tool_names) + (mode == "gpu" and sanitizers)
    gate = _Gate()
    with ThreadPoolExecutor(max_workers=phases * count) as pool:
        checked = [pool.submit(check_phase, part, cells, mode, timeout, seed, progress,
                               on_result=gate.result) for part in parts]
        simulated = ([pool.submit(gate.then, check_phase, part, cells, "sim", timeout, seed,
                                  progress, "simulator") for part in parts]
                     if mode == "gpu" and sanitizers else [])
        seconds: dict[str, dict[str, float]] = {tool: {} for tool in tool_names}
        tool_runs = {tool: [pool.submit(gate.then, _sanitize, tool_path, tool, part, cells,
                                        timeout, seed, seconds[tool], progress)
                            for part in parts]
                     for tool in tool_names}
        try:
            results = _merged(f.result() for f in checked)
        finally:
            gate.close()
        findings = {tool: _merged(f.result() for f in futures)
                    for tool, futures in tool_runs.items()}
        sim_results = _merged(f.result() for f in simulated)
    for exercise_id, result in results.items():
        if not tools.qualifies(result):
            continue
        if mode == "gpu" and sanitizers and tool_path is None:
            result.messages.append(tools.MISSING)
        for tool in tool_names:
            result.add_time(tool, seconds[tool].get(exercise_id, 0.0))
        tools.apply_findings(result, [findings[tool][exercise_id] for tool in tool_names])
        if exercise_id in sim_results:
            apply_simulator_pass(result, sim_results[exercise_id])
    return results


class _Gate:
    """Holds the sanitizer tools and the simulator pass back until the check has produced a
    result they can judge (a kernel that ran to the end): for a notebook of stubs they never
    start, for a finished one they start with the first result and run beside the check."""

    def __init__(self):
        self.event = threading.Event()
        self.worthwhile = False

    def result(self, event: dict) -> None:
        if event["result"]["status"] in (PASSED, FAILED):
            self.worthwhile = True
            self.event.set()

    def close(self) -> None:
        self.event.set()

    def then(self, function, *args):
        self.event.wait()
        return function(*args) if self.worthwhile else {}


def _merged(dicts) -> dict:
    merged: dict = {}
    for d in dicts:
        merged.update(d)
    return merged


def _sanitize(tool_path, tool, order, cells, timeout, seed, seconds, progress):
    progress(tool, order[0])
    try:
        return tools.sanitize_notebook(tool_path, tool, order, cells, timeout, seed, seconds,
                                       on_event=_progress_events(tool, progress))
    finally:
        progress(tool, None)


def _progress_events(phase: str, progress: PhaseCallback):
    def on_event(event: dict) -> None:
        if "start" in event:
            progress(phase, event["start"])
        elif "case" in event:  # the status line follows the test cases: [id, k, n]
            exercise_id, k, n = event["case"]
            progress(phase, f"{exercise_id} (test case {k} of {n})")

    return on_event


def check_phase(order: list[str], cells: list[dict], mode: str, timeout: float,
                seed: int | None, progress: PhaseCallback = lambda p, e: None,
                phase: str = "check",
                on_result: Callable[[dict], None] | None = None) -> dict[str, ExerciseResult]:
    """Check the exercises in one process (more after a crash or hang); results by id."""
    job = {"mode": mode, "action": "check", "exercise_ids": order, "cells": cells, "seed": seed}
    progress(phase, order[0])
    show = _progress_events(phase, progress)

    def on_event(event: dict) -> None:
        show(event)
        if on_result and "result" in event:
            on_result(event)

    attempts = run_exercises(job, timeout, on_event=on_event)
    progress(phase, None)
    results: dict[str, ExerciseResult] = {}
    for attempt in attempts:
        for event in attempt.events:
            if "result" in event:
                result = ExerciseResult.from_dict(event["result"])
                results[result.id] = result
        if attempt.timed_out:
            exercise = catalogue.get(attempt.timed_out)
            results[exercise.id] = placeholder(
                exercise, TIMEOUT, f"did not finish within {timeout:g} s (--timeout): {HANG_HINT}",
                mode)
        elif attempt.crashed and attempt.crashed not in results:
            exercise = catalogue.get(attempt.crashed)
            results[exercise.id] = placeholder(
                exercise, ERROR, f"the grading process crashed ({attempt.how_it_ended()}); "
                f"last output:\n{attempt.tail()}", mode)
    for exercise_id, seconds in exercise_seconds(attempts).items():
        if exercise_id in results:
            results[exercise_id].add_time(phase, seconds)
    return results


def apply_simulator_pass(result: ExerciseResult, simulated: ExerciseResult) -> None:
    """Fail a GPU-graded exercise whose simulator run (small cases, sanitizer on) found a
    bug; a simulator run that did not finish is reported, not held against it."""
    result.add_time("simulator", simulated.seconds)
    if simulated.status in (FAILED, ERROR):
        detail = "\n".join(simulated.messages)
        result.messages.append(f"simulator (small cases, sanitizer on): {simulated.status}: "
                               f"{detail}")
        result.status, result.score = FAILED, 0.0
    elif simulated.status == PASSED:
        result.messages.append("simulator (small cases, sanitizer on): no findings")
    else:
        result.messages.append(f"simulator (small cases, sanitizer on): not assessed "
                               f"({simulated.status}: {' '.join(simulated.messages)[:200]})")


def profile_passed(results: dict[str, ExerciseResult], exercises: list, cells: list[dict],
                   timeout: float, progress: PhaseCallback) -> None:
    """One ncu run for the metric rules of every exercise whose result passed so far."""
    chosen = [e for e in exercises if e.metric_rules and e.id in results
              and results[e.id].passed]
    if not chosen:
        return
    progress("profile", chosen[0].id)
    seconds: dict[str, float] = {}
    sections = profile_notebook(chosen, cells, timeout, seconds,
                                on_event=_progress_events("profile", progress))
    progress("profile", None)
    for exercise in chosen:
        result = results[exercise.id]
        result.add_time("profile", seconds.get(exercise.id, 0.0))
        apply_metrics(result, exercise, sections[exercise.id])


def finish(result: ExerciseResult, exercise, mode: str, metrics: bool, sanitizers: bool) -> None:
    """Metric sections for exercises that were not profiled, and notes on skipped phases."""
    if exercise.metric_rules and not result.metrics:
        if mode != "gpu":  # the same for every exercise: the report says it once
            result.metrics = not_assessed(exercise, SIM_METRICS)
        elif not metrics:
            apply_metrics(result, exercise, not_assessed(exercise, SKIPPED_METRICS))
        elif result.status == FAILED and result.cases and all(c.passed for c in result.cases):
            apply_metrics(result, exercise, not_assessed(
                exercise, "the exercise failed a sanitizer or simulator check"))
        else:
            apply_metrics(result, exercise, not_assessed(exercise, "the output is not correct yet"))
    if mode == "gpu" and not sanitizers and tools.qualifies(result):
        result.messages.append(SKIPPED_SANITIZERS)


def run_in_subprocess(exercise, job: dict, timeout: float) -> ExerciseResult:
    """Check one exercise in a child process (``job``: mode, exercise_id, cells, seed)."""
    results = check_phase([exercise.id], job["cells"], job["mode"], timeout, job.get("seed"))
    return results[exercise.id]
