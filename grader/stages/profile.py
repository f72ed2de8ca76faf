"""The profile stage (gpu mode): one ncu run for the metric rules of the exercises that passed.

It runs after the other stages, alone on the GPU, since concurrent work would distort its
timings. One process profiles the student's kernels and the reference solution's side by
side (:mod:`grader.profiling` runs ncu, splits its report and evaluates the rules);
:func:`apply` records an exercise's metric section, where a failed rule costs part of its
points.
"""

from __future__ import annotations

from grader import exercises as catalogue
from grader.profiling import apply_metrics, profile_notebook
from grader.results import ExerciseResult
from grader.stages import PhaseCallback, progress_events

PHASE = "profile"

Profiled = tuple[dict, float]  # an exercise's metric section, and the seconds it took


def run(order: list[str], cells: list[dict], timeout: float,
        progress: PhaseCallback) -> dict[str, Profiled]:
    """One ncu run for the metric rules of ``order``'s exercises (those with rules); each
    one's metric section and profiling time by id."""
    chosen = [exercise for exercise in map(catalogue.get, order) if exercise.metric_rules]
    if not chosen:
        return {}
    progress(PHASE, chosen[0].id)
    seconds: dict[str, float] = {}
    sections = profile_notebook(chosen, cells, timeout, seconds,
                                on_event=progress_events(PHASE, progress))
    progress(PHASE, None)
    return {exercise.id: (sections[exercise.id], seconds.get(exercise.id, 0.0))
            for exercise in chosen}


def apply(result: ExerciseResult, profiled: Profiled) -> None:
    """Record an exercise's profiling time and metric section; a failed rule costs points."""
    section, seconds = profiled
    result.add_time(PHASE, seconds)
    apply_metrics(result, catalogue.get(result.id), section)
