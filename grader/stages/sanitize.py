"""The sanitize stage (gpu mode): one of NVIDIA's compute-sanitizer tools (``memcheck``,
``racecheck``, ``synccheck``) on the exercises' small cases.

One tool run covers the notebook's exercises in one process (more after a crash or hang);
the tool's report is split by exercise (:mod:`grader.sanitizer` finds the tool, builds its
command line and reads its report). :func:`apply` adds every tool's findings to a checked
exercise: a tool's error fails it; without compute-sanitizer it gets a note instead.
"""

from __future__ import annotations

from grader.results import ExerciseResult
from grader.sanitizer import MISSING, Finding, apply_findings, sanitize_notebook
from grader.stages import PhaseCallback, progress_events

ToolRun = tuple[Finding, float]  # what one tool found in one exercise, and the seconds it took


def run(order: list[str], cells: list[dict], timeout: float, seed: int | None,
        progress: PhaseCallback, tool_path: str, tool: str) -> dict[str, ToolRun]:
    """The small cases of ``order``'s exercises under ``tool``; its finding and time by id."""
    progress(tool, order[0])
    seconds: dict[str, float] = {}
    try:
        findings = sanitize_notebook(tool_path, tool, order, cells, timeout, seed, seconds,
                                     on_event=progress_events(tool, progress))
    finally:
        progress(tool, None)
    return {exercise_id: (finding, seconds.get(exercise_id, 0.0))
            for exercise_id, finding in findings.items()}


def apply(result: ExerciseResult, tool_path: str | None, runs: dict[str, ToolRun]) -> None:
    """Add the tools' runs (by tool, in the order they were chosen) to a checked exercise:
    each tool's time, then the findings; a note when compute-sanitizer was not found."""
    if tool_path is None:
        result.messages.append(MISSING)
    for tool, (_, seconds) in runs.items():
        result.add_time(tool, seconds)
    apply_findings(result, [finding for finding, _ in runs.values()])
