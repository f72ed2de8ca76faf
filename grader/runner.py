"""Child process that grades a notebook's exercises: ``python -m grader.runner JOB.json EVENTS``.

One process works through a list of exercises in notebook order: it executes the
notebook's graded cells one after another, and at each exercise's last cell it
does the job's action for that exercise:

* ``check``    -- run the exercise's tests (what ``grader check`` scores);
* ``sanitize`` -- the same on the small cases only, with markers on stdout so that
  the compute-sanitizer report around the process can be split by exercise;
* ``profile``  -- the exercise's profiling launches for the student's cells and for
  the reference solution's, each in a profiled segment whose kernels are recorded by
  name (or, with the job's ``markers``, opened by a marker kernel); the parent runs this
  process under ncu and splits its report by segment (see :mod:`grader.profiling`).

Each step is written to EVENTS as one JSON line (``start``, ``result``,
``segment``) the moment it happens, so that the parent (:mod:`grader.session`) knows
which exercise hung or crashed the process, and can start a fresh one for the
rest. Kernels are compiled once per process instead of once per exercise.
"""

from __future__ import annotations

import functools
import json
import linecache
import os
import re
import signal
import sys
from contextlib import contextmanager

from grader.exercise import describe_exception
from grader.results import ERROR, FAILED, PASSED, TIMEOUT, ExerciseResult

_MAGIC = re.compile(r"^\s*[%!]")
MARKER = "@@workbook-exercise"  # stdout line before and after each sanitized exercise
MARKER_KERNEL = "workbook_profile_marker"  # opens each profiled segment of a marked job


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


def error_result(exercise, message: str, mode: str, status: str = ERROR) -> ExerciseResult:
    return ExerciseResult(id=exercise.id, title=exercise.title, status=status, score=0.0,
                          max_score=exercise.points, messages=[message], mode=mode)


class Program:
    """A notebook's graded cells, executed in order up to each exercise in turn.

    ``advance(exercise_id)`` runs the cells up to that exercise's last cell. A cell
    of the exercise itself, or a setup cell, that raises makes the exercise an error;
    a cell of another exercise that raises or runs over EARLIER_CELL_SECONDS is skipped
    with a note (its names are missing), as the notebook would be without it.
    """

    def __init__(self, cells: list[dict]):
        self.cells = cells
        self.position = 0
        self.namespace: dict = {"__name__": "__main__"}
        self.notes: list[str] = []
        self.broken: str | None = None  # why no later exercise can run (a setup cell failed)

    def checkpoint(self, exercise_id: str) -> int:
        """Index (in ``cells``) just past the exercise's last cell."""
        last = [i for i, c in enumerate(self.cells) if c.get("exercise_id") == exercise_id]
        return last[-1] + 1 if last else self.position

    def advance(self, exercise_id: str) -> str | None:
        """Execute the cells up to ``exercise_id``; the error message if it cannot be run."""
        if self.broken:
            return self.broken
        own_error = None
        for cell in self.cells[self.position:self.checkpoint(exercise_id)]:
            self.position += 1
            essential = cell["role"] == "setup" or cell.get("exercise_id") == exercise_id
            try:
                if essential:
                    exec_cell(cell, self.namespace)
                else:
                    with time_limit(EARLIER_CELL_SECONDS):
                        exec_cell(cell, self.namespace)
            except BaseException as exc:  # a student's cell may raise anything, SystemExit too
                where = f"cell {cell['index']} ({cell['role']} {cell.get('exercise_id') or ''})"
                if cell["role"] == "setup":
                    self.broken = f"{where} raised an exception:\n{describe_exception(exc)}"
                    return self.broken
                if essential:
                    own_error = own_error or (f"{where} raised an exception:\n"
                                              f"{describe_exception(exc)}")
                else:
                    self.notes.append(f"note: {where} was skipped ({type(exc).__name__}: "
                                      f"{exc}); names it defines are missing")
        if own_error:  # later exercises see the cell as skipped
            self.notes.append(f"note: the cell of {exercise_id} raised an exception; "
                              "names it defines are missing")
        return own_error


