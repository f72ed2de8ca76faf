"""Render grading results: a rich table, the JSON report, Gradescope's results.json.

Every text that comes from a notebook or a check (ids, messages, paths) is printed verbatim:
as :class:`rich.text.Text`, never parsed as rich markup, where ``input[t]`` or ``[seed 1]``
would be taken for a style tag and vanish.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.grade import SIM_METRICS, NotebookReport
from grader.results import plural

JSON_SCHEMA_VERSION = 1
RERUN = "grader check NOTEBOOK "  # in a failed case's rerun hint: the table names the notebook
STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "red",
         "not implemented": "yellow"}


def render_table(reports: list[NotebookReport], console: Console) -> None:
    """One table per notebook, its warnings and notes, and a grand total over several."""
    for report in reports:
        table = Table(title=Text(f"{report.path}  [{report.mode} mode]"), title_justify="left",
                      show_lines=True)
        table.add_column("exercise", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("points", justify="right", no_wrap=True)
        table.add_column("message", overflow="fold")
        for ex in report.exercises:
            message = "\n".join(ex.messages).replace(RERUN, f"grader check {report.path} ")
            table.add_row(Text(ex.id), Text(ex.status, style=STYLE.get(ex.status, "")),
                          Text(f"{ex.score:g}/{ex.max_score:g}"), Text(message))
        table.add_row(Text("total", style="bold"), "",
                      Text(f"{report.score:g}/{report.max_score:g}", style="bold"), "")
        console.print(table)
        for warning in report.warnings:
            console.print(Text.assemble(("warning:", "yellow"), " ", warning))
    note = metrics_note(reports)
    if note:
        console.print(Text.assemble(("note:", "cyan"), " ", note))
    if len(reports) > 1:
        console.print(Text(grand_total(reports), style="bold"))


def metrics_note(reports: list[NotebookReport]) -> str | None:
    """The metric rules the simulator cannot assess, said once for the run."""
    exercises = [ex for report in reports for ex in report.exercises
                 if any(rule.get("reason") == SIM_METRICS
                        for rule in ex.metrics.get("rules", ()))]
    if not exercises:
        return None
    rules = sum(len(ex.metrics["rules"]) for ex in exercises)
    lessons = " ".join(sorted({report.lesson for report in reports}))
    return (f"{plural(rules, 'metric rule')} of {plural(len(exercises), 'exercise')} not "
            f"assessed: {SIM_METRICS} (grader list {lessons} shows the rules; "
            f"grader check --mode gpu applies them)")


def grand_total(reports: list[NotebookReport]) -> str:
    """Points and passed exercises over every notebook of the run."""
    exercises = [ex for r in reports for ex in r.exercises]
    score, max_score = sum(r.score for r in reports), sum(r.max_score for r in reports)
    passed = sum(ex.passed for ex in exercises)
    return (f"all {len(reports)} notebooks: {score:g}/{max_score:g} points, {passed} of "
            f"{plural(len(exercises), 'exercise')} passed")


def exercise_table(lesson: str, exercises) -> Table:
    """A lesson's exercises as the catalogue declares them (``grader list``)."""
    table = Table(title=Text(f"lesson {lesson}: {sum(e.points for e in exercises):g} points"),
                  title_justify="left", show_lines=True)
    table.add_column("exercise", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("metric rules (gpu mode)", overflow="fold")
    for ex in exercises:
        rules = "\n".join(rule.describe() for rule in ex.metric_rules) or "none"
        table.add_row(Text(ex.id), Text(f"{ex.points:g}"), Text(ex.title), Text(rules))
    return table


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
