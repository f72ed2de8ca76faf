"""The check stage: the exercises' tests in the chosen mode (every mode).

One process works through the exercises in notebook order (more after a crash or hang, see
:mod:`grader.session`); an exercise that hangs or crashes it gets a timeout or error result,
the others are graded as usual. Its results are what the other stages judge and amend.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.results import ExerciseResult
from grader.stages import PhaseCallback, run_checks

PHASE = "check"


def run(order: list[str], cells: list[dict], mode: str, timeout: float, seed: int | None,
        progress: PhaseCallback = lambda phase, exercise_id: None,
        on_result: Callable[[dict], None] | None = None) -> dict[str, ExerciseResult]:
    """Check the exercises of ``order`` in ``mode``; results by id. ``on_result`` sees each
    result event as it arrives (the tools wait for one they can judge)."""
    return run_checks(order, cells, mode, timeout, seed, progress, PHASE, on_result)
