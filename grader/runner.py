"""Child process that grades one exercise: ``python -m grader.runner JOB.json RESULT.json``.

Running each exercise in its own process contains whatever the student's code
does -- hang, crash the interpreter, corrupt the CUDA context -- and lets the
parent report it as that exercise's failure while grading the rest.
"""

from __future__ import annotations

import json
import linecache
import os
import re
import signal
import sys
from contextlib import contextmanager

from grader.exercise import describe_exception
from grader.results import ERROR, ExerciseResult

_MAGIC = re.compile(r"^\s*[%!]")


def cell_filename(index: int) -> str:
    return f"<cell {index}>"


def strip_magics(source: str) -> str:
    """Drop IPython magics and shell escapes, which plain Python cannot run."""
    return "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())


EARLIER_CELL_SECONDS = 10  # a cell of another exercise that runs longer than this is skipped


class CellTimeout(Exception):
    """A cell of an earlier exercise ran too long (an infinite loop at top level?)."""


@contextmanager
def time_limit(seconds: float):
    """Raise CellTimeout in the main thread after ``seconds`` (POSIX only)."""
    def expire(signum, frame):
        raise CellTimeout(f"did not finish within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def exec_cell(cell: dict, namespace: dict) -> None:
    source = strip_magics(cell["source"])
    filename = cell_filename(cell["index"])
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def definitions_namespace(notebook_path) -> dict:
    """Execute a notebook's setup, exercise and example cells; return the namespace."""
    from grader.notebook import load

    namespace: dict = {"__name__": "__main__"}
    for cell in load(notebook_path).definitions():
        exec_cell({"index": cell.index, "source": cell.source}, namespace)
    return namespace


def _error(exercise, message: str, mode: str) -> ExerciseResult:
    return ExerciseResult(id=exercise.id, title=exercise.title, status=ERROR, score=0.0,
                          max_score=exercise.points, messages=[message], mode=mode)


def grade(job: dict) -> ExerciseResult:
    """Execute the job's cells in a fresh namespace, then check the exercise."""
    os.environ["WORKBOOK_MODE"] = job["mode"]
    import workbook  # noqa: F401  (chooses sim/gpu before numba.cuda is imported)
    from grader.exercise import check_exercise
    from grader.exercises import get

    exercise = get(job["exercise_id"])
    if job.get("sanitize"):  # run under compute-sanitizer: small cases only
        from grader.sanitizer import small_cases

        exercise = small_cases(exercise, job["mode"])
    namespace: dict = {"__name__": "__main__"}
    notes = []
    for cell in job["cells"]:
        essential = cell["role"] == "setup" or cell.get("exercise_id") == exercise.id
        try:
            if essential:
                exec_cell(cell, namespace)
            else:
                with time_limit(EARLIER_CELL_SECONDS):
                    exec_cell(cell, namespace)
        except BaseException as exc:  # the student's cell may raise anything, even SystemExit
            where = f"cell {cell['index']} ({cell['role']} {cell.get('exercise_id') or ''})"
            if essential:
                return _error(exercise, f"{where} raised an exception:\n{describe_exception(exc)}",
                              job["mode"])
            notes.append(f"note: {where} was skipped ({type(exc).__name__}: {exc}); "
                         "names it defines are missing")
    if job.get("profile"):
        return _profile_launch(exercise, namespace, job["mode"])
    result = check_exercise(exercise, namespace, job["mode"], seed=job.get("seed"))
    result.messages.extend(notes)
    return result


def _profile_launch(exercise, namespace: dict, mode: str) -> ExerciseResult:
    """Make the exercise's profiling launches (the parent runs this process under ncu)."""
    from numba import cuda

    from grader.stubs import is_stub

    stubs = [n for n in (exercise.entry, *exercise.needs) if is_stub(namespace.get(n))]
    if stubs:
        raise SystemExit(f"not implemented: {', '.join(stubs)} still raises "
                         "NotImplementedError, so there is nothing to profile")
    exercise.profile(namespace)
    cuda.synchronize()
    return ExerciseResult(id=exercise.id, title=exercise.title, status="passed", score=0.0,
                          max_score=exercise.points, messages=["profile launches made"],
                          mode=mode)


def main(argv: list[str]) -> int:
    job_path, result_path = argv
    with open(job_path) as f:
        job = json.load(f)
    result = grade(job)
    with open(result_path, "w") as f:
        json.dump(result.to_dict(), f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