class Events:
    """The JSON-lines file through which the parent follows this process."""

    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 (lives as long as the process)

    def emit(self, **event) -> None:
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())


def run_job(job: dict, events: Events) -> None:
    """Do ``job["action"]`` for each of ``job["exercise_ids"]``, in order: a notebook's
    exercises in notebook order, or several notebooks' in turn (:mod:`grader.job_units`),
    each notebook's cells run in a namespace of its own, its kernels in its own cache."""
    os.environ["WORKBOOK_MODE"] = job["mode"]
    import workbook  # noqa: F401  (chooses sim/gpu before numba.cuda is imported)
    from grader import kernel_cache
    from grader.job_units import notebook_of, split_unit

    action = job.get("action", "check")
    if job["mode"] == "gpu":
        from grader import lazy_imports

        lazy_imports.skip_blas_probe()  # scipy.linalg: 0.1-0.5 s per process, for nothing
        if action != "profile":  # a profile job's programs name their own caches
            _use_kernel_cache(notebook_of(job, 0)[1])
        kernel_cache.install()  # where grade_notebook made one for this notebook
    from grader.exercises import get
    from grader.gpu_compile.step import warm_up

    if action == "profile":
        profile_job(job, events)
        return
    if action == "check":
        warm_up(job["mode"])  # the GPU compiler starts while the cells run (simulator)
    programs: dict[int, Program] = {}
    for name in job["exercise_ids"]:
        k, exercise_id = split_unit(name)
        cells, kernels = notebook_of(job, k)
        if k not in programs:
            programs[k] = Program(cells)
        student = programs[k]
        if job["mode"] == "gpu":
            _use_kernel_cache(kernels)
        exercise = get(exercise_id)
        events.emit(start=name)
        unneeded: dict[str, str] = {}
        error = student.advance(exercise_id)
        if error:  # the notebook's setup is not the student's fault, their own cell is
            result = error_result(exercise, error, job["mode"],
                                  ERROR if student.broken else FAILED)
        else:
            if action == "sanitize":
                if job["mode"] == "gpu":  # then its kernels load, not compile
                    kernel_cache.wait_for_check(exercise_id)
                why = kernel_cache.unneeded_tools(exercise_id).get(job.get("tool"))
                if why:  # the check read its kernels: nothing there for this tool
                    events.emit(unneeded=[name, why])
                    continue
            if action == "check" and job["mode"] == "gpu":
                result, unneeded = check_reading_kernels(exercise, student.namespace, job,
                                                         events, name)
            else:
                result = check(exercise, student.namespace, job, events, name)
        result.messages.extend(student.notes)
        events.emit(result=result.to_dict(), **({"unit": name} if name != exercise_id else {}),
                    **({"unneeded_tools": unneeded} if unneeded else {}))
        if restart_after(result):
            return


def _use_kernel_cache(folder: str | None) -> None:
    """Point this process's kernel cache at ``folder`` (None: leave the environment's)."""
    from grader import kernel_cache

    if folder:
        os.environ[kernel_cache.CACHE_ENV] = folder


def job_programs(job: dict) -> list[tuple[str, str | list[str] | None, list[dict], str | None]]:
    """The programs a profile job runs, each ``(label, exercises, cells, kernels)``: the
    job's ``programs``, else the student's ``cells`` and the ``reference_cells``.
    ``exercises`` is None (the program is profiled for each of the job's exercises), an
    exercise id or a list of them (for those only); ``kernels`` (optional) is the folder
    of the program's kernel cache (:mod:`grader.kernel_cache`; "" for none), for a job
    that profiles several notebooks, each with its own."""
    if "programs" in job:
        return [(*p, None) if len(p) == 3 else tuple(p) for p in job["programs"]]
    found = [("student", None, job["cells"], None)]
    if job.get("reference_cells"):
        found.append(("reference", None, job["reference_cells"], None))
    return found


def profiles(exercises: str | list[str] | None, exercise_id: str) -> bool:
    """Whether a program with ``exercises`` (see :func:`job_programs`) profiles the exercise."""
    if exercises is None:
        return True
    return exercise_id in ([exercises] if isinstance(exercises, str) else exercises)


