"""The stages of grading a notebook (:mod:`grader.grade`), one module each:

* :mod:`grader.stages.check`    -- the exercises' tests in the chosen mode;
* :mod:`grader.stages.sanitize` -- one of NVIDIA's compute-sanitizer tools on the small cases;
* :mod:`grader.stages.simulate` -- the simulator's cases with the workbook's sanitizer;
* :mod:`grader.stages.profile`  -- one ncu run for the metric rules.

Each stage module has one entry point, ``run(order, cells, ...)``: it takes the notebook's
exercise ids in notebook order, the program cells and the options it needs, and returns its
outcome by exercise id. The profile stage's ``run`` takes one or more notebooks, each as
(ids, cells, kernel cache), and returns an outcome per notebook: a batch task profiles its
notebooks in one ncu run. A stage whose outcome amends the check's result also has
``apply(result, ...)``, beside its ``run``. The stages do not import each other: what more
than one of them needs is here.
"""

from __future__ import annotations

from collections.abc import Callable

from grader import exercises as catalogue
from grader.results import ERROR, TIMEOUT, ExerciseResult
from grader.session import HANG_HINT, exercise_seconds, run_exercises

# called with (phase, exercise id) when a phase starts an exercise, (phase, None) when done
PhaseCallback = Callable[[str, str | None], None]


def placeholder(exercise, status: str, message: str, mode: str) -> ExerciseResult:
    """The result of an exercise that gave none of its own (no cell, a hang, a crash)."""
    return ExerciseResult(id=exercise.id, title=exercise.title, status=status, score=0.0,
                          max_score=exercise.points, messages=[message], mode=mode)


def progress_events(phase: str, progress: PhaseCallback):
    """A grading process's events as progress reports: the exercise, then its test case."""
    def on_event(event: dict) -> None:
        if "start" in event:
            progress(phase, event["start"])
        elif "case" in event:  # the status line follows the test cases: [id, k, n]
            exercise_id, k, n = event["case"]
            progress(phase, f"{exercise_id} (test case {k} of {n})")

    return on_event


def run_checks(order: list[str], cells: list[dict], mode: str, timeout: float,
               seed: int | None, progress: PhaseCallback, phase: str,
               on_result: Callable[[dict], None] | None = None,
               settings: dict[str, str] | None = None) -> dict[str, ExerciseResult]:
    """The exercises' tests in one process (more after a crash or hang), timed as ``phase``;
    results by id. The check stage and the simulator pass both run this; ``settings`` are
    environment variables for the processes of this phase only."""
    job = {"mode": mode, "action": "check", "exercise_ids": order, "cells": cells, "seed": seed}
    progress(phase, order[0])
    show = progress_events(phase, progress)

    def on_event(event: dict) -> None:
        show(event)
        if on_result and "result" in event:
            on_result(event)

    attempts = run_exercises(job, timeout, on_event=on_event, env=settings)
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
