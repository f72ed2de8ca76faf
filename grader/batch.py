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

Outputs in OUT, each written to a temporary file and renamed into place (a reader, or
an interrupted run, never sees half a file):

* ``<student>.json`` -- the grader's JSON report of the student's notebooks (README,
  "JSON report"), plus ``student``, ``errors`` and ``skipped``; each notebook carries
  ``submission``: its file and the fingerprint it was graded under;
* ``<student>.gradescope.json`` -- Gradescope's ``results.json`` for the student;
* ``summary.csv`` and ``summary.md`` -- a row per student, a column per exercise, and
  (markdown) who failed what; rewritten after every result.

A notebook's fingerprint hashes its content, the grading options and the grader's
version: a re-run grades only what is new or changed, and retries errors.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import re
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin
from rich.console import Console

from grader import report as rep

SCHEMA_VERSION = 1
PROCESSES_ENV = "WORKBOOK_GRADER_PROCESSES"  # grader.grade.PROCESSES_ENV (not imported:
# importing grader.grade imports numba.cuda, which must wait for the mode to be chosen)
SUMMARY_FILES = ("summary.csv", "summary.md")
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
    """Grade one notebook (a Dask task): ``{"report": ...}``, ``{"error": ...}`` or
    ``{"skipped": ...}``, plain data. The notebook travels as bytes, so workers need
    no file system shared with the instructor's machine."""
    from grader.grade import exercises_in, grade_notebook
    from grader.notebook import NotebookError, load

    worker = _worker_address()
    with tempfile.TemporaryDirectory(prefix="grader-batch-") as tmp:
        path = Path(tmp) / Path(name).name
        path.write_bytes(content)
        try:
            notebook = load(path)
            ids = exercises_in(notebook, list(options["exercises"]))
            if ids is None:
                return {"skipped": f"lesson {notebook.lesson} has none of the selected "
                                   "exercises", "worker": worker}
            report = grade_notebook(notebook, options["mode"], options["timeout"],
                                    options["seed"], exercises=ids, metrics=options["metrics"],
                                    sanitizers=options["sanitizers"])
        except NotebookError as exc:
            return {"error": str(exc).replace(str(path), shown_as), "worker": worker}
        except Exception:  # noqa: BLE001  (the grader's own failure: reported, never fatal)
            return {"error": "the grader failed on this notebook:\n"
                             + traceback.format_exc(limit=-4).replace(str(path), shown_as),
                    "worker": worker}
    data = report.to_dict()
    data["path"] = shown_as
    return {"report": data, "worker": worker}


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


# ---------------------------------------------------------------------------- results


@dataclass
class Entry:
    """The outcome of one submission: a report, an error, or a skip; with its fingerprint."""

    file: str
    fingerprint: str
    report: dict | None = None
    error: str | None = None
    skipped: str | None = None

    @classmethod
    def from_task(cls, sub: Submission, fingerprint: str, outcome: dict) -> Entry:
        return cls(sub.file, fingerprint, outcome.get("report"), outcome.get("error"),
                   outcome.get("skipped"))

    @property
    def failed_ids(self) -> list[tuple[str, str]]:
        return [(e["id"], e["status"]) for e in (self.report or {}).get("exercises", [])
                if not e["passed"]]


def _notebook_report(data: dict):
    from grader.grade import NotebookReport
    from grader.results import ExerciseResult

    return NotebookReport(data["path"], data["lesson"], data["mode"],
                          [ExerciseResult.from_dict(e) for e in data["exercises"]],
                          list(data.get("warnings", [])), data.get("seconds", 0.0))


def student_report(student: str, entries: list[Entry]) -> dict:
    """``<student>.json``: the grader's JSON report of the student's notebooks, plus the
    errors and the skipped notebooks, each with the fingerprint it was graded under."""
    graded = [e for e in entries if e.report is not None]
    data = rep.json_report([_notebook_report(e.report) for e in graded])
    for notebook, entry in zip(data["notebooks"], graded):
        notebook["submission"] = {"file": entry.file, "fingerprint": entry.fingerprint}
    errors = [{"file": e.file, "fingerprint": e.fingerprint, "error": e.error}
              for e in entries if e.error is not None]
    skipped = [{"file": e.file, "fingerprint": e.fingerprint, "reason": e.skipped}
               for e in entries if e.skipped is not None]
    data.update(passed=data["passed"] and bool(graded) and not errors, errors=errors,
                skipped=skipped)
    return {"schema_version": data.pop("schema_version"), "student": student, **data}


