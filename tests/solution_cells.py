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
