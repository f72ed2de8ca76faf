"""The catalogue of graded exercises, one package per lesson, and its variants corpus."""

from __future__ import annotations

from pathlib import Path

from grader.exercise import Exercise
from grader.exercises import ccl, layernorm, ldmatrix, reduction, softmax
from grader.exercises.corpus import buggy_variants, correct_variants, slow_variant

LESSONS: dict[str, tuple[Exercise, ...]] = {
    reduction.LESSON: reduction.EXERCISES,
    ldmatrix.LESSON: ldmatrix.EXERCISES,
    ccl.LESSON: ccl.EXERCISES,
    softmax.LESSON: softmax.EXERCISES,
    layernorm.LESSON: layernorm.EXERCISES,
}
_BY_ID = {ex.id: ex for exercises in LESSONS.values() for ex in exercises}


class UnknownExercise(KeyError):
    """An exercise id that no lesson declares."""


def get(exercise_id: str) -> Exercise:
    """Look an exercise up by id, e.g. ``"reduction.simple"``."""
    try:
        return _BY_ID[exercise_id]
    except KeyError:
        known = ", ".join(sorted(_BY_ID))
        raise UnknownExercise(f"unknown exercise {exercise_id!r}; known: {known}") from None


__all__ = ["LESSONS", "UnknownExercise", "all_ids", "buggy_variants", "correct_variants", "get",
           "slow_variant", "solution_notebook"]


def all_ids() -> list[str]:
    return list(_BY_ID)


SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def solution_notebook(lesson: str) -> Path | None:
    """The reference solution notebook of ``lesson``, where the repository provides it."""
    found = sorted((SOLUTIONS / lesson).glob("*.ipynb"))
    return found[0] if found else None