def entries_from_report(data: dict) -> list[Entry]:
    """The entries a ``<student>.json`` holds (the inverse of :func:`student_report`)."""
    entries = []
    for notebook in data.get("notebooks", []):
        sub = notebook.get("submission", {})
        report = {k: v for k, v in notebook.items() if k != "submission"}
        entries.append(Entry(sub.get("file", ""), sub.get("fingerprint", ""), report=report))
    entries += [Entry(e["file"], e["fingerprint"], error=e["error"])
                for e in data.get("errors", [])]
    entries += [Entry(e["file"], e["fingerprint"], skipped=e["reason"])
                for e in data.get("skipped", [])]
    return entries


def gradescope_results(entries: list[Entry]) -> dict:
    """Gradescope's ``results.json`` for one student (:func:`grader.report.gradescope_report`),
    with the notebooks that could not be graded named in its output."""
    graded = [_notebook_report(e.report) for e in entries if e.report is not None]
    data = rep.gradescope_report(graded)
    problems = [f"{e.file or 'submission'}: {e.error}" for e in entries if e.error is not None]
    if problems:
        data["output"] = "\n".join([data["output"] if graded else "", "not graded:",
                                    *problems]).lstrip()
    return data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------- summary


def _exercise_columns(rows: dict[str, dict[str, dict]]) -> list[str]:
    """Every exercise graded for someone, in the catalogue's (lesson, notebook) order."""
    from grader.exercises import LESSONS

    seen = {i for exercises in rows.values() for i in exercises}
    ordered = [e.id for lesson in LESSONS.values() for e in lesson if e.id in seen]
    return ordered + sorted(seen - set(ordered))


def _best_results(entries: list[Entry]) -> dict[str, dict]:
    """Each exercise's result for a student (the best one, if two notebooks grade it)."""
    best: dict[str, dict] = {}
    for entry in entries:
        for result in (entry.report or {}).get("exercises", []):
            held = best.get(result["id"])
            if held is None or (result["score"], result["passed"]) > (held["score"],
                                                                       held["passed"]):
                best[result["id"]] = result
    return best


def student_status(entries: list[Entry], pending: int) -> str:
    if pending:
        return "pending"
    if any(e.error is not None for e in entries):
        return "error"
    graded = [e for e in entries if e.report is not None]
    if not graded:
        return "skipped"
    return "passed" if all(e.report["passed"] for e in graded) else "failed"


@dataclass
class ClassSummary:
    """The summary tables: one row per student, one column per exercise."""

    mode: str
    students: list[str]
    entries: dict[str, list[Entry]]
    pending: dict[str, int]

    def rows(self) -> tuple[list[str], list[dict]]:
        best = {s: _best_results(self.entries.get(s, [])) for s in self.students}
        columns = _exercise_columns(best)
        rows = []
        for student in self.students:
            results = best[student]
            rows.append({
                "student": student,
                "status": student_status(self.entries.get(student, []),
                                         self.pending.get(student, 0)),
                "score": sum(r["score"] for r in results.values()),
                "max_score": sum(r["max_score"] for r in results.values()),
                "results": results,
                "errors": [e for e in self.entries.get(student, []) if e.error is not None],
            })
        return columns, rows

    def csv(self) -> str:
        columns, rows = self.rows()
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["student", "status", "score", "max_score", "errors"]
                        + [c for i in columns for c in (i, f"{i} status")])
        for row in rows:
            cells = []
            for exercise_id in columns:
                result = row["results"].get(exercise_id)
                cells += ([f"{result['score']:g}", result["status"]] if result else ["", ""])
            writer.writerow([row["student"], row["status"], f"{row['score']:g}",
                             f"{row['max_score']:g}",
                             "; ".join(f"{e.file or 'submission'}: {_first_line(e.error)}"
                                       for e in row["errors"]), *cells])
        return buffer.getvalue()

    def markdown(self) -> str:
        columns, rows = self.rows()
        done = sum(1 for r in rows if r["status"] != "pending")
        lines = ["# Class results", "",
                 f"{done} of {len(rows)} students graded ({self.mode} mode); "
                 f"{sum(r['status'] == 'passed' for r in rows)} passed everything.", "",
                 "| " + " | ".join(["student", "status", "score", *columns]) + " |",
                 "|" + " --- |" * (3 + len(columns))]
        for row in rows:
            cells = []
            for exercise_id in columns:
                result = row["results"].get(exercise_id)
                if result is None:
                    cells.append("")
                elif result["passed"]:
                    cells.append(f"{result['score']:g}/{result['max_score']:g}")
                else:
                    cells.append(f"**{result['score']:g}/{result['max_score']:g} "
                                 f"{result['status']}**")
            lines.append("| " + " | ".join([_md(row["student"]), row["status"],
                                            f"{row['score']:g}/{row['max_score']:g}", *cells])
                         + " |")
        lines += ["", "## Who failed what", ""]
        failures = False
        for exercise_id in columns:
            graded = [r for r in rows if exercise_id in r["results"]]
            failed = [r for r in graded if not r["results"][exercise_id]["passed"]]
            if failed:
                failures = True
                names = ", ".join(f"{_md(r['student'])} ({r['results'][exercise_id]['status']})"
                                  for r in failed)
                lines.append(f"- **{exercise_id}** ({len(failed)} of {len(graded)}): {names}")
        if not failures:
            lines.append("Nobody failed an exercise.")
        errors = [(r["student"], e) for r in rows for e in r["errors"]]
        if errors:
            lines += ["", "## Not graded", ""]
            lines += [f"- {_md(student)}, {_md(e.file or 'submission')}: "
                      f"{_md(_first_line(e.error))}" for student, e in errors]
        pending = [r["student"] for r in rows if r["status"] == "pending"]
        if pending:
            lines += ["", "## Pending", "", ", ".join(_md(s) for s in pending)]
        return "\n".join(lines) + "\n"


