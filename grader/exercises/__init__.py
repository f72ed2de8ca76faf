"""The catalogue of graded exercises, one module per lesson."""

from __future__ import annotations

from pathlib import Path

from grader.exercise import Exercise
from grader.exercises import ccl, corpus, layernorm, ldmatrix, reduction, softmax
from grader.exercises.corpus import Variant

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


def _legacy(exercise_id: str, name: str, role: str) -> tuple[Variant, ...]:
    """Variants still kept as (description, old, new) tuples in a module dict."""
    found = getattr(_MODULES[exercise_id.split(".")[0]], name, {}).get(exercise_id)
    if found is None:
        return ()
    entries = (found,) if role == "slow" else found
    return tuple(Variant(exercise_id, role, d, new, old) for d, old, new in entries)


def slow_variant(exercise_id: str) -> Variant | None:
    """The exercise's slow-but-correct submission (see :mod:`grader.exercises.corpus`)."""
    if corpus.variants_file(exercise_id).exists():
        return corpus.slow_variant(exercise_id)
    found = _legacy(exercise_id, "SLOW_VARIANTS", "slow")
    return found[0] if found else None


def correct_variants(exercise_id: str) -> tuple[Variant, ...]:
    """The exercise's correct submissions written differently from the reference."""
    if corpus.variants_file(exercise_id).exists():
        return corpus.correct_variants(exercise_id)
    return _legacy(exercise_id, "CORRECT_VARIANTS", "correct")


def buggy_variants(exercise_id: str) -> tuple[Variant, ...]:
    """The exercise's known-buggy submissions, which its tests must reject."""
    return corpus.buggy_variants(exercise_id)


def all_ids() -> list[str]:
    return list(_BY_ID)


SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def solution_notebook(lesson: str) -> Path | None:
    """The reference solution notebook of ``lesson``, where the repository provides it."""
    found = sorted((SOLUTIONS / lesson).glob("*.ipynb"))
    return found[0] if found else None
