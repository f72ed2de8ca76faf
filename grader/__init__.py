"""Scoring for the Numba-CUDA Workbook: the ``grader`` CLI and the notebooks' self-check.

In a lesson notebook, ``check("reduction.simple")`` runs the same tests the
grader runs, on the objects defined in the notebook, and shows the result.
"""

from __future__ import annotations

import sys


def check(exercise_id: str, namespace: dict | None = None, seed: int | None = None):
    """Check one exercise against the names defined in the calling notebook.

    Returns an :class:`~grader.results.ExerciseResult`, which Jupyter displays.
    """
    from grader.exercise import check_exercise
    from grader.exercises import get
    from workbook import current_mode

    if namespace is None:
        namespace = sys._getframe(1).f_globals
    return check_exercise(get(exercise_id), namespace, current_mode(), seed=seed)


__all__ = ["check"]