def _first_line(text: str | None, limit: int = 200) -> str:
    line = next((s for s in (text or "").splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _md(text: str) -> str:
    return text.replace("|", "\\|")


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
        return not self.interrupted and all(s == "passed" for s in self.students.values())


class _Results:
    """The results on disk in ``out``: read back at the start, rewritten as they arrive."""

    def __init__(self, out: Path, mode: str, submissions: list[Submission]):
        self.out, self.mode = out, mode
        self.students = list(dict.fromkeys(s.student for s in submissions))
        self.entries: dict[str, dict[str, Entry]] = {s: {} for s in self.students}
        self.pending = {s: 0 for s in self.students}
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
        entries = list(self.entries[sub.student].values())
        write_atomic(self.path(sub.student),
                     json.dumps(student_report(sub.student, entries), indent=2) + "\n")
        write_atomic(self.path(sub.student, ".gradescope.json"),
                     json.dumps(gradescope_results(entries), indent=2) + "\n")
        self.write_summary()

    def summary(self) -> ClassSummary:
        return ClassSummary(self.mode, self.students,
                            {s: list(e.values()) for s, e in self.entries.items()}, self.pending)

    def write_summary(self) -> None:
        summary = self.summary()
        write_atomic(self.out / "summary.csv", summary.csv())
        write_atomic(self.out / "summary.md", summary.markdown())


def local_worker_env(mode: str, workers: int | None) -> list[dict[str, str]]:
    """One environment per worker of the local cluster: in gpu mode one worker per visible
    GPU, each seeing only its own (``CUDA_VISIBLE_DEVICES``, set before the worker process
    starts); in sim mode one per CPU core."""
    from dask.system import CPU_COUNT

    inherited = os.environ.get(PROCESSES_ENV)
    if mode == "gpu":
        from workbook.mode import gpu_count

        visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
                   if d.strip()]
        devices = (visible or [str(i) for i in range(gpu_count())])[: max(1, gpu_count())]
        count = workers or len(devices)
        cores = max(1, CPU_COUNT // count)
        processes = inherited or str(max(1, min(3, cores // 6)))  # grader.grade's default
        return [{"WORKBOOK_MODE": "gpu", "CUDA_VISIBLE_DEVICES": devices[i % len(devices)],
                 PROCESSES_ENV: processes} for i in range(count)]
    count = workers or CPU_COUNT
    return [{"WORKBOOK_MODE": "sim", "NUMBA_ENABLE_CUDASIM": "1", PROCESSES_ENV: inherited or "1"}
            for _ in range(count)]


def local_cluster(envs: list[dict[str, str]]):
    """A cluster on this machine: one single-threaded worker process per environment
    (a dask.distributed SpecCluster of Nannies, each with its ``env``)."""
    from distributed import Nanny, Scheduler, SpecCluster

    quiet = logging.ERROR
    workers = {f"grader-{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "host": "127.0.0.1", "env": env, "memory_limit": 0,
        "silence_logs": quiet}} for i, env in enumerate(envs)}
    # the scheduler's HTTP server (metrics, no dashboard) on a free port: two batches on one
    # machine must not collide on dask's default 8787
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False,
                                               "dashboard_address": ":0"}}
    return SpecCluster(scheduler=scheduler, workers=workers, silence_logs=quiet,
                       name="grader-batch")


class StopGradingProcesses(WorkerPlugin):
    """Plugin for the workers of the local cluster. An interrupt (Ctrl-C) is the client's
    to handle: the workers ignore it, and the client closes the cluster. When a worker
    shuts down, it kills the grading processes it started: they run in sessions of their
    own (grader.session), so nothing else stops a student's endless loop."""

    name = "grader-stop-grading-processes"

    def setup(self, worker) -> None:
        import threading

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def teardown(self, worker) -> None:
        import psutil  # a dependency of distributed

        for child in psutil.Process().children(recursive=True):
            try:
                if any("grader.runner" in part for part in child.cmdline()):
                    os.killpg(child.pid, signal.SIGKILL)
            except (psutil.Error, OSError):
                pass


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
    force: bool = False,
    console: Console | None = None,
    on_result: Callable[[Submission, Entry], None] | None = None,
) -> BatchResult:
    """Grade every submission in ``root`` into ``out`` (see the module's docstring).

    The grading options are those of ``grader check``. ``mode`` (auto, sim, gpu) is
    resolved where the grading runs: on this machine for the local cluster, on a worker
    for ``scheduler`` (the address of a running Dask scheduler). ``workers`` sizes the
    local cluster; ``force`` re-grades what is unchanged.
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
    submissions = discover(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    cluster = None
    if scheduler is None:
        from workbook.mode import resolve

        mode = resolve(mode)
        cluster = local_cluster(local_worker_env(mode, workers))
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
            n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
            result = BatchResult(out, mode, n_workers, len(submissions))
            progress = bar.Progress(bar.TextColumn("{task.description}"), bar.BarColumn(),
                                    bar.MofNCompleteColumn(), bar.TimeElapsedColumn(),
                                    console=console, transient=True)
            _run(client, submissions, out, options, force, console, result, on_result,
                 as_completed, progress)
    finally:
        if cluster is not None:
            cluster.close()
    result.seconds = round(time.monotonic() - start, 3)
    return result


def _run(client, submissions, out, options, force, console, result, on_result, as_completed,
         progress) -> None:
    results = _Results(out, options.mode, submissions)
    payload = {**asdict(options), "exercises": list(options.exercises)}
    futures = {}
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
        future = client.submit(grade_submission, sub.path.name, str(sub.path), content, payload,
                               pure=False)
        futures[future] = (sub, fingerprint)
    results.write_summary()
    if result.reused:
        console.print(f"{len(result.reused)} of {len(submissions)} submissions unchanged since "
                      f"they were graded: kept")
    console.print(f"grading {len(futures)} notebooks on {result.workers} workers "
                  f"({options.mode} mode), results in {out}")
    try:
        with progress:
            task = progress.add_task("grading", total=len(futures))
            for future in as_completed(list(futures), loop=client.loop):
                sub, fingerprint = futures.pop(future)
                try:
                    outcome = future.result()
                except Exception as exc:  # noqa: BLE001  (a lost worker: that student only)
                    outcome = {"error": f"the grading task failed ({type(exc).__name__}: "
                                        f"{exc}); a re-run retries it"}
                entry = Entry.from_task(sub, fingerprint, outcome)
                results.record(sub, entry)
                (result.errors if entry.error is not None else result.graded).append(sub.key)
                result.exercises += len((entry.report or {}).get("exercises", []))
                progress.console.print(_line(sub, entry))
                progress.advance(task)
                if on_result:
                    on_result(sub, entry)
    except KeyboardInterrupt:
        result.interrupted = True
        client.cancel(list(futures))
        console.print(f"[yellow]interrupted:[/] the results so far are in {out}; {len(futures)} "
                      "notebooks are not graded yet: run the same command again to grade them")
    summary = results.summary()
    result.students = {row["student"]: row["status"] for row in summary.rows()[1]}


def _line(sub: Submission, entry: Entry) -> str:
    if entry.error is not None:
        return f"  {sub.key}: [red]not graded[/]: {_first_line(entry.error)}"
    if entry.skipped is not None:
        return f"  {sub.key}: skipped ({entry.skipped})"
    report = entry.report
    failed = ", ".join(f"{i} ({status})" for i, status in entry.failed_ids)
    verdict = "[green]passed[/]" if report["passed"] else f"[red]failed[/] {failed}"
    return (f"  {sub.key}: {report['score']:g}/{report['max_score']:g} {verdict} "
            f"({report['seconds']:.1f} s)")
