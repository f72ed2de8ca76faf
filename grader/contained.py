"""A notebook's check in a child process that can be stopped.

On a GPU a kernel that never ends keeps the process that launched it inside a CUDA
driver call that no signal interrupts: a check run in the notebook's own process would
leave the notebook stuck, and the stop button would do nothing. So the notebook's
``check()`` runs a GPU check in a child process (:mod:`grader.check_worker`), started in
the background when the lesson imports the grader and kept warm from check to check:

* the exercise's objects go there by value (:mod:`grader.shipping`); the child compiles
  them once and keeps them while they do not change; what they print shows in the cell;
* a check that makes no progress (no test case started) for ``WORKBOOK_CHECK_TIMEOUT``
  seconds is reported as TIMEOUT with the likely causes, while the simulator runs the
  same code on its small cases to say which loop or barrier; the child's process group
  is killed and a fresh child started;
* the stop button (KeyboardInterrupt while this process waits) kills the child the same
  way and ends the check at once; the notebook and its variables are untouched;
* after a failed check the child is replaced too (its CUDA context may be broken).

``WORKBOOK_CHECK_PROCESS`` chooses: ``auto`` (default: a child on a GPU; in the
simulator the check runs in the notebook's process, where the watchdog stops and
diagnoses a hang itself), ``child`` or ``notebook``.
"""

from __future__ import annotations

import atexit
import codecs
import itertools
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from grader import shipping
from grader.exercise import Case, Exercise, describe_gpu_hang
from grader.results import PASSED, TIMEOUT, CaseResult, ExerciseResult
from grader.runner import error_result, restart_after
from grader.session import Attempt, _kill, _new_events, child_env

PROCESS_ENV = "WORKBOOK_CHECK_PROCESS"
POLL_SECONDS = 0.01  # a check's events are few: looking often costs nothing, waiting would
CHOICES = ("auto", "child", "notebook")
START_SECONDS = 180.0  # a cold start of the child: Python, numba, the CUDA context
SIM_GRACE_SECONDS = 10.0  # in the simulator a case stops itself; the kill comes this much later
POOL_ENV = "WORKBOOK_MEMORY_POOL"  # the notebook's choice holds in its checks
FOLLOWED = ("WORKBOOK_CHECK_TIMEOUT",)  # set in the notebook after the worker started: applies
DIAGNOSE_AFTER = 0.5  # of a GPU case's bound without progress: the simulator looks at the code
SIM_CASE_SECONDS = 3.0  # the simulator's bound per case when it looks at a stalled GPU check
DIAGNOSIS_WAIT_SECONDS = 5.0  # waiting for the simulator's view once a GPU case is stopped
RETURN_WITHIN_SECONDS = 28.0  # from the check's start: no waiting for the simulator past this


class NotContained(Exception):
    """The check cannot run in a child process; the message says why."""


def process_choice() -> str:
    """``WORKBOOK_CHECK_PROCESS``: where the notebook's checks run."""
    choice = (os.environ.get(PROCESS_ENV) or "auto").strip().lower()
    if choice not in CHOICES:
        raise ValueError(f"{PROCESS_ENV}={choice!r} is not one of {', '.join(CHOICES)}")
    return choice


def use_child(mode: str) -> bool:
    """Whether a notebook's check in ``mode`` runs in a child process."""
    choice = process_choice()
    return choice == "child" or (choice == "auto" and mode == "gpu")


