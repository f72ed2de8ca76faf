"""Grade notebooks: one pipeline of four stages over the exercises of a notebook.

:func:`grade_notebook` reads top to bottom: :func:`prepare` does its step 1,
:func:`run_stages` step 2, :func:`profile_and_report` steps 3 and 4. ``grader batch`` takes
a task's two or three notebooks through steps 2 to 4 together:

1. select the exercises to grade (the lesson's, or those named), in notebook order;
2. run three stages side by side (:func:`side_by_side`):

   * check (:mod:`grader.stages.check`) -- the exercises' tests in the chosen mode (every
     mode), each notebook in processes of its own;
   * sanitize (:mod:`grader.stages.sanitize`) -- NVIDIA's compute-sanitizer tools
     ``memcheck``, ``racecheck`` and ``synccheck`` on the small cases (gpu mode), one run
     of each tool for the notebooks together;
   * simulate (:mod:`grader.stages.simulate`) -- the simulator's cases with the workbook's
     sanitizer (gpu mode), which sees what the GPU tools cannot (races on global memory
     within a block, reads of memory nobody wrote), one process for the notebooks together;

   an exercise's tools cannot change its check, so they run beside it; they wait until the
   check has produced a result they can judge (a kernel that ran to the end), and their
   findings amend only such results;
3. profile (:mod:`grader.stages.profile`) -- one ncu run for the metric rules of the
   exercises that passed (gpu mode), after the notebooks' other stages;
4. finish each result (metric rules not assessed, notes on skipped stages) into the report.

Each exercise's time is recorded by phase: ``check``, ``memcheck``, ``racecheck``,
``synccheck``, ``simulator``, ``profile``. On a GPU the stages' processes share the
notebook's compiled kernels (:mod:`grader.kernel_cache`). Each stage runs its processes
through :mod:`grader.session`: a hang or crash costs the exercise it happened in, never the
others.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from grader import exercises as catalogue
from grader import kernel_cache
from grader import sanitizer as tools
from grader.job_units import Notebook
from grader.notebook import LessonNotebook, NotebookError
from grader.profiling import apply_metrics, not_assessed
from grader.results import FAILED, NOT_IMPLEMENTED, PASSED, ExerciseResult
from grader.stages import PhaseCallback, check, placeholder, profile, sanitize, simulate

# seconds a test case may run (--timeout): the simulator stops it and says what each thread
# was doing; on a GPU its process is killed
DEFAULT_TIMEOUT = {"sim": 20.0, "gpu": 300.0}
SKIPPED_METRICS = "skipped on request (--no-metrics)"
SIM_METRICS = "simulator mode has no hardware counters"
SKIPPED_SANITIZERS = ("compute-sanitizer and the simulator pass: not run (skipped on request, "
                      "--no-sanitizers)")


@dataclass
class NotebookReport:
    path: str
    lesson: str
    mode: str
    exercises: list[ExerciseResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole notebook

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.exercises)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exercises"] = [e.to_dict() for e in self.exercises]
        d.update(score=self.score, max_score=self.max_score, passed=self.passed)
        return d


def selected_exercises(notebook: LessonNotebook, only: Sequence[str] = ()) -> list:
    """The lesson's exercises to grade: all of them, or those named in ``only``."""
    if notebook.lesson not in catalogue.LESSONS:
        raise NotebookError(f"{notebook.path}: unknown lesson {notebook.lesson!r}")
    declared = catalogue.LESSONS[notebook.lesson]
    unknown = sorted(set(only) - {e.id for e in declared})
    if unknown:
        known = ", ".join(e.id for e in declared)
        raise NotebookError(f"{notebook.path}: lesson {notebook.lesson} has no exercise "
                            f"{', '.join(unknown)}; its exercises are {known}")
    return [e for e in declared if not only or e.id in only]


