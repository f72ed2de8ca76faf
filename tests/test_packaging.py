"""Install files agree with each other: pyproject, environment.yml, README, .ci/run."""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# PyPI extras whose conda-forge counterparts are separate packages
CONDA_EQUIVALENTS = {"numba-cuda[cu13]": {"numba-cuda", "cuda-version", "cuda-nvvm", "cuda-nvrtc"},
                     "dask[distributed]": {"dask"}}
CONDA_ONLY = {"python", "pip"}
PIP_SECTION_ONLY = {"ncu-report"}  # not on conda-forge: listed under environment.yml's pip:


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", requirement.strip()).groups()
    return name.lower(), spec.replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(_split(r) for r in reqs)


def conda_requirements() -> dict[str, str]:
    deps = {}
    text = (ROOT / "environment.yml").read_text().split("\ndependencies:\n", 1)[1]
    for line in text.splitlines():
        match = re.match(r"^  - ([^#\s][^#]*?)\s*$", line)
        if match and not match.group(1).startswith("pip:"):
            name, spec = _split(match.group(1))
            deps[name] = spec
    return deps


def test_environment_yml_matches_pyproject():
    pip, conda = pyproject_requirements(), conda_requirements()
    expected_conda = set(CONDA_ONLY)
    pip_section = (ROOT / "environment.yml").read_text().split("  - pip:", 1)[1]
    for name, spec in pip.items():
        if name in PIP_SECTION_ONLY:
            assert f"- {name}{spec}" in pip_section, f"{name}{spec} missing from the pip: section"
        elif name in CONDA_EQUIVALENTS:
            expected_conda |= CONDA_EQUIVALENTS[name]
            base = name.split("[")[0]
            assert conda.get(base) == spec, f"{base}: pyproject {spec!r}, conda {conda.get(base)!r}"
        else:
            expected_conda.add(name)
            assert conda.get(name) == spec, f"{name}: pyproject {spec!r}, conda {conda.get(name)!r}"
    assert set(conda) == expected_conda, f"only in one file: {set(conda) ^ expected_conda}"


def test_numpy_is_pinned_below_2_5():
    assert "<2.5" in pyproject_requirements()["numpy"]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_readme_quick_start_is_two_commands_into_a_local_venv():
    commands = quick_start_commands()
    assert len(commands) == 2, commands
    assert all(".venv" in c for c in commands)
    assert "grader check solutions" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quick_start_commands()[1] in ci


def test_grader_console_script_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["grader"] == "grader.cli:app"


@pytest.mark.skipif(shutil.which("ruff") is None and not (ROOT / ".venv/bin/ruff").exists(),
                    reason="ruff is not installed (pip install -e '.[dev]')")
def test_code_is_ruff_clean():
    ruff = shutil.which("ruff") or str(ROOT / ".venv/bin/ruff")
    result = subprocess.run([ruff, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown text (outside code blocks)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_documents_link_to_what_exists():
    """Relative links of the README and docs/ name files that exist, and headings there."""
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(documents) >= 3
    broken = []
    for document in documents:
        text = re.sub(r"```.*?```", "", document.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target} (no such file)")
            elif anchor and anchor not in _anchors(linked.read_text()):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert not broken, broken