class Worker:
    """One child process running :mod:`grader.check_worker`, and the files it writes."""

    def __init__(self, mode: str, env: Mapping[str, str] | None = None):
        self.mode, self.env = mode, dict(env or {})
        self.folder = Path(tempfile.mkdtemp(prefix="workbook-check-"))
        events = self.folder / "events.jsonl"
        events.touch()
        self.outputs = {name: open(self.folder / f"{name}.txt", "wb")  # noqa: SIM115
                        for name in ("stdout", "stderr")}
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "grader.check_worker", str(events), str(read_end),
                 str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=self.outputs["stdout"],
                stderr=self.outputs["stderr"], pass_fds=(read_end,), env=self._environment(),
                start_new_session=True)  # its own process group: killed as one
        finally:
            os.close(read_end)
        self.channel = os.fdopen(write_end, "wb")
        self.reader = open(events)  # noqa: SIM115  (lives as long as the worker)
        self.ready = False
        self.started = time.monotonic()
        self.ready_at: float | None = None  # time.monotonic() when it was ready (one clock)

    def _environment(self) -> dict:
        env = child_env(self.mode)
        if POOL_ENV in os.environ:
            env[POOL_ENV] = os.environ[POOL_ENV]
        else:
            env.pop(POOL_ENV, None)
        root = str(Path(__file__).resolve().parents[1])  # where `grader` is imported from
        extra = [p for p in sys.path if p and os.path.isdir(p)
                 and not p.startswith((sys.prefix, sys.base_prefix))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
            [root, *extra, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]))
        env.update(self.env)
        return env

    def alive(self) -> bool:
        return self.proc.poll() is None

    def events(self) -> list[dict]:
        new = _new_events(self.reader)
        for event in new:
            if "ready" in event:
                self.ready, self.ready_at = True, event.get("at")
        return new

    def send(self, message: dict) -> None:
        pickle.dump(message, self.channel, protocol=pickle.HIGHEST_PROTOCOL)
        self.channel.flush()

    def how_it_ended(self) -> str:
        return Attempt([], "", self.proc.returncode).how_it_ended()

    def output(self, name: str) -> Path:
        return self.folder / f"{name}.txt"

    def stop(self, wait: bool = True) -> None:
        """Kill the process group; once it has ended, close the files and delete the folder
        (in the background unless ``wait``: a process killed inside a GPU kernel may take a
        moment to be torn down, which the check need not wait for)."""
        if wait:
            self._reap()
        else:
            threading.Thread(target=self._reap, name="check-worker-reaper", daemon=True).start()

    def _reap(self) -> None:
        _kill(self.proc)
        for stream in (self.channel, self.reader, *self.outputs.values()):
            try:
                stream.close()
            except OSError:  # the pipe to a dead process may fail to flush
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


class Forwarder:
    """Copies what a worker writes to its stdout and stderr into this process's streams
    (in a notebook: the output of the cell that runs the check)."""

    def __init__(self, worker: Worker):
        self.files = []
        for name, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
            reader = open(worker.output(name), "rb")  # noqa: SIM115  (closed by close())
            reader.seek(0, os.SEEK_END)  # what it printed before this check is not ours
            self.files.append((reader, codecs.getincrementaldecoder("utf-8")("replace"),
                               target))

    def pump(self) -> None:
        for reader, decoder, target in self.files:
            text = decoder.decode(reader.read())
            if text:
                target.write(text)
                target.flush()

    def close(self) -> None:
        self.pump()
        for reader, _, _ in self.files:
            reader.close()


_current: list[Worker] = []  # the warm worker (at most one)
_jobs = itertools.count(1)


def worker_for(mode: str, env: Mapping[str, str] | None = None) -> Worker:
    """The warm worker for ``mode`` (and ``env``), started if there is none or it died."""
    if _current:
        worker = _current[0]
        if worker.alive() and worker.mode == mode and worker.env == dict(env or {}):
            return worker
        retire()
    _current.append(Worker(mode, env))
    return _current[0]


def retire(wait: bool = True) -> None:
    """Stop the warm worker, if any (see :meth:`Worker.stop`)."""
    while _current:
        _current.pop().stop(wait)


def replace_worker() -> None:
    """Stop the warm worker and start a fresh one in the background, for the next check."""
    if _current:
        worker = _current[0]
        retire(wait=False)
        worker_for(worker.mode, worker.env)


atexit.register(retire)


def prewarm(mode: str) -> None:
    """Start the worker now, if checks in ``mode`` run in one, so that the first check does
    not wait for Python, numba and the CUDA context to start."""
    if use_child(mode):
        worker_for(mode)


