"""Grade a whole class: ``grader batch SUBMISSIONS --out OUT``.

One job: find the submissions, grade each (student, notebook) as one task on a Dask
cluster, write each result the moment it arrives, and keep the class summary up to
date.

Layouts recognised in SUBMISSIONS (a student's id is the name of the file or folder):

* ``<student>.ipynb`` -- one notebook per student, directly in the folder;
* ``<student>/**/*.ipynb`` -- one folder per student, notebooks at any depth: nbgrader's
  ``submitted/<student>/<assignment>/<notebook>.ipynb`` (pass the ``submitted`` folder),
  Gradescope's export ``submission_<id>/...`` (the id is ``submission_<id>``).

Hidden entries (``.ipynb_checkpoints``, ``.DS_Store``) and files that are not notebooks
(``timestamp.txt``, ``submission_metadata.yml``) are ignored; a student folder without
a notebook is reported as an error for that student.

Outputs in OUT (written by :mod:`grader.batch_reports`), each written to a temporary
file and renamed into place (a reader, or an interrupted run, never sees half a file):

* ``<student>.json`` -- the grader's JSON report of the student's notebooks (README,
  "JSON report"), plus ``student``, ``errors`` and ``skipped``; each notebook carries
  ``submission``: its file and the fingerprint it was graded under;
* ``<student>.gradescope.json`` -- Gradescope's ``results.json`` for the student;
* ``<student>.feedback.md`` -- for the student: each exercise that did not pass, with
  the grader's messages;
* ``summary.csv`` and ``summary.md`` -- a row per student, a column per exercise, and
  (markdown) why exercises failed; rewritten after every result.

A notebook's fingerprint hashes its content, the grading options and the grader's
version: a re-run grades only what is new or changed, and retries errors. The local
cluster is sized by :mod:`grader.batch_cluster`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

from grader.batch_cluster import StopGradingProcesses, local_cluster, local_worker_env
from grader.batch_profiles import (
    PROFILE,
    STAGE,
    ProfileQueue,
    cluster_roles,
    profile_staged,
    stage_submission,
)
from grader.batch_reports import (
    PASSED,
    ClassSummary,
    Entry,
    describe_students,
    entries_from_report,
    feedback_markdown,
    first_line,
    gradescope_results,
    student_report,
    write_atomic,
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


class BatchError(ValueError):
    """The batch cannot start (bad folder, bad options); the message says why."""


# ---------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Submission:
    """One notebook of one student; ``path`` is None when the student handed in none."""

    student: str
    file: str  # relative to the student's folder (the file name for a bare notebook)
    path: Path | None

    @property
    def key(self) -> str:
        return f"{self.student}/{self.file}"


def _hidden(parts: Iterable[str]) -> bool:
    return any(p.startswith(".") or p == "__pycache__" for p in parts)


def discover(root: Path) -> list[Submission]:
    """The submissions in ``root`` (see the module's docstring for the layouts)."""
    root = Path(root)
    if not root.is_dir():
        raise BatchError(f"{root}: not a folder of submissions")
    found: list[Submission] = []
    for entry in sorted(root.iterdir()):
        if _hidden([entry.name]):
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            found.append(Submission(entry.stem, entry.name, entry))
        elif entry.is_dir():
            notebooks = sorted(p for p in entry.rglob("*.ipynb")
                               if p.is_file() and not _hidden(p.relative_to(entry).parts))
            found.extend(Submission(entry.name, p.relative_to(entry).as_posix(), p)
                         for p in notebooks)
            if not notebooks:
                found.append(Submission(entry.name, "", None))
    if not found:
        raise BatchError(f"{root}: no submissions (no notebooks, no student folders)")
    keys: dict[str, Submission] = {}
    names: dict[str, str] = {}
    for sub in found:
        if sub.key in keys:
            raise BatchError(f"{root}: {sub.key} is submitted twice ({keys[sub.key].path} "
                             f"and {sub.path})")
        keys[sub.key] = sub
        other = names.setdefault(safe_name(sub.student), sub.student)
        if other != sub.student:
            raise BatchError(f"{root}: students {other!r} and {sub.student!r} would share the "
                             f"result file {safe_name(sub.student)}.json")
    return found


def safe_name(student: str) -> str:
    """The student's id as a file name (characters outside [A-Za-z0-9._@+-] become _)."""
    name = _UNSAFE.sub("_", student)
    return "_" + name if name.startswith(".") or not name else name


# ---------------------------------------------------------------------------- grading


@dataclass(frozen=True)
class Options:
    """What a notebook is graded with (the arguments of grade_notebook)."""

    mode: str
    exercises: tuple[str, ...] = ()
    metrics: bool = True
    sanitizers: bool = True
    timeout: float | None = None
    seed: int | None = None

    def fingerprint(self, content: bytes) -> str:
        """Changes when the notebook, these options or the grader's version change."""
        options = json.dumps({**asdict(self), "exercises": sorted(self.exercises),
                              "grader": grader_version()}, sort_keys=True)
        digest = hashlib.sha256(content)
        digest.update(b"\0" + options.encode())
        return "sha256:" + digest.hexdigest()


def grader_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba-cuda-workbook")
    except PackageNotFoundError:
        return "unknown"


def grade_submission(name: str, shown_as: str, content: bytes, options: dict) -> dict:
    """Grade one notebook: ``{"report": ...}``, ``{"error": ...}`` or ``{"skipped": ...}``,
    plain data (see :func:`grade_submissions`)."""
    return grade_submissions([(name, shown_as, content)], options)[0]


def grade_submissions(items: list[tuple[str, str, bytes]], options: dict) -> list[dict]:
    """Grade a few notebooks, each given as (file name, name shown in messages, content), in
    one Dask task: for each, ``{"report": ...}``, ``{"error": ...}`` or ``{"skipped": ...}``,
    plain data. The notebooks travel as bytes, so workers need no file system shared with
    the instructor's machine.

    Their check, sanitize and simulate stages run together (:func:`grader.grade.run_stages`:
    each notebook's check in a process of its own, each compute-sanitizer tool and the
    simulator pass in one process for them all), then one ncu run per lesson profiles them
    together (:func:`grader.grade.profile_and_report`):
    Nsight Compute profiles one process at a time, and each process holds it until it
    exits, so a batch pays that exit and the wait for the next process once per task
    instead of once per notebook (:func:`task_sizes`). Each notebook keeps its kernel cache
    until then."""
    worker = _worker_address()
    with tempfile.TemporaryDirectory(prefix="grader-batch-") as tmp:
        outcomes, staged = _stage(items, options, Path(tmp))
        try:
            if staged:
                for (k, _), outcome in zip(staged, _profile_and_report(staged, items)):
                    outcomes[k] = outcome
        finally:
            for _, notebook_staged in staged:
                _remove(notebook_staged.kernels)
    return [{**outcome, "worker": worker} for outcome in outcomes]


def _stage(items: list[tuple[str, str, bytes]], options: dict,
           folder: Path) -> tuple[list[dict], list]:
    """The notebooks of :func:`grade_submissions` through their check, sanitize and simulate
    stages together (:func:`grader.grade.run_stages`), each with its kernel cache kept: the
    outcome of each that ends here (an error, a skip; ``{}`` for the others), and the others
    as (index, :class:`grader.grade.Staged`)."""
    from grader.grade import run_stages

    outcomes: list[dict] = [{} for _ in items]
    staged = []
    for k, item in enumerate(items):
        outcome = _prepare(item, options, folder / str(k))
        if isinstance(outcome, dict):
            outcomes[k] = outcome
        else:
            staged.append((k, outcome))
    if staged:
        try:
            run_stages([s for _, s in staged])
        except Exception:  # noqa: BLE001  (the grader's own failure: reported, never fatal)
            paths = [s.report.path for _, s in staged]
            for k, s in staged:
                outcomes[k] = {"error": _grader_failure(s.report.path, items[k][1], paths)}
                _remove(s.kernels)
            staged = []
    return outcomes, staged


def _prepare(item: tuple[str, str, bytes], options: dict, folder: Path):
    """A notebook of :func:`grade_submissions` written to ``folder``, read, and its exercises
    chosen (:func:`grader.grade.prepare`), with a kernel cache of its own that outlives the
    call: its :class:`grader.grade.Staged`, or its outcome (an error, a skip)."""
    from grader import kernel_cache
    from grader.grade import exercises_in, prepare
    from grader.notebook import NotebookError, load

    name, shown_as, content = item
    path = folder / Path(name).name
    folder.mkdir()
    path.write_bytes(content)
    try:
        notebook = load(path)
        ids = exercises_in(notebook, list(options["exercises"]))
        if ids is None:
            return {"skipped": f"lesson {notebook.lesson} has none of the selected exercises"}
        with kernel_cache.for_notebook(options["mode"], remove=False):
            return prepare(notebook, options["mode"], options["timeout"], options["seed"],
                           exercises=ids, metrics=options["metrics"],
                           sanitizers=options["sanitizers"])
    except NotebookError as exc:
        return {"error": str(exc).replace(str(path), shown_as)}
    except Exception:  # noqa: BLE001  (the grader's own failure: reported, never fatal)
        return {"error": _grader_failure(str(path), shown_as)}


def _profile_and_report(staged: list, items: list[tuple[str, str, bytes]]) -> list[dict]:
    """The profile stage and reports of the staged notebooks of :func:`grade_submissions`."""
    from grader import kernel_cache
    from grader.grade import profile_and_report

    first = next((s.kernels for _, s in staged if s.kernels), None)
    try:
        with kernel_cache.for_notebook(staged[0][1].report.mode, first, remove=False):
            reports = profile_and_report([s for _, s in staged])
    except Exception:  # noqa: BLE001  (the grader's own failure: reported, never fatal)
        paths = [s.report.path for _, s in staged]
        return [{"error": _grader_failure(s.report.path, items[k][1], paths)}
                for k, s in staged]
    outcomes = []
    for (k, _), report in zip(staged, reports):
        data = report.to_dict()
        data["path"] = items[k][1]
        outcomes.append({"report": data})
    return outcomes


PROFILE_GROUP_MAX = 3  # notebooks a batch task grades and profiles together, at most


def group_size(notebooks: int, workers: int, options: Options) -> int:
    """How many notebooks a task of the batch grades (:func:`grade_submissions`): in gpu mode
    with metrics, up to :data:`PROFILE_GROUP_MAX`, about two tasks per worker (the last
    tasks of a batch keep it waiting); else one."""
    if options.mode != "gpu" or not options.metrics:
        return 1
    return max(1, min(PROFILE_GROUP_MAX, round(notebooks / (2 * max(1, workers)))))


def task_sizes(notebooks: int, workers: int, options: Options) -> list[int]:
    """The notebooks of each task of the batch, in the order they are submitted (they add up
    to ``notebooks``): :func:`group_size` each, but for the first two rounds of a batch whose
    tasks hold two or more. The first task of each worker holds one fewer, as many and one
    more notebook in turn (``1, 2, 3, 1, 2, 3`` for six workers and tasks of two), the next
    round the mirror image (``3, 2, 1, 3, 2, 1``), so that two rounds hold as many notebooks
    as before. A task profiles its notebooks after their other stages, and ncu profiles one
    process at a time per GPU: with tasks of one size the workers' first profiles reach
    ncu's lock together and wait for each other. Measured on an H200 machine with 16 cores
    (2026-11-29, lesson 02, 24 notebooks, 6 workers, in turns in one call): 144.4 and 146.2
    exercises a minute against 134.9 and 136.8 with tasks of two
    (``benchmarks/results/h200-2026-11-29-batch-staggered-tasks/``)."""
    size = group_size(notebooks, workers, options)
    wave = [size] if size == 1 else [size - 1, size, min(size + 1, PROFILE_GROUP_MAX)]
    first = [wave[k % len(wave)] for k in range(workers)]
    second = [wave[-1 - k % len(wave)] for k in range(workers)]
    sizes: list[int] = []
    left = notebooks
    for wanted in itertools.chain(first, second, itertools.repeat(size)):
        if left <= 0:
            return sizes
        sizes.append(min(wanted, left))
        left -= sizes[-1]
    return sizes


def _grader_failure(path: str, shown_as: str, task: Iterable[str] = ()) -> str:
    """The grader's own failure on the notebook at ``path``, its traceback naming it as
    ``shown_as``, and the other notebooks of its task (``task``: the paths of all of them)
    by no name."""
    text = traceback.format_exc(limit=-4).replace(path, shown_as)
    for other in task:
        if other != path:
            text = text.replace(other, "<another notebook of the task>")
    return "the grader failed on this notebook:\n" + text


def _remove(folder: str | None) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:  # not running on a worker (a direct call)
        return ""


def _worker_mode(requested: str) -> str:
    """The mode ``requested`` resolves to on a worker (``--scheduler``: the workers' GPUs
    matter, not the instructor's machine)."""
    from workbook.mode import resolve

    return resolve(requested)


# ---------------------------------------------------------------------------- the batch


@dataclass
class BatchResult:
    """What a batch did: keys of the submissions graded now, reused, failed to grade."""

    out: Path
    mode: str
    workers: int
    submissions: int
    graded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    exercises: int = 0  # exercises graded by this run (not the reused ones)
    students: dict[str, str] = field(default_factory=dict)  # student -> status

    @property
    def passed(self) -> bool:
        return not self.interrupted and all(s == PASSED for s in self.students.values())

    def student_counts(self) -> str:
        """The students by status, in the words of summary.md's first line."""
        return describe_students(self.students.values())


class _Results:
    """The results on disk in ``out``: read back at the start, rewritten as they arrive."""

    def __init__(self, out: Path, mode: str, submissions: list[Submission]):
        self.out, self.mode = out, mode
        self.students = list(dict.fromkeys(s.student for s in submissions))
        self.entries: dict[str, dict[str, Entry]] = {s: {} for s in self.students}
        self.pending = {s: 0 for s in self.students}
        self.recorded: set[str] = set()  # the students with a result new in this run
        self.previous: dict[str, dict[str, Entry]] = {}
        for student in self.students:
            path = self.path(student)
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            self.previous[student] = {e.file: e for e in entries_from_report(data)}

    def path(self, student: str, suffix: str = ".json") -> Path:
        return self.out / f"{safe_name(student)}{suffix}"

    def reusable(self, sub: Submission, fingerprint: str) -> Entry | None:
        entry = self.previous.get(sub.student, {}).get(sub.file)
        if entry and entry.fingerprint == fingerprint and entry.error is None:
            return entry
        return None

    def keep(self, sub: Submission, entry: Entry) -> None:
        self.entries[sub.student][sub.file] = entry

    def record(self, sub: Submission, entry: Entry) -> None:
        """Store a new result and rewrite the student's files and the summary."""
        self.entries[sub.student][sub.file] = entry
        self.pending[sub.student] -= 1
        self.recorded.add(sub.student)
        self.write_student(sub.student)
        self.write_summary()

    def flush(self) -> None:
        """Rewrite the files of every student recorded in this run, then the summary: an
        interrupt may have come in the middle of :meth:`record`, between its writes."""
        for student in self.recorded:
            self.write_student(student)
        self.write_summary()

    def write_student(self, student: str) -> None:
        """The student's JSON report, Gradescope results and feedback; a file whose content
        would not change is left as it is."""
        entries = list(self.entries[student].values())
        for suffix, text in ((".json", json.dumps(student_report(student, entries), indent=2)),
                             (".gradescope.json", json.dumps(gradescope_results(entries),
                                                             indent=2)),
                             (".feedback.md", feedback_markdown(student, entries).rstrip())):
            path = self.path(student, suffix)
            try:
                unchanged = path.read_text() == text + "\n"
            except OSError:
                unchanged = False
            if not unchanged:
                write_atomic(path, text + "\n")

    def summary(self) -> ClassSummary:
        return ClassSummary(self.mode, self.students,
                            {s: list(e.values()) for s, e in self.entries.items()}, self.pending)

    def write_summary(self) -> None:
        summary = self.summary()
        write_atomic(self.out / "summary.csv", summary.csv())
        write_atomic(self.out / "summary.md", summary.markdown())


def shared_reference_profiles(envs: list[dict[str, str]], out: Path) -> list[dict[str, str]]:
    """The workers' environments with one folder for the reference solution's profiles
    (``out/.reference-profiles``, unless ``WORKBOOK_REFERENCE_PROFILES`` names one): each
    reference is profiled once per GPU model, not once per notebook (see
    :mod:`grader.reference_profiles`)."""
    from grader.reference_profiles import CACHE_ENV

    folder = os.environ.get(CACHE_ENV) or str(Path(out).resolve() / ".reference-profiles")
    return [{**env, CACHE_ENV: folder} for env in envs]


def grade_class(
    root: Path,
    out: Path,
    *,
    mode: str = "auto",
    exercises: Iterable[str] = (),
    metrics: bool = True,
    sanitizers: bool = True,
    timeout: float | None = None,
    seed: int | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    profile_workers: int = 0,
    force: bool = False,
    console: Console | None = None,
    on_result: Callable[[Submission, Entry], None] | None = None,
) -> BatchResult:
    """Grade every submission in ``root`` into ``out`` (see the module's docstring).

    The grading options are those of ``grader check``. ``mode`` (auto, sim, gpu) is
    resolved where the grading runs: on this machine for the local cluster, on a worker
    for ``scheduler`` (the address of a running Dask scheduler). ``workers`` sizes the
    local cluster, ``profile_workers`` adds that many profile workers per GPU to it
    (:mod:`grader.batch_profiles`); ``force`` re-grades what is unchanged.
    """
    import time

    from distributed import Client, as_completed
    from rich import progress as bar

    from grader.exercises import UnknownExercise, get

    console = console or Console()
    exercises = tuple(exercises)
    for exercise_id in exercises:
        try:
            get(exercise_id)
        except UnknownExercise as exc:
            raise BatchError(str(exc).strip("'\"")) from None
    if scheduler and workers:
        raise BatchError("--workers sizes the local cluster; with --scheduler the cluster's "
                         "own workers grade")
    if workers is not None and workers < 1:
        raise BatchError("--workers must be at least 1")
    if profile_workers < 0 or (scheduler and profile_workers):
        raise BatchError("--profile-workers adds profile workers (0 or more per GPU) to the "
                         "local cluster; with --scheduler the cluster's own workers grade")
    submissions = discover(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    cluster = None
    if scheduler is None:
        from workbook.mode import resolve

        mode = resolve(mode)
        cluster = local_cluster(shared_reference_profiles(
            local_worker_env(mode, workers, profilers=profile_workers), out))
    try:
        with Client(scheduler or cluster, set_as_default=False) as client:
            if cluster is None:
                # waits for a first worker (a batch job may still be queued): the mode is
                # the workers' (gpu mode fails here when they have no GPU)
                with console.status(f"waiting for a worker of {scheduler}"):
                    mode = client.submit(_worker_mode, mode, pure=False).result()
            else:
                client.register_plugin(StopGradingProcesses())
            options = Options(mode, exercises, metrics, sanitizers, timeout, seed)
            roles = cluster_roles(client)  # what each worker does, where the cluster says
            n_workers = roles.get(STAGE) or len(client.scheduler_info(n_workers=-1)["workers"])
            result = BatchResult(out, mode, n_workers, len(submissions))
            progress = bar.Progress(bar.TextColumn("{task.description}"), bar.BarColumn(),
                                    bar.MofNCompleteColumn(), bar.TimeElapsedColumn(),
                                    console=console, transient=True)
            _run(client, roles, submissions, out, options, force, console, result, on_result,
                 as_completed, progress)
    finally:
        if cluster is not None:
            cluster.close()
    result.seconds = round(time.monotonic() - start, 3)
    return result


def _run(client, roles, submissions, out, options, force, console, result, on_result,
         as_completed, progress) -> None:
    results = _Results(out, options.mode, submissions)
    payload = {**asdict(options), "exercises": list(options.exercises)}
    # future -> (kind: grade, stage or profile, [(submission, fingerprint)], the staged
    # notebooks a profile task has: their kernel caches are removed if it is lost)
    futures = {}
    to_grade = []  # (submission, fingerprint, content)
    for sub in submissions:
        results.pending[sub.student] += 1
    for sub in submissions:
        if sub.path is None:
            entry = Entry("", "", error="no notebook in the submission")
            results.record(sub, entry)
            result.errors.append(sub.key)
            continue
        try:
            content = sub.path.read_bytes()
        except OSError as exc:
            results.record(sub, Entry(sub.file, "", error=f"cannot read {sub.path}: {exc}"))
            result.errors.append(sub.key)
            continue
        fingerprint = options.fingerprint(content)
        reused = None if force else results.reusable(sub, fingerprint)
        if reused is not None:
            results.keep(sub, reused)
            results.pending[sub.student] -= 1
            result.reused.append(sub.key)
            continue
        to_grade.append((sub, fingerprint, content))
    # a task grades a few notebooks, those of one assignment (file name) where it can
    to_grade.sort(key=lambda item: (item[0].file, item[0].student))
    resources = {STAGE: 1} if roles.get(STAGE) else None  # not on the profile workers
    queue = ProfileQueue(roles.get(PROFILE, 0) if options.mode == "gpu" and options.metrics
                         else 0, PROFILE_GROUP_MAX)
    if queue.free:  # stages and profiles as tasks of their own (grader.batch_profiles)
        for sub, fingerprint, content in to_grade:
            future = client.submit(stage_submission, (sub.path.name, str(sub.path), content),
                                   payload, resources=resources, pure=False)
            futures[future] = ("stage", [(sub, fingerprint)], [])
    else:
        start = 0
        for size in task_sizes(len(to_grade), result.workers, options):
            group, start = to_grade[start:start + size], start + size
            future = client.submit(grade_submissions,
                                   [(sub.path.name, str(sub.path), content)
                                    for sub, _, content in group], payload,
                                   resources=resources, pure=False)
            futures[future] = ("grade", [(sub, fingerprint) for sub, fingerprint, _ in group],
                               [])
    for student, pending in results.pending.items():
        if not pending:  # all kept: files that an older grader did not write are added
            results.write_student(student)
    results.write_summary()
    if result.reused:
        console.print(f"{len(result.reused)} of {len(submissions)} submissions unchanged since "
                      f"they were graded: kept")
    console.print(f"grading {len(to_grade)} notebooks on {result.workers} workers "
                  f"({options.mode} mode), results in {out}")
    try:
        with progress:
            task = progress.add_task("grading", total=len(to_grade))
            pending = as_completed(list(futures), loop=client.loop)
            for future in pending:
                kind, group, staged = futures.pop(future)
                try:
                    outcomes = future.result()
                except Exception as exc:  # noqa: BLE001  (a lost worker: those students only)
                    outcomes = [{"error": f"the grading task failed ({type(exc).__name__}: "
                                          f"{exc}); a re-run retries it"}] * len(group)
                    for notebook in staged:
                        _remove(notebook.kernels)
                if kind == "stage" and isinstance(outcomes, dict):
                    outcomes = [outcomes]
                if kind == "profile":
                    queue.done()
                for (sub, fingerprint), outcome in zip(group, outcomes):
                    if "staged" in outcome:  # its profile comes later
                        queue.add((sub, fingerprint, outcome["staged"]))
                        continue
                    entry = Entry(sub.file, fingerprint, outcome.get("report"),
                                  outcome.get("error"), outcome.get("skipped"))
                    results.record(sub, entry)
                    (result.errors if entry.error is not None else result.graded).append(sub.key)
                    result.exercises += len((entry.report or {}).get("exercises", []))
                    progress.console.print(_line(sub, entry))
                    progress.advance(task)
                    if on_result:
                        on_result(sub, entry)
                for ready in queue.ready():
                    staged = [notebook for *_, notebook in ready]
                    future = client.submit(profile_staged, staged,
                                           [str(sub.path) for sub, *_ in ready],
                                           resources={PROFILE: 1}, pure=False)
                    futures[future] = ("profile", [(sub, fingerprint)
                                                   for sub, fingerprint, _ in ready], staged)
                    pending.add(future)
    except KeyboardInterrupt:
        result.interrupted = True
        client.cancel(list(futures))
        for _, _, notebook in queue.waiting:
            _remove(notebook.kernels)
        results.flush()
        waiting = sum(len(group) for _, group, _ in futures.values()) + len(queue.waiting)
        console.print(f"[yellow]interrupted:[/] the results so far are in {out}; {waiting} "
                      "notebooks are not graded yet: run the same command again to grade them")
    summary = results.summary()
    result.students = {row["student"]: row["status"] for row in summary.rows()[1]}


def _line(sub: Submission, entry: Entry) -> str:
    """The console's line for a result (rich markup; the texts it quotes are escaped)."""
    from rich.markup import escape

    key = escape(sub.key)
    if entry.error is not None:
        return f"  {key}: [red]not graded[/]: {escape(first_line(entry.error))}"
    if entry.skipped is not None:
        return f"  {key}: skipped ({escape(entry.skipped)})"
    report = entry.report
    failed = escape(", ".join(f"{i} ({status})" for i, status in entry.failed_ids))
    verdict = "[green]passed[/]" if report["passed"] else f"[red]failed[/] {failed}"
    return (f"  {key}: {report['score']:g}/{report['max_score']:g} {verdict} "
            f"({report['seconds']:.1f} s)")
