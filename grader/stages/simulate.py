"""The simulate stage (gpu mode): the exercises' simulator cases with the workbook's sanitizer.

The simulator sees what NVIDIA's tools cannot: races on global memory within a block, reads
of memory nobody wrote, warp-collective misuse. Its verdict amends a GPU-graded result
(:func:`apply`): a bug it finds fails the exercise; a run that did not finish is reported,
not held against it.
"""

from __future__ import annotations

from grader.results import ERROR, FAILED, PASSED, ExerciseResult
from grader.stages import PhaseCallback, run_checks

PHASE = "simulator"


def run(order: list[str], cells: list[dict], timeout: float, seed: int | None,
        progress: PhaseCallback) -> dict[str, ExerciseResult]:
    """The exercises of ``order`` checked in the simulator, sanitizer on; results by id."""
    return run_checks(order, cells, "sim", timeout, seed, progress, PHASE)


def apply(result: ExerciseResult, simulated: ExerciseResult) -> None:
    """Fail a GPU-graded exercise whose simulator run (small cases, sanitizer on) found a
    bug; a simulator run that did not finish is reported, not held against it."""
    result.add_time(PHASE, simulated.seconds)
    if simulated.status in (FAILED, ERROR):
        detail = "\n".join(simulated.messages)
        result.messages.append(f"simulator (small cases, sanitizer on): {simulated.status}: "
                               f"{detail}")
        result.status, result.score = FAILED, 0.0
    elif simulated.status == PASSED:
        result.messages.append("simulator (small cases, sanitizer on): no findings")
    else:
        result.messages.append(f"simulator (small cases, sanitizer on): not assessed "
                               f"({simulated.status}: {' '.join(simulated.messages)[:200]})")
