"""Build namespaces from the lesson solution notebooks, optionally with planted bugs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from grader.notebook import load
from grader.results import FAILED
from grader.runner import exec_cell

ROOT = Path(__file__).resolve().parents[1]


def solution_notebook(lesson: str):
    return load(next((ROOT / "solutions" / lesson).glob("*.ipynb")))


def namespace_with(lesson: str, exercise_id: str, old: str = "", new: str = "") -> dict:
    """Execute the solution's cells up to ``exercise_id``, replacing ``old`` by ``new``
    in that exercise's cell (the replacement must apply exactly once)."""
    notebook = solution_notebook(lesson)
    namespace: dict = {"__name__": "__main__"}
    for cell in notebook.program_for(exercise_id):
        if cell.exercise_id == exercise_id and old:
            count = cell.source.count(old)
            assert count == 1, f"mutation {old!r} matches {count} times in {exercise_id}"
            cell = replace(cell, source=cell.source.replace(old, new))
        exec_cell({"index": cell.index, "source": cell.source}, namespace)
    return namespace


def exercise_cell(lesson: str, exercise_id: str) -> str:
    """The source of the exercise cell of ``exercise_id`` in the solution notebook."""
    return next(c.source for c in solution_notebook(lesson).cells
                if c.role == "exercise" and c.exercise_id == exercise_id)


def namespace_with_variant(lesson: str, variant) -> dict:
    """:func:`namespace_with` for a variant of the corpus (:mod:`grader.exercises.corpus`),
    written into the exercise cell as ``benchmarks/metric_rules.py`` writes it on a GPU."""
    cell = exercise_cell(lesson, variant.exercise_id)
    return namespace_with(lesson, variant.exercise_id, cell, variant.apply(cell))


def buggy_params(exercises) -> list:
    """Every buggy variant of ``exercises`` as a pytest parameter (``sim_only`` ones marked)."""
    import pytest

    from grader.exercises import buggy_variants

    return [pytest.param(v, id=v.short_id, marks=[pytest.mark.sim_only] if v.sim_only else [])
            for ex in exercises for v in buggy_variants(ex.id)]


def assert_variant_rejected(result, variant, mode: str) -> None:
    """``result`` rejects the buggy ``variant`` with the status and diagnosis it expects."""
    assert_rejected(result, variant.description, variant.expected(mode), mode)


# How the grader rates a student's bug, by the way it shows. A wrong result is FAILED. In the
# simulator a kernel is stopped where its bug shows: by the sanitizer (a race, a barrier not
# every thread reaches, a read of uninitialised shared memory), at an index out of bounds, at a
# warp collective some named lanes never reach, at an overflow of math.exp. Such a stop is
# rated STOPPED_BY_THE_BUG: FAILED, as a bug in the student's code (ERROR is for faults of the
# grader or the machine).
STOPPED_BY_THE_BUG = FAILED
BUG_STATUSES = {
    "wrong result": FAILED,
    "rejected code": FAILED,  # code the grader rejects before running it (does not compile...)
    **dict.fromkeys(("race", "barrier", "uninitialised", "out of bounds", "warp", "overflow"),
                    STOPPED_BY_THE_BUG),
}


def expected_rejections(expect, mode: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (status, message phrases) pairs a rejected buggy variant may show: its status must
    be the pair's and its message must hold one of the pair's phrases.

    ``expect`` is ``(kind, words)``, where ``kind`` is a key of :data:`BUG_STATUSES` and
    ``words`` a phrase or a tuple of alternatives; a list of such pairs (either outcome, where
    the test's random inputs decide); or a dict of either by mode."""
    if isinstance(expect, dict):
        expect = expect[mode]
    pairs = []
    for kind, words in expect if isinstance(expect, list) else [expect]:
        alternatives = (words,) if isinstance(words, str) else tuple(words)
        assert alternatives and all(w.strip() for w in alternatives), \
            f"a buggy variant must name the diagnosis it expects, not {words!r}"
        pairs.append((BUG_STATUSES[kind], alternatives))
    return pairs


def assert_rejected(result, bug: str, expect, mode: str) -> None:
    """``result`` rejects the buggy variant ``bug`` with the status and diagnosis expected."""
    summary = result.summary()
    assert not result.passed, f"{bug} was not caught: {summary}"
    pairs = expected_rejections(expect, mode)
    assert any(result.status == status and any(w in summary for w in words)
               for status, words in pairs), \
        f"{bug}: expected {' or '.join(f'{s} with one of {w}' for s, w in pairs)}\n{summary}"
