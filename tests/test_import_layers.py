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
             "grader.check_worker", "grader.stages", "grader.stages.check",
             "grader.stages.sanitize", "grader.stages.simulate", "grader.stages.profile"}


def module_name(path: Path) -> str:
    """``grader.stages`` for grader/stages/__init__.py, ``grader.grade`` for grader/grade.py."""
    parts = path.resolve().relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, name: str | None = None) -> set[str]:
    """Every module ``path`` imports (and ``module.x`` for ``from module import x``), at the
    top or inside functions; relative imports are resolved against the module's ``name``
    (by default its place in the repository)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:
                package = (name or module_name(path)).split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                base = ".".join(package[:len(package) - node.level + 1])
                module = f"{base}.{module}" if module else base
            if module:
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from grader.sanitizer import MAX_SIZE\n")
    assert "grader.sanitizer" in imported_modules(module)


def test_the_check_resolves_relative_imports(tmp_path):
    module = tmp_path / "check.py"
    module.write_text("from . import simulate\nfrom .profile import run\n"
                      "def f():\n    from .. import grade\n")
    assert {"grader.stages.simulate", "grader.stages.profile", "grader.grade"} <= (
        imported_modules(module, "grader.stages.check"))


@pytest.mark.parametrize("path", DECLARATIONS,
                         ids=lambda p: str(p.relative_to(ROOT / "grader" / "exercises")))
def test_declarations_do_not_import_the_machinery_that_runs_them(path):
    assert not imported_modules(path) & MACHINERY, imported_modules(path) & MACHINERY
