"""The layers import downwards only: the exercise declarations (grader/exercises/) never
import the machinery that runs them (runner, session, sanitizer, grading, CLI, batch), which
imports the declarations; every import counts, those inside functions too."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DECLARATIONS = sorted((ROOT / "grader" / "exercises").rglob("*.py"))
MACHINERY = {"grader.runner", "grader.session", "grader.sanitizer", "grader.grade",
             "grader.cli", "grader.batch", "grader.profiling", "grader.contained",
             "grader.check_worker"}


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from grader.sanitizer import MAX_SIZE\n")
    assert "grader.sanitizer" in imported_modules(module)


@pytest.mark.parametrize("path", DECLARATIONS,
                         ids=lambda p: str(p.relative_to(ROOT / "grader" / "exercises")))
def test_declarations_do_not_import_the_machinery_that_runs_them(path):
    assert not imported_modules(path) & MACHINERY, imported_modules(path) & MACHINERY
