"""Build namespaces from the lesson solution notebooks, optionally with planted bugs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from grader.notebook import load
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


def namespace_with_variant(lesson: str, exercise_id: str, variant: tuple) -> dict:
    """:func:`namespace_with` for a metric rules' slow variant ``(description, old, new)``,
    applied as ``benchmarks/metric_rules.py`` applies it on a GPU: with no ``old`` text,
    ``new`` replaces the whole exercise cell."""
    _, old, new = variant
    return namespace_with(lesson, exercise_id, old or exercise_cell(lesson, exercise_id), new)


def bug_id(case) -> str:
    """A short pytest id for a ``(exercise, bug description, ...)`` test case."""
    values = case.values if hasattr(case, "values") else case
    return f"{values[0]}-{values[1].split(' (')[0].replace(' ', '_')}"
