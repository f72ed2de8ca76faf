"""Generate student notebooks from solution notebooks (the single source of truth).

In an exercise cell, the lines between whole-line markers ``### BEGIN SOLUTION``
and ``### END SOLUTION`` are replaced by a stub at the marker's indentation::

    # YOUR CODE HERE (the solution has about N lines)
    raise NotImplementedError("exercise <id>")

Markers outside exercise cells, nested or unclosed markers, and exercise cells
without a marker are errors. Outputs and execution counts are cleared.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from grader.notebook import cell_marker

BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


class MarkerError(ValueError):
    """Solution markers are malformed; the message names the cell and line."""


def stub_source(source: str, exercise_id: str, where: str) -> str:
    """Replace each marked region of ``source`` by a stub that raises NotImplementedError."""
    out: list[str] = []
    region: list[str] | None = None
    indent = ""
    regions = 0
    for lineno, line in enumerate(source.splitlines(), 1):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if region is not None:
                raise MarkerError(f"{where}, line {lineno}: BEGIN SOLUTION inside another region")
            region, indent = [], begin.group("indent")
        elif end:
            if region is None:
                raise MarkerError(f"{where}, line {lineno}: END SOLUTION without BEGIN")
            n = sum(1 for r in region if r.strip() and not r.strip().startswith("#"))
            out.append(f"{indent}# YOUR CODE HERE (the solution has about {n} lines)")
            out.append(f'{indent}raise NotImplementedError("exercise {exercise_id}")')
            region, regions = None, regions + 1
        elif region is not None:
            region.append(line)
        else:
            out.append(line)
    if region is not None:
        raise MarkerError(f"{where}: BEGIN SOLUTION is never closed")
    if regions == 0:
        raise MarkerError(f"{where}: exercise cell has no ### BEGIN SOLUTION region")
    return "\n".join(out)


def clear_outputs(nb) -> None:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None


def student_notebook(solution, name: str = "notebook"):
    """Return the student version of a solution notebook (the input is not modified)."""
    nb = copy.deepcopy(solution)
    for index, cell in enumerate(nb.cells):
        meta = cell_marker(cell)
        has_marker = any(BEGIN.match(ln) or END.match(ln) for ln in cell.source.splitlines())
        where = f"{name}, cell {index}"
        if meta and meta["role"] == "exercise" and cell.cell_type == "code":
            cell.source = stub_source(cell.source, meta["exercise_id"], where)
        elif has_marker:
            raise MarkerError(f"{where}: solution markers outside an exercise cell")
    clear_outputs(nb)
    return nb


def release_tree(solutions: Path, lessons: Path) -> list[Path]:
    """Write ``lessons/<lesson>/<name>.ipynb`` for each ``solutions/<lesson>/<name>.ipynb``."""
    written = []
    for src in sorted(solutions.glob("*/*.ipynb")):
        nb = nbformat.read(src, as_version=4)
        dst = lessons / src.relative_to(solutions)
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_notebook(nb, str(src)), dst)
        written.append(dst)
    return written
