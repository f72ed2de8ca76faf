"""The ``grader`` command line.

Exit codes: 0 every graded exercise passed; 1 some exercise did not pass;
2 bad input (no such notebook, not a lesson notebook, unknown mode, mode unavailable).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from grader import notebook as nbmod
from grader import report as rep
from grader.grade import exercises_in, grade_notebook
from grader.gradescope import gradescope_bundle
from grader.progress import PhaseDisplay

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Grade Numba-CUDA Workbook notebooks and build the student lessons.")
console = Console()
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Mode(StrEnum):
    auto = "auto"
    sim = "sim"
    gpu = "gpu"


@app.command()
def check(
    paths: Annotated[list[Path], typer.Argument(help="Notebooks, or lesson folders.")],
    mode: Annotated[Mode, typer.Option(help="sim (CUDA simulator), gpu, or auto-detect.")] = (
        Mode.auto),
    exercise: Annotated[list[str] | None, typer.Option(
        "--exercise", "-e", help="Grade only this exercise (repeatable), e.g. -e "
        "reduction.shared.")] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics", help="Apply the Nsight Compute metric rules (gpu mode).")]
    = True,
    sanitizers: Annotated[bool, typer.Option(
        "--sanitizers/--no-sanitizers", help="Run compute-sanitizer and the simulator pass "
        "(gpu mode).")] = True,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")]
    = None,
    gradescope: Annotated[Path | None, typer.Option(help="Write Gradescope's results.json.")]
    = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds allowed per exercise.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for the random tests.")] = None,
) -> None:
    """Grade notebooks; print a table; exit 0 only if every exercise passes.

    Examples: grader check lessons/02_reduction --mode sim --json report.json;
    grader check lessons/02_reduction -e reduction.shared --no-metrics --no-sanitizers
    (a quick check of one exercise: what is skipped is reported as not assessed).
    """
    from grader.sanitizer import selected_tools
    from workbook.mode import ModeError, resolve

    only = list(exercise or [])
    try:
        resolved = resolve(mode.value)
        notebooks = [nbmod.load(p) for p in nbmod.find_notebooks(paths)]
        plan = [(nb, exercises_in(nb, only)) for nb in notebooks]
        plan = [(nb, ids) for nb, ids in plan if ids is not None]
        selected_tools()
    except (ModeError, nbmod.NotebookError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None

    reports = []
    for nb, ids in plan:
        phases = PhaseDisplay(console, f"{nb.path} ({resolved} mode)")
        with phases:
            try:
                reports.append(grade_notebook(nb, resolved, timeout, seed, on_result=_progress,
                                              exercises=ids, metrics=metrics,
                                              sanitizers=sanitizers, on_phase=phases.update))
            except nbmod.NotebookError as exc:
                console.print(f"[red]error:[/] {exc}", soft_wrap=True)
                raise typer.Exit(EXIT_USAGE) from None
        console.print(f"  {nb.path}: graded in {reports[-1].seconds:.1f} s")
    rep.render_table(reports, console)
    if json_path:
        rep.write_json(rep.json_report(reports), json_path)
    if gradescope:
        rep.write_json(rep.gradescope_report(reports), gradescope)
    raise typer.Exit(EXIT_OK if all(r.passed for r in reports) else EXIT_FAILED)


def _progress(result) -> None:
    phases = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in result.timings.items())
    console.print(f"  {result.id}: {result.status} ({result.seconds:.1f} s"
                  f"{': ' + phases if len(result.timings) > 1 else ''})")


EXIT_INTERRUPTED = 130


@app.command()
def batch(
    submissions: Annotated[Path, typer.Argument(
        help="Folder of submissions: <student>.ipynb files, or one folder per student "
        "(nbgrader's submitted/, a Gradescope export).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the results.")] = Path(
        "grades"),
    mode: Annotated[Mode, typer.Option(help="sim (CUDA simulator), gpu, or auto-detect.")] = (
        Mode.auto),
    exercise: Annotated[list[str] | None, typer.Option(
        "--exercise", "-e", help="Grade only this exercise (repeatable).")] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics", help="Apply the Nsight Compute metric rules (gpu mode).")]
    = True,
    sanitizers: Annotated[bool, typer.Option(
        "--sanitizers/--no-sanitizers", help="Run compute-sanitizer and the simulator pass "
        "(gpu mode).")] = True,
    timeout: Annotated[float | None, typer.Option(help="Seconds allowed per exercise.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for the random tests.")] = None,
    scheduler: Annotated[str | None, typer.Option(
        help="Address of a running Dask scheduler (tcp://HOST:8786) whose workers grade; "
        "default: a cluster on this machine.")] = None,
    workers: Annotated[int | None, typer.Option(
        help="Workers of the local cluster (default: sized from this machine's cores, GPUs "
        "and memory; see docs/instructors.md).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Re-grade every notebook, even those graded before and unchanged.")]
    = False,
) -> None:
    """Grade a class: one JSON report and one Gradescope results file per student, and a
    summary (summary.csv, summary.md), all in --out and written as results arrive.

    A re-run grades only new and changed notebooks (and retries those that could not be
    graded). Exit code 0 when every student passed everything, 1 otherwise, 2 for bad
    input, 130 when interrupted (what was graded is kept; run again to finish).

    Example: grader batch submitted/ --out grades/ --mode sim
    """
    from grader.batch import BatchError, grade_class
    from grader.sanitizer import selected_tools
    from workbook.mode import ModeError

    try:
        selected_tools()
        result = grade_class(submissions, out, mode=mode.value, exercises=tuple(exercise or ()),
                             metrics=metrics, sanitizers=sanitizers, timeout=timeout, seed=seed,
                             scheduler=scheduler, workers=workers, force=force, console=console)
    except (BatchError, ModeError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/]: results so far are in {out}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    console.print(f"{result.submissions} submissions: {len(result.graded)} graded, "
                  f"{len(result.reused)} unchanged (kept), {len(result.errors)} not graded; "
                  f"students: {result.student_counts()}; {result.seconds:.1f} s on "
                  f"{result.workers} workers; see {result.out / 'summary.md'}", soft_wrap=True,
                  markup=False)
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if result.passed else EXIT_FAILED)


@app.command()
def release(
    solutions: Annotated[Path, typer.Argument(help="Folder of solution notebooks.")] = Path(
        "solutions"),
    lessons: Annotated[Path, typer.Argument(help="Where to write student notebooks.")] = Path(
        "lessons"),
) -> None:
    """Generate the student notebooks in LESSONS from the solution notebooks."""
    from grader.release import MarkerError, release_tree

    try:
        written = release_tree(solutions, lessons)
    except MarkerError as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    for path in written:
        console.print(f"wrote {path}")


@app.command()
def profile(
    notebook: Annotated[Path, typer.Argument(help="The student's notebook.")],
    exercise: Annotated[str, typer.Option("--exercise", "-e", help="Exercise id.")],
) -> None:
    """Show an exercise's Nsight Compute metrics next to the reference solution (no grading).

    Example: grader profile lessons/02_reduction/reduction.ipynb -e reduction.shared
    """
    from dataclasses import asdict

    from grader.exercises import UnknownExercise, get
    from grader.metric_rules import format_outcome
    from grader.profiling import assess
    from workbook.mode import ModeError, resolve

    try:
        nb = nbmod.load(notebook)
        ex = get(exercise)
        cells = [asdict(c) for c in nb.program_for(ex.id)]
        mode = resolve()
    except (nbmod.NotebookError, UnknownExercise, ModeError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not ex.metric_rules:
        console.print(f"{ex.id} declares no metric rules")
        raise typer.Exit(EXIT_OK)
    with console.status(f"profiling {ex.id} and its reference with ncu"):
        metrics = assess(ex, cells, mode)
    for outcome in metrics["rules"]:
        console.print(format_outcome(outcome))
        console.print(f"  why: {outcome['why']} (tuned on {outcome['tuned_on']})")


@app.command()
def doctor() -> None:
    """Report GPU, driver, numba-cuda, ncu and the mode that will be used."""
    from grader.doctor import main

    raise typer.Exit(main())


app.command("gradescope-bundle")(gradescope_bundle)  # grader/gradescope.py


if __name__ == "__main__":
    app()
