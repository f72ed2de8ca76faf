"""The catalogue of graded exercises, one module per lesson."""

from __future__ import annotations

from pathlib import Path

from grader.exercise import Exercise
from grader.exercises import ccl, layernorm, ldmatrix, reduction, softmax

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


# The module that declares an exercise is the first part of its id ("reduction.shuffle").
_MODULES = {module.__name__.rsplit(".", 1)[1]: module
            for module in (ccl, layernorm, ldmatrix, reduction, softmax)}


def slow_variant(exercise_id: str) -> tuple | None:
    """The exercise's slow-but-correct submission ``(description, old text, new text)``
    (``SLOW_VARIANTS`` beside its declaration), or None."""
    module = _MODULES[exercise_id.split(".")[0]]
    return getattr(module, "SLOW_VARIANTS", {}).get(exercise_id)


def correct_variants(exercise_id: str) -> tuple:
    """The exercise's correct submissions written differently from the reference
    (``CORRECT_VARIANTS`` beside its declaration)."""
    module = _MODULES[exercise_id.split(".")[0]]
    return tuple(getattr(module, "CORRECT_VARIANTS", {}).get(exercise_id, ()))


def all_ids() -> list[str]:
    return list(_BY_ID)


SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def solution_notebook(lesson: str) -> Path | None:
    """The reference solution notebook of ``lesson``, where the repository provides it."""
    found = sorted((SOLUTIONS / lesson).glob("*.ipynb"))
    return found[0] if found else None
