"""The sanitize stage (gpu mode): one of NVIDIA's compute-sanitizer tools (``memcheck``,
``racecheck``, ``synccheck``) on the exercises' small cases.

One tool run covers the exercises of one notebook, or of a batch task's notebooks in turn, in
one process (more after a crash or hang); the tool's report is split by exercise
(:mod:`grader.sanitizer` finds the tool, builds its command line and reads its report).
:func:`apply` adds every tool's findings to a checked exercise: a tool's error fails it;
without compute-sanitizer it gets a note instead.
"""

from __future__ import annotations

from grader.job_units import Notebook
from grader.results import ExerciseResult
from grader.sanitizer import MISSING, Finding, apply_findings, sanitize_notebooks
from grader.stages import PhaseCallback, progress_events

ToolRun = tuple[Finding, float]  # what one tool found in one exercise, and the seconds it took


def run(notebooks: list[Notebook], timeout: float, seed: int | None, progress: PhaseCallback,
        tool_path: str, tool: str) -> list[dict[str, ToolRun]]:
    """The small cases of the notebooks' exercises under ``tool``, in one tool run; for each
    notebook, the finding and time of each exercise by id."""
    first = next((order[0] for order, _, _ in notebooks if order), None)
    if first is None:
        return [{} for _ in notebooks]
    progress(tool, first)
    seconds: list[dict[str, float]] = [{} for _ in notebooks]
    try:
        findings = sanitize_notebooks(tool_path, tool, notebooks, timeout, seed, seconds,
                                      on_event=progress_events(tool, progress))
    finally:
        progress(tool, None)
    return [{exercise_id: (finding, times.get(exercise_id, 0.0))
             for exercise_id, finding in found.items()}
            for found, times in zip(findings, seconds)]


def apply(result: ExerciseResult, tool_path: str | None, runs: dict[str, ToolRun]) -> None:
    """Add the tools' runs (by tool, in the order they were chosen) to a checked exercise:
    each tool's time, then the findings; a note when compute-sanitizer was not found."""
    if tool_path is None:
        result.messages.append(MISSING)
    for tool, (_, seconds) in runs.items():
        result.add_time(tool, seconds)
    apply_findings(result, [finding for finding, _ in runs.values()])
