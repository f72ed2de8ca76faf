"""The ``grader`` command line.

Exit codes: 0 every graded exercise passed; 1 some exercise did not pass;
2 bad input (no such notebook, not a lesson notebook, an exercise the notebooks do not
have, unknown mode, mode unavailable); 130 interrupted (Ctrl-C).

Every module that takes long to import (numpy, numba, nbformat, the exercise catalogue) is
imported inside the command that needs it, so that ``grader --help`` answers at once.
"""

from __future__ import annotations

import inspect
import os
import re
import signal
import sys
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from grader.gradescope import gradescope_bundle

FLAG = ""  # the metavar of a boolean flag: none (typer would show <bool>)


class _PlainHelpFlag:
    """--help listed without a <bool> metavar."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = FLAG
        return option


class Command(_PlainHelpFlag, TyperCommand):
    pass


class Group(_PlainHelpFlag, TyperGroup):
    pass


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=Group,
                  help="Grade Numba-CUDA Workbook notebooks and build the student lessons.")
console = Console()
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Mode(StrEnum):
    auto = "auto"
    sim = "sim"
    gpu = "gpu"


MODE_HELP = "sim (CUDA simulator), gpu, or auto-detect."
EXERCISE_HELP = ("Grade only this exercise (repeatable). Ids are LESSON.NAME, e.g. -e "
                 "reduction.shared; grader list shows every lesson's ids.")
METRICS_HELP = ("gpu mode: apply the Nsight Compute metric rules to the exercises that pass "
                "(the simulator has no hardware counters: in sim mode they are not assessed).")
SANITIZERS_HELP = ("gpu mode: run compute-sanitizer (memcheck, racecheck, synccheck) and the "
                   "simulator's sanitizer on small cases beside the check. In sim mode the "
                   "simulator's sanitizer is part of every check, with or without this flag.")
TIMEOUT_HELP = ("Seconds a test case may run: the simulator stops it and shows what each "
                "thread was doing; on a GPU its process is killed.")
TIMEOUT_DEFAULT = "20 in sim mode, 300 in gpu mode"
SEED_HELP = ("Seed of the random inputs. A failed case prints the seed that reruns it "
             "(with -e and the same seed, the same inputs).")


def error(message) -> None:
    """Print a usage error, its text verbatim."""
    console.print(Text.assemble(("error:", "red"), " ", str(message)), soft_wrap=True)


@app.command()
def check(
    paths: Annotated[list[Path], typer.Argument(help="Notebooks, or lesson folders.")],
    mode: Annotated[Mode, typer.Option(help=MODE_HELP)] = Mode.auto,
    exercise: Annotated[list[str] | None, typer.Option(
        "--exercise", "-e", help=EXERCISE_HELP, show_default=False)] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics", help=METRICS_HELP, metavar=FLAG)] = True,
    sanitizers: Annotated[bool, typer.Option(
        "--sanitizers/--no-sanitizers", help=SANITIZERS_HELP, metavar=FLAG)] = True,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")]
    = None,
    gradescope: Annotated[Path | None, typer.Option(help="Write Gradescope's results.json.")]
    = None,
    timeout: Annotated[float | None, typer.Option(
        help=TIMEOUT_HELP, show_default=TIMEOUT_DEFAULT)] = None,
    seed: Annotated[int | None, typer.Option(
        help=SEED_HELP, show_default="a new one each run, printed")] = None,
) -> None:
    """Grade notebooks; print a table; exit 0 only if every exercise passes.

    Examples: grader check lessons/02_reduction --mode sim --json report.json;
    grader check lessons/02_reduction -e reduction.shared --no-metrics --no-sanitizers
    (a quick check of one exercise: what is skipped is reported as not assessed).

    Ctrl-C stops the grading at once (exit code 130); nothing is reported then.
    """
    from grader import notebook as nbmod
    from grader.exercise import new_seed
    from grader.grade import exercises_in
    from grader.sanitizer import selected_tools
    from workbook.mode import ModeError, resolve

    only = list(exercise or [])
    try:
        resolved = resolve(mode.value)
        notebooks = [nbmod.load(p) for p in nbmod.find_notebooks(paths)]
        plan = [(nb, exercises_in(nb, only)) for nb in notebooks]
        reject_foreign_exercises(notebooks, only)
        plan = [(nb, ids) for nb, ids in plan if ids is not None]
        selected_tools()
    except (ModeError, nbmod.NotebookError, ValueError) as exc:
        error(exc)
        raise typer.Exit(EXIT_USAGE) from None

    seed = new_seed() if seed is None else seed
    console.print(Text(f"{resolved} mode, seed {seed} (--seed {seed} gives the same inputs)"))
    try:
        with stop_on_interrupt():
            reports = grade_all(plan, resolved, timeout, seed, metrics, sanitizers)
    except KeyboardInterrupt:
        console.print(Text.assemble(("interrupted:", "yellow"), " grading stopped (Ctrl-C); "
                                    "no report was written"))
        exit_now(EXIT_INTERRUPTED)
    except nbmod.NotebookError as exc:
        error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    from grader import report as rep

    rep.render_table(reports, console)
    if json_path:
        rep.write_json(rep.json_report(reports), json_path)
    if gradescope:
        rep.write_json(rep.gradescope_report(reports), gradescope)
    raise typer.Exit(EXIT_OK if all(r.passed for r in reports) else EXIT_FAILED)


def grade_all(plan, mode: str, timeout, seed: int, metrics: bool, sanitizers: bool) -> list:
    """Grade each (notebook, exercise ids) of ``plan`` under a status line."""
    from grader.grade import grade_notebook
    from grader.progress import PhaseDisplay

    reports = []
    for nb, ids in plan:
        with PhaseDisplay(console, f"{nb.path} ({mode} mode)") as phases:
            reports.append(grade_notebook(nb, mode, timeout, seed, on_result=_progress,
                                          exercises=ids, metrics=metrics,
                                          sanitizers=sanitizers, on_phase=phases.update))
        console.print(Text(f"  {nb.path}: graded in {reports[-1].seconds:.1f} s"))
    return reports


def reject_foreign_exercises(notebooks, only: list[str]) -> None:
    """Raise NotebookError for an id of ``only`` that none of the notebooks' lessons has,
    naming the exercises they have."""
    from grader.exercises import LESSONS
    from grader.notebook import NotebookError

    lessons = {nb.lesson: nb for nb in notebooks}
    have = {e.id for lesson in lessons for e in LESSONS.get(lesson, ())}
    missing = [i for i in only if i not in have]
    if not missing:
        return
    theirs = "; ".join(f"{nb.path} (lesson {lesson}) has "
                       f"{', '.join(e.id for e in LESSONS.get(lesson, ()))}"
                       for lesson, nb in lessons.items())
    raise NotebookError(f"no notebook given has the exercise {', '.join(missing)}: {theirs} "
                        f"(grader list shows every lesson's exercises)")


@contextmanager
def stop_on_interrupt():
    """Ctrl-C (SIGINT) kills every grading process at once and raises KeyboardInterrupt: the
    grading threads, polling their processes, see the stop and end without starting more."""
    from grader.session import STOP

    def interrupted(signum, frame):
        STOP.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_now(code: int) -> None:
    """Exit at once: the grading processes are gone, and unloading the thousand modules
    grading imported (numpy, numba) would take a second or more on a busy machine."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _progress(result) -> None:
    phases = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in result.timings.items())
    console.print(Text(f"  {result.id}: {result.status} ({result.seconds:.1f} s"
                       f"{': ' + phases if len(result.timings) > 1 else ''})"))