def check_in_child(exercise: Exercise, namespace: Mapping, mode: str, seed: int | None = None,
                   *, timeout: float | None = None, env: Mapping[str, str] | None = None,
                   diagnose: bool | None = None,
                   on_case: Callable[[int, int, Case], None] | None = None) -> ExerciseResult:
    """Check ``exercise`` against ``namespace`` in the warm worker.

    ``timeout``: seconds without progress before the worker is killed (default: see
    :func:`case_bound`); ``env``: variables for the worker only; ``diagnose``: whether the
    simulator looks at a stalled check (default: on a GPU); ``on_case(k, n, case)``: called
    as the child starts case k of n, as :func:`~grader.exercise.check_exercise` calls it. Raises
    :class:`NotContained` when the objects cannot be sent or the worker cannot start, and
    KeyboardInterrupt, after killing the worker, when interrupted.
    """
    names = (exercise.entry, *exercise.needs)
    try:
        data = shipping.dumps({n: namespace[n] for n in names if n in namespace}, namespace)
    except shipping.ShippingError as exc:
        raise NotContained(str(exc)) from None
    worker = worker_for(mode, env)
    try:
        wait_ready(worker)
        job = {"job": next(_jobs), "exercise": exercise.id, "seed": seed, "objects": data,
               "absent": [n for n in names if n not in namespace],
               "environ": {name: os.environ.get(name) for name in FOLLOWED
                           if name not in worker.env},
               "cwd": os.getcwd(), "path": [p for p in sys.path if p]}
        forward = Forwarder(worker)
        try:
            worker.send(job)
            result = follow(worker, job["job"], exercise, namespace, mode, timeout, forward,
                            data, mode == "gpu" if diagnose is None else diagnose, on_case)
        finally:
            forward.close()
    except KeyboardInterrupt:
        replace_worker()
        raise KeyboardInterrupt(f"{exercise.id}: check interrupted; the process running it "
                                "was stopped (the notebook's variables are untouched)") from None
    except BrokenPipeError:  # the worker died before it read the job
        result = None
    if result is None or restart_after(result):
        replace_worker()
    if result is None:
        return error_result(exercise, f"the process running the check ended "
                            f"({worker.how_it_ended()}) before it could start", mode)
    return result


def wait_ready(worker: Worker) -> None:
    """Wait until the worker has started; :class:`NotContained` if it cannot."""
    while not worker.ready:
        worker.events()
        if worker.ready:
            return
        if not worker.alive():
            tail = worker.output("stderr").read_text(errors="replace").strip()[-2000:]
            retire()
            raise NotContained(f"the checking process ended as it started "
                               f"({worker.how_it_ended()}):\n{tail}")
        if time.monotonic() - worker.started > START_SECONDS:
            retire()
            raise NotContained(f"the checking process did not start within {START_SECONDS:g} s")
        time.sleep(POLL_SECONDS)


def follow(worker: Worker, job: int, exercise: Exercise, namespace: Mapping, mode: str,
           timeout: float | None, forward: Forwarder, data: bytes, diagnose: bool,
           on_case: Callable[[int, int, Case], None] | None = None) -> ExerciseResult:
    """Wait for the worker's result, answering its questions; a TIMEOUT result if it makes
    no progress in time (with the simulator's view if ``diagnose``, see :class:`Diagnosis`),
    an ERROR result if it dies."""
    start = stalled = time.monotonic()
    case, diagnosis = 0, None
    bound = case_bound(exercise, mode, case, timeout)
    try:
        while True:
            for event in worker.events():
                if event.get("job") != job:
                    continue
                if "case" in event:
                    case, stalled = event["case"], time.monotonic()
                    bound = case_bound(exercise, mode, case, timeout)
                    cases = exercise.cases_for(mode)
                    if on_case and case < len(cases):
                        on_case(case + 1, len(cases), cases[case])
                    if diagnosis:
                        diagnosis, _ = None, diagnosis.stop()
                elif "need" in event:
                    worker.send(answer(namespace, event["need"]))
                elif "result" in event:
                    return ExerciseResult.from_dict(event["result"])
            forward.pump()
            if not worker.alive():
                return crashed(exercise, mode, case, worker.how_it_ended(), start)
            waited = time.monotonic() - stalled
            if diagnose and diagnosis is None and waited > DIAGNOSE_AFTER * bound:
                diagnosis = Diagnosis(exercise, data, namespace)
            if diagnosis:
                diagnosis.poll()
            if waited > bound:
                worker.stop(wait=False)
                until = min(time.monotonic() + DIAGNOSIS_WAIT_SECONDS,
                            start + RETURN_WITHIN_SECONDS)
                seen = diagnosis.wait(until) if diagnosis else ""
                return timed_out(exercise, mode, case, bound, start, seen)
            time.sleep(POLL_SECONDS)
    finally:
        if diagnosis:
            diagnosis.stop()


