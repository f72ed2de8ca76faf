"""The stages of grading a notebook (:mod:`grader.grade`), one module each:

* :mod:`grader.stages.check`    -- the exercises' tests in the chosen mode;
* :mod:`grader.stages.sanitize` -- one of NVIDIA's compute-sanitizer tools on the small cases;
* :mod:`grader.stages.simulate` -- the simulator's cases with the workbook's sanitizer;
* :mod:`grader.stages.profile`  -- one ncu run for the metric rules.

Each stage module has one entry point, ``run(notebooks, ...)``: it takes one or more
notebooks, each as (its exercise ids in notebook order, its program cells, the folder of its
kernel cache: :data:`grader.job_units.Notebook`), and the options it needs, and returns an
outcome per notebook, by exercise id. One process (one tool run, one ncu run) works through
the notebooks in turn: a batch task's notebooks share them, but for the check's, which the
pipeline gives one notebook each (:func:`grader.grade.side_by_side`). A stage whose outcome
amends the check's result also has ``apply(result, ...)``, beside its ``run``. The stages do
not import each other: what more than one of them needs is here.
"""

from __future__ import annotations

from collections.abc import Callable

from grader import exercises as catalogue
from grader.job_units import Notebook, job_exercises, per_notebook, split_unit
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


def run_checks(notebooks: list[Notebook], mode: str, timeout: float, seed: int | None,
               progress: PhaseCallback, phase: str,
               on_result: Callable[[dict], None] | None = None,
               settings: dict[str, str] | None = None) -> list[dict[str, ExerciseResult]]:
    """The exercises' tests in one process (more after a crash or hang), timed as ``phase``;
    results by id, for each notebook. The check stage and the simulator pass both run this;
    ``settings`` are environment variables for the processes of this phase only."""
    job = {"mode": mode, "action": "check", "seed": seed, **job_exercises(notebooks)}
    if not job["exercise_ids"]:
        return [{} for _ in notebooks]
    progress(phase, split_unit(job["exercise_ids"][0])[1])
    show = progress_events(phase, progress)

    def on_event(event: dict) -> None:
        show(event)
        if on_result and "result" in event:
            on_result(event)

    attempts = run_exercises(job, timeout, on_event=on_event, env=settings)
    progress(phase, None)
    results: dict[str, ExerciseResult] = {}  # by the name in the job
    for attempt in attempts:
        for event in attempt.events:
            if "result" in event:
                result = ExerciseResult.from_dict(event["result"])
                results[event.get("unit", result.id)] = result
        if attempt.timed_out:
            exercise = catalogue.get(split_unit(attempt.timed_out)[1])
            results[attempt.timed_out] = placeholder(
                exercise, TIMEOUT, f"did not finish within {timeout:g} s (--timeout): {HANG_HINT}",
                mode)
        elif attempt.crashed and attempt.crashed not in results:
            exercise = catalogue.get(split_unit(attempt.crashed)[1])
            results[attempt.crashed] = placeholder(
                exercise, ERROR, f"the grading process crashed ({attempt.how_it_ended()}); "
                f"last output:\n{attempt.tail()}", mode)
    for name, seconds in exercise_seconds(attempts).items():
        if name in results:
            results[name].add_time(phase, seconds)
    return per_notebook(results, len(notebooks))
