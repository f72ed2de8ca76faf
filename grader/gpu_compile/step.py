"""The check's compile step: in the simulator, the kernels of an exercise's first case are
compiled for sm_90 as well.

:class:`CompileStep` runs the first case while recording the first launch of each kernel
(:mod:`grader.gpu_compile.launches`); each kernel goes to the compile worker as it is
launched, with the types of that launch's arguments, and compiles while the simulator
runs the cases (the later cases' kernels are not compiled: a kernel factory makes a new
one per configuration, and compiling each would cost seconds per exercise). The check
waits for the verdicts after its last case, or after a case that did not pass. A kernel
the compiler rejects fails the exercise (FAILED) with the compiler's reason
(:mod:`grader.gpu_compile.diagnosis`), unless the simulator already stopped it with one
of the hand-written checks whose message names the fix (ArrayShapeError, WarpTypeError).
A step that cannot run (no compiler, a kernel that cannot be sent) is a note, never a
failure; that the compiler is missing is said once per process.

``WORKBOOK_GPU_COMPILE=0`` turns the step off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from grader.results import FAILED, NOT_IMPLEMENTED, PASSED, CaseResult

SWITCH_ENV = "WORKBOOK_GPU_COMPILE"
HAND_WRITTEN = ("ArrayShapeError", "WarpTypeError")  # the simulator's better messages
_TOLD: set[str] = set()  # reasons for skipping already told in this process


def enabled(mode: str) -> bool:
    return mode == "sim" and os.environ.get(SWITCH_ENV, "1").strip() != "0"


def warm_up(mode: str) -> None:
    """Start the compile worker now (it loads the compiler while cells run)."""
    if enabled(mode):
        from grader.gpu_compile.client import compiler

        compiler().start()


def warm_up_in_notebook() -> None:
    """In a Jupyter kernel whose lesson chose the simulator (``import workbook`` comes
    first), start the compile worker as the setup cell imports the grader: the first check
    does not wait for it."""
    workbook = sys.modules.get("workbook")
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    if workbook is not None and getattr(shell, "kernel", None) is not None:
        warm_up(workbook.MODE)


class CompileStep:
    """The compile step of one check: ``run(run_case, done, total)`` runs each case in
    turn (``done`` cases ran before it, of ``total``); notes for the result in ``notes``."""

    def __init__(self, mode: str):
        self.active = enabled(mode)
        self.notes: list[str] = []
        self.submitted: list[tuple[object, object]] = []  # (kernel, Pending)

    def run(self, run_case: Callable[[], CaseResult], done: int, total: int) -> CaseResult:
        """The case's result, or FAILED with the compiler's reason once a kernel of the first
        case is known to be rejected. Verdicts not in yet are waited for after the last case,
        or after a case that did not pass."""
        if not self.active:
            return run_case()
        outcome = self._recorded(run_case) if done == 0 else run_case()
        if outcome.status == NOT_IMPLEMENTED or outcome.message.startswith(HAND_WRITTEN):
            return outcome  # a stub, or the simulator's own diagnosis (it names the fix)
        last = done + 1 >= total or outcome.status != PASSED
        failures = self._failures(wait=last)
        if failures:
            return CaseResult(name=outcome.name, status=FAILED, seed=outcome.seed,
                              message="\n".join(failures))
        return outcome

    def _recorded(self, run_case: Callable[[], CaseResult]) -> CaseResult:
        from grader.gpu_compile.client import compiler
        from grader.gpu_compile.launches import recording

        worker = compiler()

        def launched(kernel, argtypes):
            if argtypes is not None:
                self.submitted.append((kernel, worker.submit(kernel, argtypes)))

        worker.start()
        with recording(launched):
            return run_case()

    def _failures(self, wait: bool) -> list[str]:
        """The compiler's rejections among the verdicts in (all of them, with ``wait``)."""
        from grader.gpu_compile.client import compiler

        failures, still = [], []
        for kernel, pending in self.submitted:
            if not (wait or pending.done.is_set()):
                still.append((kernel, pending))
                continue
            verdict = compiler().wait(pending)
            if verdict.skipped:
                _note(self.notes, _name(kernel), verdict.skipped, compiler().unavailable)
            elif not verdict.ok:
                failures.append(_described(_name(kernel), verdict.error, pending.sources))
        self.submitted = still
        return failures


def _described(kernel: str, error: dict, sources: dict[str, str]) -> str:
    """:func:`~grader.gpu_compile.diagnosis.describe`, or the compiler's message cut short
    where the diagnosis cannot read it."""
    from grader.gpu_compile.diagnosis import MAX_REASON, describe

    try:
        return describe(kernel, error, sources)
    except Exception:  # noqa: BLE001  (the rejection stands; only its explanation is lost)
        return (f"{kernel} does not compile for the GPU (numba-cuda, sm_90): "
                f"{str(error.get('message', error))[:MAX_REASON]}")


def _name(kernel) -> str:
    fn = getattr(kernel, "fn", None) or getattr(kernel, "py_func", None)
    return getattr(fn, "__name__", None) or repr(kernel)


def _note(notes: list[str], kernel: str, why: str, unavailable: str | None) -> None:
    if unavailable:
        if unavailable in _TOLD:
            return
        _TOLD.add(unavailable)
        notes.append(f"note: the GPU compile step was skipped: numba-cuda's compiler cannot "
                     f"run here ({unavailable}); install numba-cuda[cu13] to have kernels "
                     f"compiled for sm_90 in simulator mode")
        return
    notes.append(f"note: the GPU compile step was skipped for {kernel}: {why}")


__all__ = ["HAND_WRITTEN", "SWITCH_ENV", "CompileStep", "enabled", "warm_up",
           "warm_up_in_notebook"]