def profile_job(job: dict, events: Events) -> None:
    """Make each exercise's profiling launches for every program that profiles it, in the
    job's order: one process (one ncu run) for a notebook and its reference, or for every
    variant of a lesson (``benchmarks/metric_rules.py``).

    Two passes. The first runs each program up to each exercise and makes the exercise's
    profiling launches once, unprofiled: it compiles the kernels, builds the inputs and
    finds the programs that cannot run. The second makes them again inside the profiled
    segments, back to back. ncu lets one process at a time profile: a process holds the
    GPU's counters from its first profiled launch until it exits (measured on an H100:
    four processes that each profile three kernels finish one after another, however
    little of their time is spent in the profiled launches), so everything the first pass
    does is work that other notebooks' profile stages can overlap."""
    from grader import kernel_cache, reference_profiles
    from grader.exercises import get

    markers = bool(job.get("markers"))
    programs = [(label, only, Program(cells), kernels)
                for label, only, cells, kernels in job_programs(job)]
    gpu = reference_profiles.gpu_identity() if reference_profiles.cache_dir() else None
    ready = []  # (exercise, label, namespace) of each segment to profile, in order
    for exercise_id in job["exercise_ids"]:
        exercise = get(exercise_id)
        events.emit(start=exercise_id)
        for label, only, program, kernels in programs:
            if not profiles(only, exercise_id):
                continue
            if gpu and label == "reference" and _stored_reference(exercise, program, gpu,
                                                                   events, markers):
                continue
            if kernels is not None:  # the kernels its cells define load from its own cache
                os.environ[kernel_cache.CACHE_ENV] = kernels
            namespace = prepare_segment(exercise, label, program, events)
            if namespace is not None:
                ready.append((exercise, label, namespace))
    _profile_segments(ready, job, events)


def _profile_segments(ready: list, job: dict, events: Events) -> None:
    """The second pass of :func:`profile_job`: each prepared segment ``(exercise, label,
    namespace)`` in ncu's profiled range, with its event.

    The event (``segment``) names the exercise, the program and the launches of its
    kernels before the measured one (``profile_skip``, see
    :func:`grader.profiling.segment_skip`), then the names of the kernels the segment
    launched inside the range, those of the job's ``kernels`` (ncu's filter; all without
    it), by which the parent splits ncu's report; it comes after the segment. A job with
    ``markers`` (the parent's fallback) opens each segment with the marker kernel instead,
    and the event, of three fields, comes before it."""
    from grader.ncu import profiled_names
    from grader.profiled_range import recorded_launches

    marker = _marker_kernel() if job.get("markers") and ready else None
    for k, (exercise, label, namespace) in enumerate(ready):
        if k == 0 or ready[k - 1][0] is not exercise:
            events.emit(start=exercise.id)  # a crash from here on is this exercise's
        segment = [exercise.id, label, exercise.profile_skip]
        if marker is not None:
            events.emit(segment=segment)
        failure, launched = None, []
        try:
            if marker is not None:
                _profiled_segment(exercise, namespace, marker)
            else:
                with recorded_launches() as launched:
                    _profiled_segment(exercise, namespace)
        except Exception as exc:  # noqa: BLE001  (reported; the other segments go on)
            failure = describe_exception(exc)
        if marker is None:
            events.emit(segment=[*segment, profiled_names(launched, job.get("kernels"))])
        if failure is not None:
            events.emit(failed=[exercise.id, label], why=failure)


def _stored_reference(exercise, program: Program, gpu: str, events: Events,
                      markers: bool = False) -> bool:
    """Whether the reference's profile of the exercise is stored for this GPU (see
    :mod:`grader.reference_profiles`): then it is passed on, else its key is, for the
    parent to store what ncu measures."""
    from grader import reference_profiles
    from grader.profiled_range import MARKED_SEGMENTS, RECORDED_SEGMENTS
    from grader.profiling import metric_names

    cells = program.cells[:program.checkpoint(exercise.id)]
    key = reference_profiles.profile_key(exercise, metric_names([exercise]), cells, gpu,
                                         MARKED_SEGMENTS if markers else RECORDED_SEGMENTS)
    stored = reference_profiles.load(key)
    if stored is not None:
        events.emit(stored=[exercise.id, "reference"], metrics=stored)
        return True
    events.emit(store_as=[exercise.id, "reference", key])
    return False


