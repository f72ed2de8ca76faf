"""The check's side of the compile worker: started once, on first use, for the process.

:func:`compiler` is the process's :class:`Compiler`. ``submit(kernel, argtypes)`` packs
the kernel and hands it to the worker at once (the worker compiles while the simulator
runs); ``wait(pending)`` returns its :class:`Verdict`. Verdicts are cached by the packed
kernel (its code, the globals, closures and device functions it reaches) and the
argument types: checking unchanged code again compiles nothing.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from grader.gpu_compile.payload import Unsendable, pack
from grader.gpu_compile.worker import read_frame, write_frame

ROOT = Path(__file__).resolve().parents[2]
ANSWER_SECONDS = 120.0  # longest wait for the worker's answer about one kernel
MAX_CRASHES = 3  # worker processes that may end unexpectedly before the step gives up


@dataclass
class Verdict:
    """What the compiler said about a kernel: ``ok``, or ``error`` (the worker's record of
    the compiler's rejection), or ``skipped`` (why it could not be asked)."""

    ok: bool = False
    error: dict | None = None
    skipped: str | None = None
    cached: bool = False
    seconds: float = 0.0


@dataclass
class Pending:
    key: str
    sources: dict[str, str] = field(default_factory=dict)  # the kernel's files (messages)
    done: threading.Event = field(default_factory=threading.Event)
    verdict: Verdict | None = None

    def settle(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.done.set()


def _settled(key: str, verdict: Verdict, sources: dict | None = None) -> Pending:
    pending = Pending(key, sources or {})
    pending.settle(verdict)
    return pending


class _Worker:
    """One worker process: its requests in flight, a thread that sends and one that reads."""

    def __init__(self, command: list[str], on_answer, env: dict[str, str]):
        env = dict(os.environ, **env, NUMBA_ENABLE_CUDASIM="0", WORKBOOK_MODE="gpu")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, env=env)
        self.pending: dict[int, Pending] = {}
        self.outbox: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.unavailable: str | None = None
        self.ended: str | None = None  # why no more answers will come
        self.on_answer = on_answer
        threading.Thread(target=self._send, daemon=True, name="gpu-compile-requests").start()
        threading.Thread(target=self._read, daemon=True, name="gpu-compile-answers").start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, number: int, pending: Pending, message: dict) -> None:
        with self.lock:
            if self.ended is None:
                self.pending[number] = pending
        if self.ended is not None:
            pending.settle(Verdict(skipped=self.ended))
            return
        self.outbox.put({"id": number, **message})

    def stop(self) -> None:
        self.outbox.put(None)
        self.process.kill()
        self.process.wait()
        self._end("the compiler process was stopped")

    def _send(self) -> None:
        stdin = self.process.stdin
        try:
            while (message := self.outbox.get()) is not None:
                write_frame(stdin, message)
        except (OSError, ValueError):  # the worker ended: _read reports it
            pass
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _read(self) -> None:
        stdout = self.process.stdout
        with stdout:
            while (answer := read_frame(stdout)) is not None:
                if "unavailable" in answer:
                    self.unavailable = answer["unavailable"]
                if "id" not in answer:
                    continue
                with self.lock:
                    pending = self.pending.pop(answer["id"], None)
                if pending is not None:
                    self.on_answer(pending, answer)
        code = self.process.wait()
        self._end(self.unavailable or f"the compiler process ended (exit code {code})"
                                      f"{self._stderr_tail()}")
        self.stderr.close()

    def _stderr_tail(self) -> str:
        try:
            self.stderr.seek(0)
            tail = self.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        except (OSError, ValueError):
            return ""
        return (": " + " | ".join(tail)) if tail else ""

    def _end(self, why: str) -> None:
        """No more answers: every request in flight is skipped with ``why``."""
        self.outbox.put(None)  # the sending thread ends
        with self.lock:
            self.ended = self.ended or why
            pending, self.pending = list(self.pending.values()), {}
        for item in pending:
            item.settle(Verdict(skipped=why))


