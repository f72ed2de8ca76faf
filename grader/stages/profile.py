"""The profile stage (gpu mode): one ncu run for the metric rules of the exercises that passed.

It runs after the notebook's other stages. One process profiles the student's kernels and
the reference solution's side by side (:mod:`grader.profiling` runs ncu, splits its report
and evaluates the rules); a batch task profiles its two or three notebooks of a lesson in
one such process, each notebook's program beside the others. :func:`apply` records an
exercise's metric section, where a failed rule costs part of its points.
"""

from __future__ import annotations

from grader import exercises as catalogue
from grader.job_units import Notebook
from grader.profiling import apply_metrics, profile_notebooks
from grader.results import ExerciseResult
from grader.stages import PhaseCallback, progress_events

PHASE = "profile"

Profiled = tuple[dict, float]  # an exercise's metric section, and the seconds it took


def run(notebooks: list[Notebook], timeout: float,
        progress: PhaseCallback) -> list[dict[str, Profiled]]:
    """One ncu run per lesson for the metric rules of one or more notebooks' exercises
    (each notebook: the exercises to profile, in notebook order, its cells, and the folder
    of its kernel cache, or None for the one the environment names); for each notebook,
    each exercise's metric section and profiling time by id."""
    chosen = [[ex for ex in map(catalogue.get, order) if ex.metric_rules]
              for order, _, _ in notebooks]
    outcome: list[dict[str, Profiled]] = [{} for _ in notebooks]
    lessons = dict.fromkeys(exs[0].lesson for exs in chosen if exs)
    for lesson in lessons:
        mine = [j for j, exs in enumerate(chosen) if exs and exs[0].lesson == lesson]
        progress(PHASE, chosen[mine[0]][0].id)
        seconds: list[dict[str, float]] = [{} for _ in mine]
        sections = profile_notebooks([(chosen[j], notebooks[j][1], notebooks[j][2])
                                      for j in mine], timeout, seconds,
                                     on_event=progress_events(PHASE, progress))
        progress(PHASE, None)
        for k, j in enumerate(mine):
            outcome[j] = {ex.id: (sections[k][ex.id], seconds[k].get(ex.id, 0.0))
                          for ex in chosen[j]}
    return outcome


def apply(result: ExerciseResult, profiled: Profiled) -> None:
    """Record an exercise's profiling time and metric section; a failed rule costs points."""
    section, seconds = profiled
    result.add_time(PHASE, seconds)
    apply_metrics(result, catalogue.get(result.id), section)
