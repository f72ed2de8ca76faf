"""An exercise declared once, as data, and the engine that checks a submission.

The same :class:`Exercise` record serves the notebook's self-check cell and the
``grader`` CLI: both look the student's objects up by name in a namespace
(the notebook's globals, or the namespace the grader built from the student's
exercise cells) and run the same randomized and edge-case tests.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from grader.metric_rules import MetricRule
from grader.results import (
    ERROR,
    FAILED,
    NOT_IMPLEMENTED,
    PASSED,
    TIMEOUT,
    CaseResult,
    ExerciseResult,
)
from grader.stubs import is_stub

# The largest test case (in elements) run under compute-sanitizer: the tools slow kernels
# down a hundredfold. The declarations choose their exact-size cases by it.
SANITIZED_MAX_SIZE = 1 << 16
# "1" in the processes of the gpu-mode simulator pass (grader.stages.simulate): there the
# simulator cases are each exercise's simulator_pass_cases
SIMULATOR_PASS_ENV = "WORKBOOK_SIMULATOR_PASS"


class Mismatch(AssertionError):
    """A submission produced a wrong result; the message explains it in GPU terms."""


@dataclass(frozen=True)
class Case:
    """One test: a size and an input kind (its inputs come from the run's seed). A lesson's
    cases that need more (a shape, a launch) subclass it with typed fields and name them in
    :meth:`name`."""

    size: int
    kind: str = "random"

    def name(self) -> str:
        return f"n={self.size}, {self.kind}"


@dataclass(frozen=True)
class Exercise:
    """Everything the grader knows about one exercise.

    ``run(namespace, inputs, mode)`` launches the student's code and returns its
    output; ``reference(inputs)`` computes the expected output with numpy;
    ``verify(got, expected, inputs, mode)`` raises :class:`Mismatch` with an
    explanation when the output is wrong.

    On a GPU, ``metric_rules`` (see :mod:`grader.metric_rules`) are checked on
    a launch that ``profile(namespace)`` makes of the kernels named
    ``profile_kernels`` (default: ``entry``): its warm-up launches are made in
    :func:`grader.profiled_range.unprofiled`, outside ncu's profiled range, and the
    measured one is the launch of those kernels after ``profile_skip`` others
    inside the range (0: the first).
    """

    id: str
    lesson: str
    title: str
    entry: str
    make_inputs: Callable[[np.random.Generator, Case], dict[str, Any]]
    run: Callable[[Mapping[str, Any], dict[str, Any], str], Any]
    reference: Callable[[dict[str, Any]], Any]
    verify: Callable[[Any, Any, dict[str, Any], str], None]
    cases: Mapping[str, Sequence[Case]]
    points: float = 1.0
    needs: tuple[str, ...] = ()
    metric_rules: tuple[MetricRule, ...] = ()
    no_metric_rule: str = ""  # without metric_rules: why none (e.g. "CPU-only: numpy")
    profile: Callable[[Mapping[str, Any]], None] | None = None
    profile_kernels: tuple[str, ...] = ()
    profile_skip: int = 0
    sanitizer_cases: Sequence[Case] | None = None  # for compute-sanitizer (default: small ones)
    # for the gpu-mode simulator pass (default: every simulator case)
    simulator_pass_cases: Sequence[Case] | None = None

    def cases_for(self, mode: str) -> Sequence[Case]:
        """The cases of ``mode``; in a process of the gpu-mode simulator pass
        (:data:`SIMULATOR_PASS_ENV`), :meth:`simulator_pass`."""
        if mode == "sim" and os.environ.get(SIMULATOR_PASS_ENV) == "1":
            return self.simulator_pass()
        return self.cases[mode]

    def simulator_pass(self) -> Sequence[Case]:
        """The simulator cases that the gpu-mode simulator pass runs: ``simulator_pass_cases``,
        else all of them. The GPU check has run the GPU cases for correctness; the pass looks
        for what only the simulator sees (races, uninitialised reads, misused barriers and
        warp collectives), which depends on the launches more than on the values."""
        if self.simulator_pass_cases is None:
            return self.cases["sim"]
        return tuple(self.simulator_pass_cases)


_LIBRARY_DIRS = tuple({sys.prefix, sys.base_prefix, str(Path(__file__).parents[1] / "grader"),
                       str(Path(__file__).parents[1] / "workbook")})


def _is_student_frame(filename: str) -> bool:
    return filename.startswith("<cell") or not filename.startswith(_LIBRARY_DIRS)


# the simulator's reports that name the thread, its block and the line themselves
_LOCATED = ("SanitizerError", "WarpCollectiveError")
_SIM_THREAD = re.compile(r"^tid=\[[^\]]*\] ctaid=\[[^\]]*\]: ")  # numba's simulator prefix


def describe_exception(exc: BaseException) -> str:
    """The exception and the frames of the student's own code (notebook cells) only; for a
    simulator report that already names thread, block and line, the report alone."""
    if {c.__name__ for c in type(exc).__mro__} & set(_LOCATED):
        return f"{type(exc).__name__}: {_SIM_THREAD.sub('', str(exc))}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_student_frame(f.filename)]
    where = "".join(traceback.format_list(frames[-4:]))
    return f"{type(exc).__name__}: {exc}" + (f"\n{where.rstrip()}" if where else "")


def students_fault(exc: BaseException) -> bool:
    """Whether an exception raised while a case ran comes from the student's code (a frame of
    it in the traceback, numba rejecting it, or the simulator's report on their kernel, which
    an initcheck may give after the launch has returned), not from the grader or the machine."""
    from numba.core.errors import NumbaError

    frames = traceback.extract_tb(exc.__traceback__)
    simulator_report = bool({c.__name__ for c in type(exc).__mro__} & set(_LOCATED))
    return (isinstance(exc, NumbaError) or simulator_report
            or any(_is_student_frame(f.filename) for f in frames))


def new_seed() -> int:
    """A run's seed when none is given: short enough to type back as ``--seed``."""
    return secrets.randbelow(1_000_000)


