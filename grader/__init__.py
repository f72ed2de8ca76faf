"""Scoring for the Numba-CUDA Workbook: the ``grader`` CLI and the notebooks' self-check.

In a lesson notebook, ``check("reduction.simple")`` runs the same tests the
grader runs, on the objects defined in the notebook, and shows the result.
"""

from __future__ import annotations

import sys


def check(exercise_id: str, namespace: dict | None = None, seed: int | None = None):
    """Check one exercise against the names defined in the calling notebook.

    Returns an :class:`~grader.results.ExerciseResult`, which Jupyter displays. In the
    simulator each test case is bounded (``WORKBOOK_CHECK_TIMEOUT``); on a GPU a check
    still running after that long prints how to get out of a kernel that never ends.
    """
    from grader.exercise import check_exercise, gpu_hang_notice
    from grader.exercises import get
    from workbook import current_mode

    if namespace is None:
        namespace = sys._getframe(1).f_globals
    mode = current_mode()
    with gpu_hang_notice(exercise_id, mode):
        return check_exercise(get(exercise_id), namespace, mode, seed=seed)


def explain_rules(lesson: str) -> None:
    """Print the performance rules the GPU grader applies to a lesson's exercises, and for
    an exercise without any, why it has none."""
    from grader.exercises import LESSONS

    for exercise in LESSONS[lesson]:
        if not exercise.metric_rules and exercise.no_metric_rule:
            print(f"{exercise.id}: no performance rule: {exercise.no_metric_rule}")
        for rule in exercise.metric_rules:
            print(f"{exercise.id}: {rule.describe()}\n    why: {rule.why} "
                  f"(tuned on {rule.tuned_on})")


__all__ = ["check", "explain_rules"]