@app.command(name="list")
def list_exercises(
    lessons: Annotated[list[str] | None, typer.Argument(
        help="Lessons: 02_reduction, reduction, or a lesson's folder or notebook; all by "
        "default.", show_default=False)] = None,
) -> None:
    """List the exercises: id, points, title and the metric rules applied in gpu mode.

    Example: grader list reduction
    """
    from grader.exercises import LESSONS
    from grader.report import exercise_table

    chosen = [find_lesson(name, LESSONS) for name in lessons] if lessons else sorted(LESSONS)
    unknown = [name for name, lesson in zip(lessons or (), chosen) if lesson is None]
    if unknown:
        error(f"no lesson {', '.join(map(repr, unknown))}; the lessons are "
              f"{', '.join(sorted(LESSONS))}")
        raise typer.Exit(EXIT_USAGE)
    for name in chosen:
        console.print(exercise_table(name, LESSONS[name]))


def find_lesson(text: str, lessons) -> str | None:
    """The lesson named by ``text``: its folder name (02_reduction), the name without the
    number (reduction), or a path to its folder or notebook."""
    for candidate in (text, Path(text).name, Path(text).parent.name, Path(text).stem):
        for lesson in lessons:
            if candidate in (lesson, lesson.split("_", 1)[-1]):
                return lesson
    return None