def rerun_hint(exercise_id: str, seed: int) -> str:
    """How to run a case again with the same inputs, in the notebook and in a terminal."""
    return (f'seed {seed} reruns these inputs: check("{exercise_id}", seed={seed}) in the '
            f"notebook, or grader check NOTEBOOK -e {exercise_id} --seed {seed}")


def check_exercise(
    exercise: Exercise,
    namespace: Mapping[str, Any],
    mode: str,
    seed: int | None = None,
    *,
    on_case: Callable[[int, int, Case], None] | None = None,
    case_seconds: float | None = None,
    timeout_setting: str | None = None,
) -> ExerciseResult:
    """Run every case of ``exercise`` against the objects found in ``namespace``.

    All case inputs derive from one seed (``seed``, or a new one), which a failed case's
    message gives back. ``on_case(k, n, case)`` is called as case k of n starts. In the
    simulator each case is bounded by ``case_seconds`` (default ``WORKBOOK_CHECK_TIMEOUT``),
    which a timeout's message names as ``timeout_setting``.
    """
    start = time.monotonic()
    result = ExerciseResult(
        id=exercise.id,
        title=exercise.title,
        status=PASSED,
        score=0.0,
        max_score=exercise.points,
        mode=mode,
    )
    missing = [name for name in (exercise.entry, *exercise.needs) if name not in namespace]
    if missing:
        result.status = NOT_IMPLEMENTED if exercise.entry in missing else FAILED
        result.messages.append(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not defined: define "
            f"{'it' if len(missing) == 1 else 'them'} in the exercise cell of {exercise.id} "
            f"(keep the name{'' if len(missing) == 1 else 's'} as given)."
        )
        return _finish(result, start)
    stubs = [name for name in (exercise.entry, *exercise.needs) if is_stub(namespace[name])]
    if stubs:
        result.status = NOT_IMPLEMENTED
        result.messages.append(
            f"{', '.join(stubs)} still {'raises' if len(stubs) == 1 else 'raise'} "
            "NotImplementedError: replace the stub with your code."
        )
        return _finish(result, start)

    from grader.gpu_compile.step import CompileStep

    seed = new_seed() if seed is None else seed
    cases = exercise.cases_for(mode)
    compile_step = CompileStep(mode)  # in the simulator: the kernels compile for sm_90 too
    limit = (case_seconds, timeout_setting)
    for k, (case, case_seed) in enumerate(zip(cases, np.random.SeedSequence(seed).spawn(
            len(cases))), 1):
        if on_case:
            on_case(k, len(cases), case)
        case_seed_int = int(case_seed.generate_state(1)[0])
        run = partial(_run_case, exercise, namespace, mode, case, case_seed_int, limit)
        outcome = compile_step.run(run, len(result.cases), len(cases))
        outcome.seed = seed  # what reruns it
        result.cases.append(outcome)
        if outcome.status != PASSED:
            result.status = outcome.status
            result.messages.append(f"{case.name()}: {outcome.message}")
            if outcome.status != NOT_IMPLEMENTED:
                result.messages.append(rerun_hint(exercise.id, seed))
            break
    if result.status == PASSED:
        result.score = exercise.points
        tests = "the test" if len(result.cases) == 1 else f"all {len(result.cases)} tests"
        result.messages.append(f"{tests} passed ({mode} mode)")
    result.messages.extend(compile_step.notes)
    return _finish(result, start)


