"""Grading is one pipeline a reader can follow: grader.grade runs four stage modules
(grader/stages/), each with one entry point ``run`` and, where its outcome amends the check's
result, an ``apply`` beside it; the stages do not import each other, and the batch layer does
not import the command line (which imports it). Every import counts, those inside functions
too (:func:`test_import_layers.imported_modules`)."""

import ast

import pytest
from test_import_layers import ROOT, imported_modules, module_name

GRADER = ROOT / "grader"
MODULES = {module_name(path): path for path in GRADER.rglob("*.py")}
STAGES = ("check", "sanitize", "simulate", "profile")  # grader/stages/<stage>.py
STAGE_MODULES = {f"grader.stages.{stage}" for stage in STAGES}
# the public functions of each stage module: ``run``, and ``apply`` where the stage's outcome
# amends the check's result (the check's outcome is that result)
PUBLIC = {"check": {"run"}, "sanitize": {"run", "apply"}, "simulate": {"run", "apply"},
          "profile": {"run", "apply"}}


def grader_imports(module: str) -> set[str]:
    """The grader modules that ``module`` imports directly."""
    return {name for name in imported_modules(MODULES[module]) if name in MODULES} - {module}


def reachable(module: str) -> set[str]:
    """The grader modules that importing ``module`` may import, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(grader_imports(current) - seen)
    return seen - {module}


def test_the_batch_layer_does_not_import_the_command_line():
    """grader.cli may import grader.batch; nothing grader.batch imports, directly or through
    other modules, may lead to grader.cli."""
    assert "grader.cli" not in reachable("grader.batch")


def test_reachable_follows_imports_through_other_modules():
    assert "grader.session" in reachable("grader.grade")  # through grader.stages
    assert "grader.session" not in grader_imports("grader.grade")


def public_functions(stage: str) -> set[str]:
    tree = ast.parse((GRADER / "stages" / f"{stage}.py").read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and not node.name.startswith("_")}


def stage_calls_in_grade() -> set[tuple[str, str]]:
    """(stage, function) for each ``stage.function`` that grader/grade.py refers to."""
    tree = ast.parse((GRADER / "grade.py").read_text())
    return {(node.value.id, node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in STAGES}


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_has_one_entry_point_that_the_pipeline_uses(stage):
    assert public_functions(stage) == PUBLIC[stage]
    assert f"grader.stages.{stage}" in imported_modules(GRADER / "grade.py")
    used = {function for name, function in stage_calls_in_grade() if name == stage}
    assert used == PUBLIC[stage], f"grader.grade uses {used} of grader.stages.{stage}"


@pytest.mark.parametrize("stage", STAGES)
def test_the_stages_do_not_import_each_other_or_the_pipeline(stage):
    imported = grader_imports(f"grader.stages.{stage}")
    assert not imported & (STAGE_MODULES | {"grader.grade"}), imported


def test_only_the_pipeline_runs_the_stages():
    """The shared part of the package imports no stage, and no grader module but grader.grade
    imports one."""
    users = {module for module in MODULES if grader_imports(module) & STAGE_MODULES}
    assert users == {"grader.grade"}