def exercises_in(notebook: LessonNotebook, only: Sequence[str]) -> list[str] | None:
    """The exercises of ``only`` that the notebook's lesson declares ([] for all of them),
    or None when ``only`` names none of them; an id no lesson declares is an error."""
    if not only:
        return []
    try:
        lessons = {catalogue.get(i).lesson for i in only}
    except catalogue.UnknownExercise as exc:
        raise NotebookError(str(exc).strip("'\"")) from None
    mine = [i for i in only if catalogue.get(i).lesson == notebook.lesson]
    return mine if notebook.lesson in lessons else None


def grade_notebook(
    notebook: LessonNotebook,
    mode: str,
    timeout: float | None = None,
    seed: int | None = None,
    on_result: Callable[[ExerciseResult], None] | None = None,
    *,
    exercises: Sequence[str] = (),
    metrics: bool = True,
    sanitizers: bool = True,
    on_phase: PhaseCallback | None = None,
) -> NotebookReport:
    """Grade the lesson's exercises (or those named in ``exercises``) in ``notebook``."""
    with kernel_cache.for_notebook(mode):  # the stages' processes share compiled kernels
        staged = prepare(notebook, mode, timeout, seed, exercises=exercises, metrics=metrics,
                         sanitizers=sanitizers)
        run_stages([staged], on_phase)
        (report,) = profile_and_report([staged], on_result, on_phase)
    return report


@dataclass
class Staged:
    """A notebook on its way through the pipeline: its exercises and options (step 1), then
    its results after the stages that run side by side (step 2); what the profile stage and
    the report still need (a batch profiles two or three notebooks in one ncu run)."""

    report: NotebookReport  # its warnings so far, no exercises yet
    chosen: list[str]  # the exercises to report, in the lesson's order
    order: list[str]  # those with a cell, in notebook order
    cells: list[dict]
    timeout: float
    seed: int | None
    metrics: bool
    sanitizers: bool
    kernels: str | None  # the notebook's kernel cache (grader.kernel_cache), if it has one
    results: dict[str, ExerciseResult] = field(default_factory=dict)


def prepare(
    notebook: LessonNotebook,
    mode: str,
    timeout: float | None = None,
    seed: int | None = None,
    *,
    exercises: Sequence[str] = (),
    metrics: bool = True,
    sanitizers: bool = True,
) -> Staged:
    """Step 1 of :func:`grade_notebook`: the exercises to grade, those chosen that have a
    cell in notebook order, and their program; its kernel cache is this process's (set by
    :func:`grader.kernel_cache.for_notebook`)."""
    chosen = selected_exercises(notebook, exercises)
    report = NotebookReport(str(notebook.path), notebook.lesson, mode)
    declared_ids = {e.id for e in catalogue.LESSONS[notebook.lesson]}
    present = notebook.exercise_ids()
    report.warnings.extend(f"cell for unknown exercise {u!r} ignored"
                           for u in sorted(set(present) - declared_ids))
    order = [i for i in present if i in {e.id for e in chosen}]  # notebook order
    cells = ([asdict(c) for c in notebook.program_for(order[-1])] if order else [])
    return Staged(report, [e.id for e in chosen], order, cells, timeout or DEFAULT_TIMEOUT[mode],
                  seed, metrics, sanitizers, kernel_cache.cache_dir())


def run_stages(staged: list[Staged], on_phase: PhaseCallback | None = None) -> None:
    """Step 2 of :func:`grade_notebook` for one notebook or more, prepared with the same
    mode and options (a ``grader batch`` task): check, sanitize and simulate them side by
    side, each notebook's results into its :class:`Staged`."""
    start = time.monotonic()
    first = staged[0]
    notebooks = [(s.order, s.cells, s.kernels) for s in staged]
    progress = on_phase or (lambda phase, exercise_id: None)
    outcome = side_by_side(notebooks, first.report.mode, first.timeout, first.seed,
                           first.sanitizers, progress)
    shared = (time.monotonic() - start) / len(staged)
    for s, results in zip(staged, outcome):
        s.results = results
        s.report.seconds = shared