QUIET = (".*will likely result in GPU under-utilization", ".*Host array used in CUDA kernel")


def _run_case(exercise, namespace, mode, case, seed, limit=(None, None)) -> CaseResult:
    from workbook.sim.watchdog import KernelTimeout  # imports workbook: it picks the mode

    rng = np.random.default_rng(seed)
    inputs = exercise.make_inputs(rng, case)
    expected = exercise.reference(inputs)
    name = case.name()
    try:
        with warnings.catch_warnings(), case_time_limit(case, mode, limit[0]) as seconds:
            for message in QUIET:  # numba's hints about the deliberately tiny test launches
                warnings.filterwarnings("ignore", message=message)
            got = exercise.run(namespace, inputs, mode)
            exercise.verify(got, expected, inputs, mode)
    except KernelTimeout as exc:
        return _case(name, TIMEOUT, describe_timeout(exercise, name, seconds, exc, limit[1]),
                     seed)
    except NotImplementedError as exc:
        return _case(name, NOT_IMPLEMENTED, f"not implemented ({exc})", seed)
    except Mismatch as exc:
        return _case(name, FAILED, str(exc), seed)
    except Exception as exc:  # student code may raise anything: a bug of theirs fails the case
        status = FAILED if students_fault(exc) else ERROR
        return _case(name, status, describe_exception(exc), seed)
    return _case(name, PASSED, "", seed)


SIZE_PER_BOUND = 1 << 16  # elements a case may have before its time limit grows with it


@contextmanager
def case_time_limit(case: Case, mode: str, seconds: float | None = None):
    """Bound a case in the simulator (``seconds``, default ``WORKBOOK_CHECK_TIMEOUT``, more
    for large cases); yields the bound. On a GPU a kernel cannot be stopped from this
    process: the grader's process timeout bounds it there."""
    from workbook.sim.watchdog import check_timeout, time_limit

    if mode != "sim":
        yield None
        return
    seconds = (seconds or check_timeout()) * max(1.0, case.size / SIZE_PER_BOUND)
    with time_limit(seconds):
        yield seconds