class Compiler:
    """The compile worker of a process, started on first use and kept for the process;
    the cache of verdicts."""

    def __init__(self, env: dict[str, str] | None = None):
        """``env``: variables for the worker process, on top of this process's."""
        self.command = [sys.executable, "-m", "grader.gpu_compile.worker"]
        self.env = dict(env or {})
        self.cache: dict[str, Verdict] = {}
        self.compiled = 0  # kernels the worker was asked to compile
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._numbers = 0
        self._crashes = 0

    @property
    def unavailable(self) -> str | None:
        """Why numba-cuda's compiler cannot run on this machine (None: it can, or not known
        yet)."""
        return self._worker.unavailable if self._worker else None

    def start(self) -> _Worker:
        """The running worker; a fresh one if there is none (it loads the compiler while
        the check goes on). After MAX_CRASHES crashes the last one is kept: unavailable."""
        with self._lock:
            worker = self._worker
            if worker is not None and not worker.alive() and not worker.unavailable:
                self._crashes += 1
                if self._crashes >= MAX_CRASHES:
                    worker.unavailable = f"{worker.ended or 'it ended'} ({self._crashes} times)"
            if worker is None or not (worker.alive() or worker.unavailable):
                self._worker = _Worker(self.command, self._settle, self.env)
            return self._worker

    def stop(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()

    def _settle(self, pending: Pending, answer: dict) -> None:
        verdict = Verdict(ok=answer["ok"], error=answer.get("error"),
                          seconds=answer.get("seconds", 0.0))
        if verdict.error and verdict.error.get("stage") == "send":
            verdict.skipped = f"the kernel could not be rebuilt for the compiler " \
                              f"({verdict.error['message']})"
            verdict.error = None
        else:
            self.cache[pending.key] = verdict
        pending.settle(verdict)

    def submit(self, kernel, argtypes: tuple) -> Pending:
        """Hand the kernel to the worker; never raises (a kernel that cannot be sent gets a
        skipped verdict at once)."""
        try:
            data, sources = pack(kernel)
            types = pickle.dumps(argtypes, protocol=pickle.HIGHEST_PROTOCOL)
        except Unsendable as exc:
            return _settled("", Verdict(skipped=f"the kernel reaches what only the simulator "
                                                 f"has ({exc})"))
        except Exception as exc:  # noqa: BLE001
            return _settled("", Verdict(skipped=f"{type(exc).__name__}: {exc}"))
        names = "\0".join(str(t) for t in argtypes)  # numba's unique names of the types
        key = hashlib.sha256(data + b"\0" + names.encode()).hexdigest()
        if key in self.cache:
            cached = self.cache[key]
            return _settled(key, Verdict(cached.ok, cached.error, cached.skipped, cached=True),
                            sources)
        worker = self.start()
        if worker.unavailable:
            return _settled(key, Verdict(skipped=worker.unavailable), sources)
        with self._lock:
            self._numbers += 1
            number = self._numbers
            self.compiled += 1
        pending = Pending(key, sources)
        worker.request(number, pending, {"kernel": data, "sources": sources, "argtypes": types})
        return pending

    def wait(self, pending: Pending, seconds: float = ANSWER_SECONDS) -> Verdict:
        """The verdict; a worker that does not answer in time is stopped (the next
        submission starts a fresh one)."""
        if not pending.done.wait(seconds):
            self.stop()
        return pending.verdict or Verdict(skipped=f"no answer from the compiler in {seconds:g} s")


_COMPILER: list[Compiler] = []


def compiler() -> Compiler:
    """The process's compiler (its worker starts on first use)."""
    if not _COMPILER:
        _COMPILER.append(Compiler())
        atexit.register(stop_compiler)
    return _COMPILER[0]


def stop_compiler() -> None:
    """Stop the process's compiler worker, if one started, and wait for its end: the exit
    handler of :func:`compiler`, which a process ending with ``os._exit`` calls itself."""
    for started in _COMPILER:
        started.stop()


__all__ = ["ANSWER_SECONDS", "Compiler", "Pending", "Verdict", "compiler", "stop_compiler"]
