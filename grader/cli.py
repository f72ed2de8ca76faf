"""The ``grader`` command line.

Exit codes: 0 every graded exercise passed; 1 some exercise did not pass;
2 bad input (no such notebook, not a lesson notebook, unknown mode, mode unavailable).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich.console import Console

from grader import notebook as nbmod
from grader import report as rep
from grader.grade import grade_notebook

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Grade Numba-CUDA Workbook notebooks and build the student lessons.")
console = Console()
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Mode(str, Enum):
    auto = "auto"
    sim = "sim"
    gpu = "gpu"


@app.command()
def check(
    paths: list[Path] = typer.Argument(..., help="Notebooks, or lesson folders holding them."),
    mode: Mode = typer.Option(Mode.auto, help="sim (CUDA simulator), gpu, or auto-detect."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the JSON report here."),
    gradescope: Path | None = typer.Option(None, help="Write Gradescope's results.json here."),
    timeout: float | None = typer.Option(None, help="Seconds allowed per exercise."),
    seed: int | None = typer.Option(None, help="Seed for the random tests (default: fresh)."),
) -> None:
    """Grade notebooks; print a table; exit 0 only if every exercise passes.

    Example: grader check lessons/02_reduction --mode sim --json report.json
    """
    from workbook.mode import ModeError, resolve

    try:
        resolved = resolve(mode.value)
        notebooks = [nbmod.load(p) for p in nbmod.find_notebooks(paths)]
    except (ModeError, nbmod.NotebookError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from None

    reports = []
    for nb in notebooks:
        with console.status(f"grading {nb.path} ({resolved} mode)") as status:
            def progress(result, _status=status, _nb=nb):
                console.print(f"  {result.id}: {result.status} ({result.seconds:.1f} s)")

            try:
                reports.append(grade_notebook(nb, resolved, timeout, seed, on_result=progress))
            except nbmod.NotebookError as exc:
                console.print(f"[red]error:[/] {exc}")
                raise typer.Exit(EXIT_USAGE) from None
    rep.render_table(reports, console)
    if json_path:
        rep.write_json(rep.json_report(reports), json_path)
    if gradescope:
        rep.write_json(rep.gradescope_report(reports), gradescope)
    raise typer.Exit(EXIT_OK if all(r.passed for r in reports) else EXIT_FAILED)


@app.command()
def release(
    solutions: Path = typer.Argument(Path("solutions"), help="Folder of solution notebooks."),
    lessons: Path = typer.Argument(Path("lessons"), help="Where to write student notebooks."),
) -> None:
    """Generate the student notebooks in LESSONS from the solution notebooks."""
    from grader.release import MarkerError, release_tree

    try:
        written = release_tree(solutions, lessons)
    except MarkerError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    for path in written:
        console.print(f"wrote {path}")


@app.command()
def doctor() -> None:
    """Report GPU, driver, numba-cuda, ncu and the mode that will be used."""
    from workbook.doctor import main

    raise typer.Exit(main())