@app.command()
def batch(
    submissions: Annotated[Path, typer.Argument(
        help="Folder of submissions: <student>.ipynb files, or one folder per student "
        "(nbgrader's submitted/, a Gradescope export).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the results.")] = Path(
        "grades"),
    mode: Annotated[Mode, typer.Option(help=MODE_HELP)] = Mode.auto,
    exercise: Annotated[list[str] | None, typer.Option(
        "--exercise", "-e", help=EXERCISE_HELP, show_default=False)] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics", help=METRICS_HELP, metavar=FLAG)] = True,
    sanitizers: Annotated[bool, typer.Option(
        "--sanitizers/--no-sanitizers", help=SANITIZERS_HELP, metavar=FLAG)] = True,
    timeout: Annotated[float | None, typer.Option(
        help=TIMEOUT_HELP, show_default=TIMEOUT_DEFAULT)] = None,
    seed: Annotated[int | None, typer.Option(
        help=SEED_HELP, show_default="a new one for each exercise, printed")] = None,
    scheduler: Annotated[str | None, typer.Option(
        help="Address of a running Dask scheduler (tcp://HOST:8786) whose workers grade; "
        "default: a cluster on this machine.")] = None,
    workers: Annotated[int | None, typer.Option(
        help="Workers of the local cluster (default: sized from this machine's cores, GPUs "
        "and memory; see docs/instructors.md).")] = None,
    profile_workers: Annotated[int, typer.Option(
        help="gpu mode with metrics: profile workers per GPU, which run the ncu runs while "
        "the other workers check and sanitize the next notebooks (0: each worker profiles "
        "its own notebooks).")] = 0,
    force: Annotated[bool, typer.Option(
        "--force", help="Re-grade every notebook, even those graded before and unchanged.",
        metavar=FLAG)] = False,
) -> None:
    """Grade a class: per student a JSON report, Gradescope's results file and a feedback
    file (each failed exercise with its messages), and a summary (summary.csv, summary.md:
    who failed what, and why), all in --out and written as results arrive.

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
                             scheduler=scheduler, workers=workers,
                             profile_workers=profile_workers, force=force, console=console)
    except (BatchError, ModeError, ValueError) as exc:
        error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        console.print(Text.assemble(("interrupted", "yellow"), f": results so far are in {out}"))
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
        error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    for path in written:
        console.print(Text(f"wrote {path}"))


@app.command()
def profile(
    notebook: Annotated[Path, typer.Argument(help="The student's notebook.")],
    exercise: Annotated[str, typer.Option("--exercise", "-e", help="Exercise id.")],
) -> None:
    """Show an exercise's Nsight Compute metrics next to the reference solution (no grading).

    Example: grader profile lessons/02_reduction/reduction.ipynb -e reduction.shared
    """
    from dataclasses import asdict

    from grader import notebook as nbmod
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
        error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    if not ex.metric_rules:
        console.print(Text(f"{ex.id} declares no metric rules"))
        raise typer.Exit(EXIT_OK)
    with console.status(Text(f"profiling {ex.id} and its reference with ncu")):
        metrics = assess(ex, cells, mode)
    for outcome in metrics["rules"]:
        console.print(Text(format_outcome(outcome)))
        console.print(Text(f"  why: {outcome['why']} (tuned on {outcome['tuned_on']})"))


@app.command()
def doctor() -> None:
    """Report GPU, driver, numba-cuda, ncu and the mode that will be used."""
    from grader.doctor import main

    raise typer.Exit(main())


app.command("gradescope-bundle")(gradescope_bundle)  # grader/gradescope.py


def reflow(text: str) -> str:
    """Help text with each paragraph on one line: the terminal wraps it at its own width
    (typer keeps a docstring's line breaks, which break sentences on a narrow terminal)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(re.sub(r"\s*\n\s*", " ", p) for p in paragraphs)


for _command in app.registered_commands:  # keep last: every command is defined above
    _command.help = reflow(_command.help or inspect.getdoc(_command.callback) or "")
    if _command.cls in (None, TyperCommand):
        _command.cls = Command


if __name__ == "__main__":
    app()