def describe_timeout(exercise: Exercise, case_name: str, seconds: float, exc,
                     setting: str | None = None) -> str:
    """Which exercise and case hung, what the simulated threads were doing, what to try;
    ``setting`` names what set the bound (default ``WORKBOOK_CHECK_TIMEOUT``)."""
    from workbook.sim.watchdog import TIMEOUT_ENV

    setting = setting or TIMEOUT_ENV
    head = (f"{exercise.id} did not finish case {case_name} within {seconds:g} s "
            f"({setting}); it was stopped.")
    if exc.diagnosis:
        return f"{head}\n{exc.diagnosis.replace(TIMEOUT_ENV, setting)}"
    return (f"{head}\nno kernel was running: the host code did not finish (a host loop such "
            f"as `while changed:` whose condition never becomes false?)\n"
            f"{describe_exception(exc)}")


def describe_gpu_hang(exercise_id: str, case_name: str, seconds: float, mode: str = "gpu",
                      simulated: str = "") -> str:
    """A check stopped from outside after ``seconds`` without progress (see
    :mod:`grader.contained`): on a GPU, a kernel that never ends; what the simulator saw
    running the same code (``simulated``), and the likely causes."""
    from workbook.sim.watchdog import BARRIER_CAUSE, LOOP_CAUSE, TIMEOUT_ENV

    if mode == "gpu":
        head = (f"{exercise_id} did not finish case {case_name} within {seconds:g} s on the "
                f"GPU ({TIMEOUT_ENV}): a kernel that never ends, most likely.")
    else:
        head = (f"{exercise_id} did not finish case {case_name} within {seconds:g} s "
                f"({TIMEOUT_ENV}), and the simulator did not stop it.")
    causes = (LOOP_CAUSE, BARRIER_CAUSE,
              f"if the kernel is merely slow, set {TIMEOUT_ENV} to a larger number of seconds")
    return "\n".join([f"{head} The process running the check was stopped; this notebook and "
                      "its variables are untouched.", *([simulated] if simulated else []),
                      "likely causes:", *(f"  - {cause}" for cause in causes)])


def gpu_hang_advice(exercise_id: str, seconds: float, notebook: str = "NOTEBOOK",
                    why: str = "") -> str:
    """What to do about a check that may never end on a GPU, in the notebook's process
    (``why``: the reason it runs there)."""
    return (f"{exercise_id}: the check is still running after {seconds:g} s. It runs in the "
            f"notebook's own process{f' ({why})' if why else ''}, and on a GPU a kernel that "
            f"never ends cannot be stopped from inside the notebook (the stop button has no "
            f"effect while it runs). If it does not finish: Kernel > Restart Kernel, fix the "
            f"loop or barrier, run the cells again. To try code that may hang safely, save the "
            f"notebook and run `grader check {notebook} -e {exercise_id} --timeout 60` in a "
            f"terminal (a separate process, stopped after 60 s), or debug it in the simulator "
            f"(`%env WORKBOOK_MODE=sim` before `import workbook`, then restart), where a hanging "
            f"check is stopped and diagnosed.")


@contextmanager
def gpu_hang_notice(exercise_id: str, mode: str, out=None, why: str = ""):
    """A notebook's check on a GPU in the notebook's own process (see
    :mod:`grader.contained` for when): print :func:`gpu_hang_advice` if the check is still
    running after ``WORKBOOK_CHECK_TIMEOUT`` seconds.

    A kernel that never ends keeps this process in a CUDA driver call that no signal can
    interrupt; the timer's thread still runs then (the driver call releases the GIL).
    """
    from workbook.sim.watchdog import check_timeout

    if mode != "gpu":
        yield
        return
    seconds = check_timeout()
    out = out or sys.stdout  # the cell's output: the timer thread prints there

    def notice():
        print(gpu_hang_advice(exercise_id, seconds, why=why), file=out, flush=True)

    timer = threading.Timer(seconds, notice)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _case(name, status, message, seed) -> CaseResult:
    return CaseResult(name=name, status=status, message=message, seed=seed)


def _finish(result: ExerciseResult, start: float) -> ExerciseResult:
    result.seconds = round(time.monotonic() - start, 3)
    return result
