"""Read a lesson notebook (never modifying it) and find its graded cells.

Marking convention (see README, "Authoring lessons"): a code cell carries
``metadata.workbook = {"schema_version": 1, "role": ROLE, "exercise_id": ID}``
where ROLE is

* ``"setup"``    -- imports and constants every exercise needs (run by the grader);
* ``"exercise"`` -- the student's code for exercise ID (run by the grader);
* ``"check"``    -- the self-check the student runs in the notebook (ignored by the grader);
* ``"example"``  -- complete code shown to students, not graded (benchmarks run it).

All other cells (explanations, plots, benchmarks) are never run by the grader.
The notebook's own metadata names the lesson: ``metadata.workbook.lesson``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1
ROLES = ("setup", "exercise", "check", "example")


class NotebookError(ValueError):
    """The notebook cannot be graded; the message says why."""


@dataclass(frozen=True)
class GradedCell:
    index: int
    role: str
    exercise_id: str | None
    source: str


@dataclass(frozen=True)
class LessonNotebook:
    path: Path
    lesson: str
    cells: tuple[GradedCell, ...]

    def exercise_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for cell in self.cells:
            if cell.role == "exercise":
                seen.setdefault(cell.exercise_id, None)
        return list(seen)

    def definitions(self) -> list[GradedCell]:
        """Every setup, exercise and example cell: all the code a benchmark needs."""
        return [c for c in self.cells if c.role in ("setup", "exercise", "example")]

    def program_for(self, exercise_id: str) -> list[GradedCell]:
        """Setup cells and exercise cells up to and including ``exercise_id``'s."""
        order = self.exercise_ids()
        upto = set(order[: order.index(exercise_id) + 1])
        return [c for c in self.cells if c.role == "setup" or
                (c.role == "exercise" and c.exercise_id in upto)]


CELL_KEYS = {"schema_version", "role", "exercise_id"}
EXERCISE_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


def cell_marker(cell) -> dict | None:
    """The cell's ``workbook`` metadata, validated against the schema (version
    :data:`SCHEMA_VERSION`), or None for an ordinary cell."""
    meta = cell.get("metadata", {}).get("workbook")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise NotebookError(f"cell's workbook metadata is {type(meta).__name__}, not a mapping")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise NotebookError(
            f"cell has workbook schema_version {version!r}; this grader reads version "
            f"{SCHEMA_VERSION} (a notebook from another release of the workbook?)")
    unknown = sorted(set(meta) - CELL_KEYS)
    if unknown:
        raise NotebookError(f"cell's workbook metadata has unknown keys {unknown}; "
                            f"expected {sorted(CELL_KEYS)}")
    exercise_id = meta.get("exercise_id")
    if exercise_id is not None and not (isinstance(exercise_id, str)
                                        and EXERCISE_ID.match(exercise_id)):
        raise NotebookError(f"cell has exercise_id {exercise_id!r}; expected LESSON.NAME "
                            "in lower case, e.g. 'reduction.simple'")
    role = meta.get("role")
    if role not in ROLES:
        raise NotebookError(f"cell has workbook role {role!r}; expected one of {ROLES}")
    if role in ("exercise", "check") and not meta.get("exercise_id"):
        raise NotebookError(f"a {role!r} cell needs an exercise_id in its workbook metadata")
    return meta


def load(path: str | Path) -> LessonNotebook:
    """Parse ``path`` and collect its graded cells, with clear errors for bad input."""
    import nbformat  # here: importing it takes a second (jsonschema), a notebook check needs none

    path = Path(path)
    if not path.is_file():
        raise NotebookError(f"{path}: no such notebook")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types
        raise NotebookError(f"{path}: not a readable Jupyter notebook ({exc})") from exc
    lesson = nb.metadata.get("workbook", {}).get("lesson")
    cells = []
    for index, cell in enumerate(nb.cells):
        meta = cell_marker(cell)
        if meta is None or cell.cell_type != "code":
            continue
        cells.append(GradedCell(index, meta["role"], meta.get("exercise_id"), cell.source))
    if not any(c.role == "exercise" for c in cells):
        raise NotebookError(
            f"{path}: no exercise cells found (code cells with metadata "
            "workbook.role == 'exercise'); is this a workbook lesson notebook?"
        )
    if not lesson:
        raise NotebookError(f"{path}: notebook metadata has no workbook.lesson")
    return LessonNotebook(path, lesson, tuple(cells))


def find_notebooks(paths) -> list[Path]:
    """Expand lesson folders into their notebooks (checkpoints skipped)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise NotebookError(f"{p}: no such file or folder")
        if p.is_dir():
            notebooks = p.rglob("*.ipynb")
            found.extend(sorted(q for q in notebooks if ".ipynb_checkpoints" not in q.parts))
        elif p.suffix == ".ipynb" and p.is_file():
            found.append(p)
        else:
            raise NotebookError(f"{p}: not a notebook or a folder of notebooks")
    if not found:
        raise NotebookError(f"no notebooks found in {', '.join(map(str, paths))}")
    return found