def restart_after(result: ExerciseResult) -> bool:
    """Whether the rest should run in a fresh process: a kernel that failed may have left
    a broken CUDA context, stray threads in the simulator, or memory it wrote past its
    arrays."""
    return result.status in (FAILED, ERROR, TIMEOUT)


TIMEOUT_SETTING = "--timeout"  # what bounds a case in the grader (the parent's option)


def check(exercise, namespace: dict, job: dict, events: Events | None = None,
          name: str | None = None) -> ExerciseResult:
    """Check one exercise; each case's start is an event (the parent's sign of progress),
    and in the simulator each case is bounded by the job's ``timeout``. ``name``: the
    exercise's name in the job (:mod:`grader.job_units`), which a sanitize job's markers
    carry."""
    from grader.exercise import check_exercise

    def on_case(k: int, n: int, case) -> None:
        if events is not None:
            events.emit(case=[exercise.id, k, n])

    options = {"on_case": on_case, "case_seconds": job.get("timeout"),
               "timeout_setting": TIMEOUT_SETTING if job.get("timeout") else None}
    if job.get("action") == "sanitize":  # under compute-sanitizer: small cases only
        from grader.sanitizer import small_cases

        exercise = small_cases(exercise, job["mode"])
        print(f"{MARKER} begin {name or exercise.id}", flush=True)
        try:
            return check_exercise(exercise, namespace, job["mode"], seed=job.get("seed"),
                                  **options)
        finally:
            _synchronize()
            print(f"{MARKER} end {name or exercise.id}", flush=True)
    return check_exercise(exercise, namespace, job["mode"], seed=job.get("seed"), **options)


def check_reading_kernels(exercise, namespace: dict, job: dict, events: Events,
                          name: str | None = None) -> tuple[ExerciseResult, dict[str, str]]:
    """:func:`check` on a GPU, and the compute-sanitizer tools that have nothing to look for in
    the kernels it launched (:func:`grader.kernel_code.unneeded_tools`), with the reasons."""
    from grader.kernel_code import code_of, launched_kernels, unneeded_tools

    with launched_kernels() as kernels:
        result = check(exercise, namespace, job, events, name)
    return result, unneeded_tools([code_of(kernel) for kernel in kernels.values()])


def _synchronize() -> None:
    """Wait for the GPU, so that the tool's reports of this exercise come before its end
    marker; a broken context is reported by the exercise's own result."""
    from numba import cuda

    try:
        if not cuda.config.ENABLE_CUDASIM:
            cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass


def prepare_segment(exercise, label: str, program: Program, events: Events) -> dict | None:
    """Run ``program`` up to the exercise and make its profiling launches once, unprofiled
    (they compile its kernels and build its inputs); the namespace to profile it in, or
    None (reported) if it cannot run. The namespace is a copy: later cells of the program
    that rebind a name do not change what this exercise's profiling launches call."""
    from grader.stubs import is_stub

    problem = program.advance(exercise.id)
    stubs = [n for n in (exercise.entry, *exercise.needs)
             if is_stub(program.namespace.get(n))]
    if problem or stubs:
        events.emit(skipped=[exercise.id, label], why=problem or
                    f"{', '.join(stubs)} still "
                    f"{'raises' if len(stubs) == 1 else 'raise'} NotImplementedError")
        return None
    namespace = dict(program.namespace)
    try:
        _warm_up(exercise, namespace)
    except Exception as exc:  # noqa: BLE001  (reported; the other segments go on)
        events.emit(failed=[exercise.id, label], why=describe_exception(exc))
        return None
    return namespace


def _warm_up(exercise, namespace: dict) -> None:
    from numba import cuda

    exercise.profile(namespace)
    cuda.synchronize()


