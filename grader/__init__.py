"""Scoring for the Numba-CUDA Workbook: the ``grader`` CLI and the notebooks' self-check.

In a lesson notebook, ``check("reduction.simple")`` runs the same tests the
grader runs, on the objects defined in the notebook, and shows the result.
"""

from __future__ import annotations

import sys

from grader.gpu_compile import step as _gpu_compile


def check(exercise_id: str, namespace: dict | None = None, seed: int | None = None):
    """Check one exercise against the names defined in the calling notebook.

    Returns an :class:`~grader.results.ExerciseResult`, which Jupyter displays. On a GPU
    the check runs in a child process (see :mod:`grader.contained`): a kernel that never
    ends is stopped after ``WORKBOOK_CHECK_TIMEOUT`` seconds without progress, and the stop
    button stops the check; the notebook stays usable either way. In the simulator each
    test case is bounded by ``WORKBOOK_CHECK_TIMEOUT`` and the stop button works in-process.
    """
    from grader import contained
    from grader.exercise import check_exercise, gpu_hang_notice
    from grader.exercises import get
    from grader.locations import result_in_cell_terms
    from grader.progress import CheckProgress
    from workbook import current_mode

    if namespace is None:
        namespace = sys._getframe(1).f_globals
    mode = current_mode()
    exercise = get(exercise_id)
    why = f"{contained.PROCESS_ENV}=notebook"
    if contained.use_child(mode):
        try:
            with CheckProgress(exercise_id, mode) as shown:
                result = contained.check_in_child(exercise, namespace, mode, seed=seed,
                                                  on_case=shown.case)
            return result_in_cell_terms(result)
        except contained.NotContained as exc:
            why = f"a checking process cannot be used: {exc}"
            print(f"{exercise_id}: this check runs in the notebook's own process, because "
                  f"{why}", file=sys.stderr)
    with gpu_hang_notice(exercise_id, mode, why=why), CheckProgress(exercise_id, mode) as shown:
        return result_in_cell_terms(
            check_exercise(exercise, namespace, mode, seed=seed, on_case=shown.case))


def _prewarm_in_notebook() -> None:
    """In a Jupyter kernel whose lesson chose its mode (``import workbook`` comes first),
    start the checking process now, while the student reads (see :mod:`grader.contained`)."""
    workbook = sys.modules.get("workbook")
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if workbook is None or getattr(shell, "kernel", None) is None:
        return
    try:
        from grader import contained

        contained.prewarm(workbook.MODE)
    except Exception as exc:  # noqa: BLE001  (a check started later says what is wrong)
        print(f"grader: the checking process did not start ({exc})", file=sys.stderr)


def explain_rules(lesson: str) -> None:
    """Print the performance rules the GPU grader applies to a lesson's exercises, and for
    an exercise without any, why it has none."""
    from grader.exercises import LESSONS

    for exercise in LESSONS[lesson]:
        if not exercise.metric_rules and exercise.no_metric_rule:
            print(f"{exercise.id}: no performance rule: {exercise.no_metric_rule}")
        for rule in exercise.metric_rules:
            print(f"{exercise.id}: {rule.describe()}\n    why: {rule.why} "
                  f"(tuned on {rule.tuned_on})")


_prewarm_in_notebook()
_gpu_compile.warm_up_in_notebook()  # simulator: the kernels also compile for sm_90

__all__ = ["check", "explain_rules"]
