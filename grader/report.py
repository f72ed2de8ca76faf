"""Render grading results: a rich table, the JSON report, Gradescope's results.json."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from grader.grade import NotebookReport

JSON_SCHEMA_VERSION = 1
STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "red",
         "not implemented": "yellow"}


def render_table(reports: list[NotebookReport], console: Console) -> None:
    for report in reports:
        table = Table(title=f"{report.path}  [{report.mode} mode]", title_justify="left",
                      show_lines=True)
        table.add_column("exercise", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("points", justify="right", no_wrap=True)
        table.add_column("message", overflow="fold")
        for ex in report.exercises:
            style = STYLE.get(ex.status, "")
            table.add_row(ex.id, f"[{style}]{ex.status}[/]", f"{ex.score:g}/{ex.max_score:g}",
                          "\n".join(ex.messages))
        table.add_row("[b]total[/]", "", f"[b]{report.score:g}/{report.max_score:g}[/]", "")
        console.print(table)
        for warning in report.warnings:
            console.print(f"[yellow]warning:[/] {warning}")


def json_report(reports: list[NotebookReport]) -> dict:
    """The documented machine-readable report (README, "Grader JSON report")."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "passed": all(r.passed for r in reports),
        "score": sum(r.score for r in reports),
        "max_score": sum(r.max_score for r in reports),
        "notebooks": [r.to_dict() for r in reports],
    }


def gradescope_report(reports: list[NotebookReport]) -> dict:
    """Gradescope autograder ``results.json`` (one test per exercise)."""
    tests = []
    for report in reports:
        for ex in report.exercises:
            tests.append({
                "name": f"{ex.id}: {ex.title}",
                "score": ex.score,
                "max_score": ex.max_score,
                "status": "passed" if ex.passed else "failed",
                "output": "\n".join(ex.messages),
                "visibility": "visible",
            })
    return {"score": sum(t["score"] for t in tests), "tests": tests,
            "output": f"graded in {reports[0].mode if reports else '?'} mode"}


def write_json(data: dict, path: Path) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")
