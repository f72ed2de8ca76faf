"""Run :mod:`grader.runner` over a list of exercises, in as few processes as it takes.

One child process works through the exercises in notebook order, so the lesson's
imports, the CUDA context and each kernel's compilation are paid once. The child
reports each step in an events file; when it hangs on an exercise (no progress for
``timeout`` seconds) its whole process group is killed, when it crashes the crash
is blamed on the exercise it was working on, and in both cases a fresh process
takes the remaining exercises. A student's hang or crash therefore costs that
exercise only, as if each had its own process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

POLL_SECONDS = 0.05
STARTUP_S = 60.0  # a process may take this long to start, whatever the timeout
STOP_GRACE_S = 10.0  # past a simulated case's own bound: for the simulator to stop and report it
STOP = threading.Event()  # set (Ctrl-C): every grading process is killed, no new one starts
HANG_HINT = ("an infinite loop, or threads waiting at a barrier some threads never reach?")


@dataclass
class Attempt:
    """One child process: what it reported, printed, and how it ended."""

    events: list[dict]
    output: str
    returncode: int | None
    timed_out: str | None = None  # the exercise it was killed on
    crashed: str | None = None  # the exercise it was working on when it died
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per exercise
    extra: dict = field(default_factory=dict)  # what the wrapper produced (an ncu report)

    def started(self) -> list[str]:
        return [e["start"] for e in self.events if "start" in e]

    def how_it_ended(self) -> str:
        code = self.returncode
        if code is not None and code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


# A grading process needs one CPU thread for numpy: OpenBLAS and OpenMP otherwise start a
# thread per core at import and keep them spinning after each call. Measured on a 16-core
# H100 machine (2026-11-26): `import numpy` alone cost 2.2 CPU-seconds in 0.3 s of wall time,
# and every grading process pays it.
ONE_THREAD_LIBRARIES = {name: "1" for name in (
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def child_env(mode: str) -> dict:
    env = dict(os.environ, **ONE_THREAD_LIBRARIES, WORKBOOK_MODE=mode, PYTHONUNBUFFERED="1",
               NUMBA_ENABLE_CUDASIM="1" if mode == "sim" else "0",
               MPLBACKEND="Agg",  # no display: skip matplotlib's search for a GUI
               # test buffers are exact-size allocations, so memcheck sees stray reads
               WORKBOOK_MEMORY_POOL="0")
    if writes_no_bytecode(env):
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", bytecode_folder())
    return env


def writes_no_bytecode(env) -> bool:
    """Whether Python keeps no bytecode here (``PYTHONDONTWRITEBYTECODE`` in ``env``, or
    this interpreter started with ``-B``)."""
    return bool(env.get("PYTHONDONTWRITEBYTECODE")) or sys.flags.dont_write_bytecode


def bytecode_folder() -> str:
    """The grading processes' own bytecode cache, for an environment that turns writing
    bytecode off (``PYTHONDONTWRITEBYTECODE``, as container images often do): without it,
    each of a notebook's six or more processes compiled the sources of numpy, numba and
    the grader again (measured on an H100 machine, 2026-11-26: 0.5-0.9 s of each
    process's start). The sources' own folders stay untouched."""
    return str(Path(tempfile.gettempdir()) / f"workbook-{os.getuid()}-bytecode")


def run_exercises(
    job: dict,
    timeout: float,
    wrap: Callable[[int, Path], tuple[Sequence[str], dict]] | None = None,
    on_event: Callable[[dict], None] | None = None,
    workdir: Path | None = None,
    env: dict[str, str] | None = None,
) -> list[Attempt]:
    """Run ``job`` (see :mod:`grader.runner`) until every exercise has had its turn.

    ``wrap(attempt_number, folder)`` returns the command prefix that runs the child
    under a tool (compute-sanitizer, ncu) and anything to keep about it; files it
    writes in ``folder`` outlive the call only where ``workdir`` is given. ``env`` is added to
    each child's environment.

    ``timeout`` bounds each stretch without progress (a test case, or the cells before
    the first); in the simulator the child bounds each case itself by ``timeout`` and
    reports what the threads were doing, and the process is killed only if that fails.
    """
    remaining = list(job["exercise_ids"])
    job = {**job, "timeout": timeout}
    attempts: list[Attempt] = []
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        while remaining and not STOP.is_set():
            folder = Path(workdir or tmp, str(len(attempts)))
            folder.mkdir(parents=True, exist_ok=True)
            prefix, extra = wrap(len(attempts), folder) if wrap else ((), {})
            attempt = _run_once({**job, "exercise_ids": remaining}, timeout, folder,
                                list(prefix), on_event, env or {})
            attempt.extra = extra
            attempts.append(attempt)
            started = attempt.started()
            if not started and attempt.timed_out is None:
                attempt.crashed = remaining[0]  # it ended before reaching the first exercise
            elif attempt.timed_out is None and attempt.returncode not in (0, None):
                attempt.crashed = started[-1]
            # every attempt moves on, past the last exercise it started (a profile job
            # starts each exercise twice: once to prepare it, once to profile it)
            remaining = remaining[remaining.index(started[-1]) + 1 if started else 1:]
    return attempts


def _run_once(job: dict, timeout: float, workdir: Path, prefix: list[str],
              on_event: Callable[[dict], None] | None, env: dict[str, str]) -> Attempt:
    job_path, events_path = workdir / "job.json", workdir / "events.jsonl"
    job_path.write_text(json.dumps(job))
    events_path.touch()
    command = [*prefix, sys.executable, "-m", "grader.runner", str(job_path), str(events_path)]
    with open(workdir / "output.txt", "w+") as output:
        proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True,
                                env={**child_env(job["mode"]), **env},
                                start_new_session=True)
        events: list[dict] = []
        timed_out = None
        clock = _Clock(job["exercise_ids"][0])  # start-up counts towards the first exercise
        with open(events_path) as reader:
            deadline = time.monotonic() + max(timeout, STARTUP_S)  # imports, CUDA context
            while True:
                finished = proc.poll() is not None
                for event in _new_events(reader):
                    events.append(event)
                    if "start" in event:
                        clock.switch(event["start"])
                    if "start" in event or "case" in event:
                        deadline = time.monotonic() + _allowed(event, job["mode"], timeout)
                    if on_event:
                        on_event(event)
                if finished:
                    break
                if STOP.is_set():
                    _kill(proc)
                    break
                if time.monotonic() > deadline:
                    timed_out = clock.current
                    _kill(proc)
                    events.extend(_new_events(reader))
                    break
                time.sleep(POLL_SECONDS)
        clock.switch(None)
        output.seek(0)
        text = output.read()
    return Attempt(events, text, proc.returncode, timed_out, seconds=clock.seconds)


class _Clock:
    """Wall time per exercise: each moment counts towards the exercise then in progress."""

    def __init__(self, first: str):
        self.current, self.since, self.seconds = first, time.monotonic(), {}

    def switch(self, exercise_id: str | None) -> None:
        now = time.monotonic()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.since
        self.current, self.since = exercise_id, now


def _allowed(event: dict, mode: str, timeout: float) -> float:
    """Seconds of no progress allowed after ``event``: in the simulator a case bounds itself
    (``timeout``, scaled up for large cases), and the process gets more before it is killed."""
    return 2 * timeout + STOP_GRACE_S if "case" in event and mode == "sim" else timeout


def _new_events(reader) -> list[dict]:
    """Complete JSON lines written since the last call (a partial last line waits)."""
    events = []
    while True:
        position = reader.tell()
        line = reader.readline()
        if not line.endswith("\n"):
            reader.seek(position)
            return events
        events.append(json.loads(line))


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def exercise_seconds(attempts: list[Attempt]) -> dict[str, float]:
    """Wall time each exercise took over all attempts, process start-up included."""
    total: dict[str, float] = {}
    for attempt in attempts:
        for exercise_id, seconds in attempt.seconds.items():
            total[exercise_id] = total.get(exercise_id, 0.0) + seconds
    return total
