"""The check stage: the exercises' tests in the chosen mode (every mode).

One process works through the exercises in notebook order (more after a crash or hang, see
:mod:`grader.session`); an exercise that hangs or crashes it gets a timeout or error result,
the others are graded as usual. Its results are what the other stages judge and amend, so
the pipeline checks each notebook in a process of its own: nothing one student's cells do to
the modules they share can change another's verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.job_units import Notebook
from grader.results import ExerciseResult
from grader.stages import PhaseCallback, run_checks

PHASE = "check"


def run(notebooks: list[Notebook], mode: str, timeout: float, seed: int | None,
        progress: PhaseCallback = lambda phase, exercise_id: None,
        on_result: Callable[[dict], None] | None = None) -> list[dict[str, ExerciseResult]]:
    """Check the notebooks' exercises in ``mode``; for each notebook, results by id.
    ``on_result`` sees each result event as it arrives (the tools wait for one they can
    judge)."""
    return run_checks(notebooks, mode, timeout, seed, progress, PHASE, on_result)