def profile_and_report(staged: list[Staged],
                       on_result: Callable[[ExerciseResult], None] | None = None,
                       on_phase: PhaseCallback | None = None) -> list[NotebookReport]:
    """Steps 3 and 4 of :func:`grade_notebook` for one or more notebooks: profile the
    exercises that passed (several notebooks of a lesson in one ncu run, each with its own
    kernel cache), then finish each result into its notebook's report."""
    start = time.monotonic()
    progress = on_phase or (lambda phase, exercise_id: None)
    # 3. profile the exercises that passed
    profiled = [s for s in staged if s.report.mode == "gpu" and s.metrics]
    if profiled:
        passed = [[i for i in s.order if i in s.results and s.results[i].passed]
                  for s in profiled]
        notebooks = [(ids, s.cells, s.kernels) for ids, s in zip(passed, profiled)]
        for s, outcome in zip(profiled, profile.run(notebooks, profiled[0].timeout, progress)):
            for exercise_id, measured in outcome.items():
                profile.apply(s.results[exercise_id], measured)
    shared = (time.monotonic() - start) / len(staged)
    return [_report(s, shared, on_result) for s in staged]


def _report(staged: Staged, profile_seconds: float,
            on_result: Callable[[ExerciseResult], None] | None) -> NotebookReport:
    """Step 4: each result finished into the notebook's report."""
    report, results = staged.report, staged.results
    mode, metrics = report.mode, staged.metrics
    for exercise in map(catalogue.get, staged.chosen):
        result = results.get(exercise.id) or placeholder(
            exercise, NOT_IMPLEMENTED, f"no exercise cell for {exercise.id} in the notebook",
            mode)
        finish(result, exercise, mode, metrics, staged.sanitizers)
        report.exercises.append(result)
        if on_result:
            on_result(result)
    if mode == "gpu" and not metrics:
        report.warnings.append(f"metric rules were not assessed: {SKIPPED_METRICS}")
    if mode == "gpu" and not staged.sanitizers:
        report.warnings.append(SKIPPED_SANITIZERS)
    report.seconds = round(report.seconds + profile_seconds, 3)
    return report


PROCESSES_ENV = "WORKBOOK_GRADER_PROCESSES"  # processes per phase and notebook