def _profiled_segment(exercise, namespace: dict, marker=None) -> None:
    """The exercise's profiling launches (after the ``marker`` kernel, if given) inside ncu's
    profiled range (with ``--profile-from-start off`` only its launches are profiled); the
    warm-up launches of the profile function leave the range
    (:func:`grader.profiled_range.unprofiled`)."""
    from numba import cuda

    from grader.profiled_range import profiled_segment

    with profiled_segment():
        if marker is not None:
            marker[1, 1](0)
        exercise.profile(namespace)
        cuda.synchronize()


_MARKER = []


def workbook_profile_marker(unused):
    """The marker kernel's body. It takes an argument: numba's mangled name of a kernel
    without parameters does not demangle, and ncu then reports (and filters) it by its
    mangled name, so no segment of the report would open."""


def _marker_kernel():
    """An empty kernel whose launches separate the profiled segments in the ncu report of a
    job with ``markers``; compiled, and launched once, outside the profiled range."""
    if not _MARKER:
        from numba import cuda

        kernel = cuda.jit(workbook_profile_marker)
        kernel[1, 1](0)  # compiled outside the profiled segments
        cuda.synchronize()
        _MARKER.append(kernel)
    return _MARKER[0]


def main(argv: list[str], leave_at_once: bool = False) -> int:
    """Run the job of ``argv`` (its file, then the events file); with ``leave_at_once``
    (the process's own entry point), the process then ends as :func:`ending` says."""
    from grader import lazy_imports

    lazy_imports.install()  # the notebook's pyplot loads only if a graded cell plots
    job_path, events_path = argv
    with open(job_path) as f:
        job = json.load(f)
    run_job(job, Events(events_path))
    if leave_at_once:
        _leave(ending(job))
    return 0


AT_ONCE = "at once"  # os._exit: no exit handler runs
C_EXIT = "C exit"  # the C library's exit(): the native libraries' exit handlers run
TEARDOWN = "teardown"  # the interpreter's own end (where the C library's exit() is not found)


def ending(job: dict) -> str:
    """How the process ends once ``job`` is done. Where it can, it skips the interpreter's
    teardown (numba's modules, kernels and buffers freed one by one), which no one waits for:

    * a check ends at once (``os._exit``): on an H100 machine (2026-11-26) a lesson-02 check
      process took 0.7-3.9 s from its last event to its end, 0.3 s on average without it;
    * a job under compute-sanitizer or ncu ends through the C library's ``exit()``: the tool's
      library in the process still runs its exit handlers and hands over its report (with
      ``os._exit`` ncu lost the measurements of a shared profile run now and then), the CUDA
      driver still closes its context, and Python's teardown is skipped. Measured on an
      H200 machine with 16 cores (2026-11-29, lesson 02, 24 notebooks, default settings):
      124.2 and 124.3 exercises a minute against 113.4 and 113.1 with the teardown, in
      turns in one call, every verdict right; one ncu run over two notebooks 7.1-7.2 s
      against 8.3-8.5 s (``benchmarks/results/h200-2026-11-29-batch-process-exit/``)."""
    if job.get("action", "check") == "check":
        return AT_ONCE
    return C_EXIT if _c_exit() is not None else TEARDOWN


@functools.cache
def _c_exit():
    """The C library's ``exit`` (None where ctypes cannot find it, as on Windows), looked up
    once: :func:`ending` asks whether it is there, :func:`_leave` calls it."""
    import ctypes

    try:
        return ctypes.CDLL(None).exit
    except (OSError, AttributeError, TypeError):
        return None


def _leave(how: str) -> None:
    """End the process as :func:`ending` chose, its output flushed first."""
    if how == TEARDOWN:
        return
    _stop_children()
    sys.stdout.flush()
    sys.stderr.flush()
    if how == AT_ONCE:
        os._exit(0)
    _c_exit()(0)


def _stop_children() -> None:
    """Stop the processes this one started (a sim-mode check's GPU-compile worker), as the
    Python exit handlers that both endings skip would: none outlives the job, and their CPU
    time counts towards this process's when its parent waits for it."""
    client = sys.modules.get("grader.gpu_compile.client")
    if client is not None:
        client.stop_compiler()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], leave_at_once=True))


__all__ = ["MARKER", "MARKER_KERNEL", "PASSED", "Program", "cell_filename", "exec_cell",
           "definitions_namespace", "run_job", "strip_magics"]
