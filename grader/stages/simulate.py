"""The simulate stage (gpu mode): the exercises' simulator cases with the workbook's sanitizer.

The simulator sees what NVIDIA's tools cannot: races on global memory within a block, reads
of memory nobody wrote, warp-collective misuse. Its verdict amends a GPU-graded result
(:func:`apply`): a bug it finds fails the exercise; a run that did not finish is reported,
not held against it.

The GPU check has already run the GPU cases for correctness, so this pass runs only what it
is there for, in processes of its own (:data:`SETTINGS`):

* each exercise's simulator-pass cases (:meth:`grader.exercise.Exercise.simulator_pass`: the
  simulator cases an exercise declares as ``simulator_pass_cases``, else all of them); a
  check in simulator mode still runs every simulator case;
* no sm_90 compile step (:mod:`grader.gpu_compile.step`): it exists to reject, without a
  GPU, kernels the GPU compiler would reject, and here the GPU check has compiled them.
"""

from __future__ import annotations

from grader.exercise import SIMULATOR_PASS_ENV
from grader.gpu_compile.step import SWITCH_ENV as GPU_COMPILE_ENV
from grader.job_units import Notebook
from grader.results import ERROR, FAILED, PASSED, ExerciseResult
from grader.stages import PhaseCallback, run_checks

PHASE = "simulator"
SETTINGS = {SIMULATOR_PASS_ENV: "1", GPU_COMPILE_ENV: "0"}  # the pass's processes' environment


def run(notebooks: list[Notebook], timeout: float, seed: int | None,
        progress: PhaseCallback) -> list[dict[str, ExerciseResult]]:
    """The notebooks' exercises checked in the simulator, sanitizer on, on their
    simulator-pass cases, in one process; for each notebook, results by id."""
    return run_checks(notebooks, "sim", timeout, seed, progress, PHASE, settings=SETTINGS)


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