def processes_per_phase(exercises: int) -> int:
    """How many processes share each phase's exercises: one per six CPU cores (each phase
    runs beside the others), at most three; ``WORKBOOK_GRADER_PROCESSES`` overrides."""
    text = os.environ.get(PROCESSES_ENV)
    wanted = int(text) if text else min(3, (os.cpu_count() or 1) // 6)
    return max(1, min(wanted, exercises))


def side_by_side(notebooks: list[Notebook], mode: str, timeout: float, seed: int | None,
                 sanitizers: bool, progress: PhaseCallback) -> list[dict[str, ExerciseResult]]:
    """The check, and in gpu mode the sanitizer tools and the simulator pass, side by side,
    each stage's exercises shared among :func:`processes_per_phase` processes; for each
    notebook, the check's results, amended by the tools where they can judge them.

    Each notebook is checked in processes of its own; the tools and the simulator pass work
    through the notebooks in turn, one process per tool for them all (a process's start,
    its CUDA context and the tool's own, is most of what a tool costs)."""
    outcome: list[dict[str, ExerciseResult]] = [{} for _ in notebooks]
    if not any(order for order, _, _ in notebooks):
        return outcome
    gpu_tools = mode == "gpu" and sanitizers
    tool_path = tools.find_tool() if gpu_tools else None
    tool_names = tools.selected_tools() if tool_path else ()
    count = processes_per_phase(max(len(order) for order, _, _ in notebooks))
    # each part stays in notebook order
    parts = [[(order[i::count], cells, kernels) for order, cells, kernels in notebooks]
             for i in range(count)]
    gate = _Gate()

    def on_check_result(folder: str | None):
        def mark(event: dict) -> None:
            # the tools may load its kernels, and leave out those with nothing to look for
            kernel_cache.mark_checked(event["result"]["id"], event.get("unneeded_tools"),
                                      folder)
            gate.result(event)

        return mark

    threads = (len(notebooks) + len(tool_names) + gpu_tools) * count
    with ThreadPoolExecutor(max_workers=threads) as pool:
        checked = [(k, pool.submit(check.run, [notebook], mode, timeout, seed, progress,
                                   on_check_result(notebook[2])))
                   for part in parts for k, notebook in enumerate(part) if notebook[0]]
        simulated = ([pool.submit(gate.then, simulate.run, part, timeout, seed, progress)
                      for part in parts] if gpu_tools else [])
        tool_runs = {tool: [pool.submit(gate.then, sanitize.run, part, timeout, seed,
                                        progress, tool_path, tool) for part in parts]
                     for tool in tool_names}
        try:
            for k, future in checked:
                outcome[k].update(future.result()[0])
        finally:
            for _, _, folder in notebooks:
                kernel_cache.mark_checked(None, folder=folder)
            gate.close()
        sanitized = {tool: _merged(futures, len(notebooks)) for tool, futures in tool_runs.items()}
        sim_results = _merged(simulated, len(notebooks))
    for k, results in enumerate(outcome):
        for exercise_id, result in results.items():
            if not tools.qualifies(result):
                continue
            if gpu_tools:
                sanitize.apply(result, tool_path,
                               {tool: sanitized[tool][k][exercise_id] for tool in tool_names})
            if exercise_id in sim_results[k]:
                simulate.apply(result, sim_results[k][exercise_id])
    return outcome


class _Gate:
    """Holds the sanitizer tools and the simulator pass back until the check has produced a
    result they can judge (a kernel that ran to the end): for a notebook of stubs they never
    start, for a finished one they start with the first result and run beside the check."""

    def __init__(self):
        self.event = threading.Event()
        self.worthwhile = False

    def result(self, event: dict) -> None:
        if event["result"]["status"] in (PASSED, FAILED):
            self.worthwhile = True
            self.event.set()

    def close(self) -> None:
        self.event.set()

    def then(self, function, *args):
        """``function(*args)`` once the check has a result worth judging, else None."""
        self.event.wait()
        return function(*args) if self.worthwhile else None


def _merged(futures, count: int) -> list[dict]:
    """The outcomes of a stage's parts (a dict per notebook each, or None where the stage
    did not run), merged: a dict per notebook."""
    merged: list[dict] = [{} for _ in range(count)]
    for future in futures:
        for k, found in enumerate(future.result() or ()):
            merged[k].update(found)
    return merged


def finish(result: ExerciseResult, exercise, mode: str, metrics: bool, sanitizers: bool) -> None:
    """Metric sections for exercises that were not profiled, and notes on skipped phases."""
    if exercise.metric_rules and not result.metrics:
        if mode != "gpu":  # the same for every exercise: the report says it once
            result.metrics = not_assessed(exercise, SIM_METRICS)
        elif not metrics:
            apply_metrics(result, exercise, not_assessed(exercise, SKIPPED_METRICS))
        elif result.status == FAILED and result.cases and all(c.passed for c in result.cases):
            apply_metrics(result, exercise, not_assessed(
                exercise, "the exercise failed a sanitizer or simulator check"))
        else:
            apply_metrics(result, exercise, not_assessed(exercise, "the output is not correct yet"))
    if mode == "gpu" and not sanitizers and tools.qualifies(result):
        result.messages.append(SKIPPED_SANITIZERS)


def run_in_subprocess(exercise, job: dict, timeout: float) -> ExerciseResult:
    """Check one exercise in a child process (``job``: mode, exercise_id, cells, seed)."""
    (results,) = check.run([([exercise.id], job["cells"], None)], job["mode"], timeout,
                           job.get("seed"))
    return results[exercise.id]
