"""Generate student notebooks from solution notebooks (the single source of truth).

In an exercise cell, the lines between whole-line markers ``### BEGIN SOLUTION``
and ``### END SOLUTION`` are replaced by a stub at the marker's indentation::

    # YOUR CODE HERE (the solution has about N lines)
    raise NotImplementedError("exercise <id>")

CUDA C that an exercise cell holds in a Python string is marked the C way, with
whole lines ``// BEGIN SOLUTION`` and ``// END SOLUTION``; the region becomes::

    // YOUR CODE HERE (the solution has about N lines)
    return -1;  // not implemented yet

(numba's foreign functions return 0 on success, so the stub reports an error).

Markers outside exercise cells, nested or unclosed markers, and exercise cells
without a marker are errors. Outputs and execution counts are cleared.

Other files of a lesson folder (``solutions/<lesson>/*.cu`` ...) are copied; in
C/C++ sources (``.cu``, ``.cuh``, ``.c``, ``.h``) the ``// BEGIN SOLUTION`` regions
are replaced the same way.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

from grader.notebook import cell_marker

BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
C_BEGIN = re.compile(r"^(?P<indent>\s*)// BEGIN SOLUTION\s*$")
C_END = re.compile(r"^\s*// END SOLUTION\s*$")
C_STUB = "return -1;  // not implemented yet"
C_SUFFIXES = (".cu", ".cuh", ".c", ".h")


class MarkerError(ValueError):
    """Solution markers are malformed; the message names the cell and line."""


def _stub_lines(kind: str, indent: str, n: int, exercise_id: str) -> list[str]:
    size = f"about {n} line{'' if n == 1 else 's'}"
    if kind == "c":
        return [f"{indent}// YOUR CODE HERE (the solution has {size})", f"{indent}{C_STUB}"]
    return [f"{indent}# YOUR CODE HERE (the solution has {size})",
            f'{indent}raise NotImplementedError("exercise {exercise_id}")']


def _marker(line: str) -> tuple[str, str, str] | None:
    """(begin/end, python/c, indent) if ``line`` is a solution marker."""
    for kind, begin, end in (("python", BEGIN, END), ("c", C_BEGIN, C_END)):
        match = begin.match(line)
        if match:
            return "begin", kind, match.group("indent")
        if end.match(line):
            return "end", kind, ""
    return None


def stub_source(source: str, exercise_id: str, where: str, kinds=("python", "c")) -> str:
    """Replace each marked region of ``source`` by a stub (NotImplementedError in Python,
    ``return -1;`` in CUDA C)."""
    out: list[str] = []
    region: list[str] | None = None
    kind = indent = ""
    regions = 0
    for lineno, line in enumerate(source.splitlines(), 1):
        marker = _marker(line)
        if marker and marker[1] not in kinds:
            marker = None
        if marker and marker[0] == "begin":
            if region is not None:
                raise MarkerError(f"{where}, line {lineno}: BEGIN SOLUTION inside another region")
            region, kind, indent = [], marker[1], marker[2]
        elif marker:
            if region is None:
                raise MarkerError(f"{where}, line {lineno}: END SOLUTION without BEGIN")
            if marker[1] != kind:
                raise MarkerError(f"{where}, line {lineno}: END SOLUTION of another kind "
                                  "(### markers in Python, // markers in CUDA C)")
            comment = "//" if kind == "c" else "#"
            n = sum(1 for r in region if r.strip() and not r.strip().startswith(comment))
            out.extend(_stub_lines(kind, indent, n, exercise_id))
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
        has_marker = any(_marker(ln) for ln in cell.source.splitlines())
        where = f"{name}, cell {index}"
        if meta and meta["role"] == "exercise" and cell.cell_type == "code":
            cell.source = stub_source(cell.source, meta["exercise_id"], where)
        elif has_marker:
            raise MarkerError(f"{where}: solution markers outside an exercise cell")
    clear_outputs(nb)
    return nb


def student_file(text: str, name: str) -> str:
    """A lesson's C/C++ source with its ``// BEGIN SOLUTION`` regions stubbed."""
    if not any(C_BEGIN.match(ln) or C_END.match(ln) for ln in text.splitlines()):
        return text
    stubbed = stub_source(text, name, name, kinds=("c",))
    return stubbed + ("\n" if text.endswith("\n") else "")


def release_tree(solutions: Path, lessons: Path) -> list[Path]:
    """Write ``lessons/<lesson>/<name>.ipynb`` for each ``solutions/<lesson>/<name>.ipynb``,
    and copy the lesson folders' other files (C sources with their solutions stubbed)."""
    import nbformat  # here: the exercise catalogue imports this module for C_STUB

    written = []
    for src in sorted(solutions.glob("*/*.ipynb")):
        nb = nbformat.read(src, as_version=4)
        dst = lessons / src.relative_to(solutions)
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_notebook(nb, str(src)), dst)
        written.append(dst)
    for src in sorted(solutions.glob("*/*")):
        if not src.is_file() or src.suffix == ".ipynb" or src.name.startswith("."):
            continue
        dst = lessons / src.relative_to(solutions)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix in C_SUFFIXES:
            dst.write_text(student_file(src.read_text(), str(src)))
        else:
            dst.write_bytes(src.read_bytes())
        written.append(dst)
    return written