class Diagnosis:
    """What the simulator sees in code that stalls a GPU check: the same objects, checked
    on the simulator's own (small) cases in another child, where the watchdog stops a case
    after ``SIM_CASE_SECONDS`` and says which loop or barrier the threads were at.

    Started once a GPU case has made no progress for half its bound, so that its answer is
    there when the bound passes."""

    def __init__(self, exercise: Exercise, data: bytes, namespace: Mapping):
        from workbook.sim.watchdog import TIMEOUT_ENV

        self.exercise, self.namespace = exercise, namespace
        self.worker = Worker("sim", {TIMEOUT_ENV: str(SIM_CASE_SECONDS)})
        self.job = {"job": next(_jobs), "exercise": exercise.id, "seed": None, "objects": data,
                    "absent": [n for n in (exercise.entry, *exercise.needs)
                               if n not in namespace]}
        self.sent = False
        self.result: ExerciseResult | None = None

    def poll(self) -> ExerciseResult | None:
        for event in self.worker.events():
            if event.get("job") != self.job["job"]:
                continue
            if "need" in event:
                self.worker.send(answer(self.namespace, event["need"]))
            elif "result" in event:
                self.result = ExerciseResult.from_dict(event["result"])
        if self.worker.ready and not self.sent and self.worker.alive():
            self.worker.send(self.job)
            self.sent = True
        return self.result

    def wait(self, until: float) -> str:
        """The simulator's view (empty if it has none by ``until``)."""
        while self.poll() is None and self.worker.alive() and time.monotonic() < until:
            time.sleep(POLL_SECONDS)
        return simulated_view(self.result) if self.result else ""

    def stop(self) -> None:
        self.worker.stop(wait=False)


def simulated_view(result: ExerciseResult) -> str:
    """What a check in the simulator says about code that stalled a GPU check."""
    if not result.cases:
        return f"in the simulator: {' '.join(result.messages)}"
    case = result.cases[-1]
    if result.status == TIMEOUT:
        lines = case.message.splitlines()[1:]
        if "likely causes:" in lines:
            lines = lines[:lines.index("likely causes:")]
        seen = "\n".join("  " + line for line in lines)
        return (f"the simulator ran the same code on its case {case.name} and stopped it after "
                f"{SIM_CASE_SECONDS:g} s:\n{seen}")
    if result.status == PASSED:
        return (f"the simulator's {len(result.cases)} cases (smaller than the GPU's) all finish: "
                "the hang depends on the size or the launch of the GPU's case")
    first = "\n".join("  " + line for line in case.message.splitlines()[:12])
    return f"in the simulator the same code fails its case {case.name}:\n{first}"


def case_bound(exercise: Exercise, mode: str, case: int, timeout: float | None) -> float:
    """Seconds case ``case`` may run without progress: ``timeout``, else
    ``WORKBOOK_CHECK_TIMEOUT`` on a GPU; in the simulator, where the child bounds each case
    itself (more for large cases) and reports what the threads were doing, a little more."""
    from grader.exercise import SIZE_PER_BOUND
    from workbook.sim.watchdog import check_timeout

    if timeout is not None:
        return timeout
    if mode != "sim":
        return check_timeout()
    cases = exercise.cases_for(mode)
    size = cases[case].size if case < len(cases) else 1
    return check_timeout() * max(1.0, size / SIZE_PER_BOUND) + SIM_GRACE_SECONDS


def answer(namespace: Mapping, name: str) -> dict:
    """The reply to a worker asking for ``name``."""
    if name not in namespace:
        return {"name": name}
    try:
        return {"name": name, "objects": shipping.dumps({name: namespace[name]})}
    except shipping.ShippingError as exc:
        return {"name": name, "error": str(exc)}


def _case_name(exercise: Exercise, mode: str, case: int) -> str:
    cases = exercise.cases_for(mode)
    return cases[case].name() if case < len(cases) else f"case {case + 1}"


def _unfinished(exercise: Exercise, mode: str, case: int, status: str, message: str,
                start: float) -> ExerciseResult:
    """The result of a check that ended in case ``case``: the cases before it passed."""
    name = _case_name(exercise, mode, case)
    passed = [CaseResult(c.name(), PASSED) for c in exercise.cases_for(mode)[:case]]
    return ExerciseResult(id=exercise.id, title=exercise.title, status=status, score=0.0,
                          max_score=exercise.points, messages=[f"{name}: {message}"],
                          cases=[*passed, CaseResult(name, status, message)], mode=mode,
                          seconds=round(time.monotonic() - start, 3))


def timed_out(exercise: Exercise, mode: str, case: int, seconds: float, start: float,
              simulated: str = "") -> ExerciseResult:
    message = describe_gpu_hang(exercise.id, _case_name(exercise, mode, case), seconds, mode,
                                simulated)
    return _unfinished(exercise, mode, case, TIMEOUT, message, start)


def crashed(exercise: Exercise, mode: str, case: int, how: str, start: float) -> ExerciseResult:
    from grader.results import ERROR

    message = (f"the process running the check ended ({how}) during this case: a crash of "
               "the compiled code or of the driver; what it printed is above")
    return _unfinished(exercise, mode, case, ERROR, message, start)


__all__ = ["CHOICES", "NotContained", "PROCESS_ENV", "check_in_child", "prewarm",
           "process_choice", "retire", "use_child"]
