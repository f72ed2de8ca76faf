"""Where a batch's CPU time goes, by grading phase, and how busy its GPUs are.

:class:`ProcessSampler` walks this process's descendants every ``interval`` seconds and
keeps each process's latest CPU time (user + system) and its largest resident memory,
filed under the phase it works for (:func:`phase_of`): ``check``, ``memcheck``,
``racecheck``, ``synccheck``, ``simulator``, ``profile`` (ncu and the report reader),
``worker`` (the Dask worker processes themselves), or ``other``. A process's last
``interval`` before it ends is not seen, and one that lives less than ``interval`` may
not be seen at all: compare the sampled sum with the exact total of
:func:`children_cpu_seconds`.

:class:`GpuSampler` reads utilisation and memory of every GPU every ``interval`` seconds,
from NVML (``pynvml``, where installed) or ``nvidia-smi``; without either it says so.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil

TOOLS = ("memcheck", "racecheck", "synccheck")
RANK = {"other": 0, "worker": 1}  # every grading phase: 2


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every finished descendant that was waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _phase_of_one(proc: psutil.Process, mode: str) -> str | None:
    """The phase ``proc`` itself shows (its command line, its mode), or None."""
    argv = proc.cmdline()
    if not argv:
        return None
    exe = Path(argv[0]).name
    if exe == "compute-sanitizer":
        tool = argv[argv.index("--tool") + 1] if "--tool" in argv[:-1] else "memcheck"
        return tool if tool in TOOLS else "other"
    if exe.startswith("ncu"):
        return "profile"
    text = " ".join(argv)
    if "_read_here" in text:  # grader.ncu's report reader
        return "profile"
    if "grader.runner" in text:
        child_mode = proc.environ().get("WORKBOOK_MODE", mode)
        return "simulator" if mode == "gpu" and child_mode == "sim" else "check"
    if "multiprocessing" in text and ("spawn_main" in text or "forkserver" in text):
        return "worker"
    return None


def phase_of(proc: psutil.Process, mode: str, root_pid: int) -> str:
    """The grading phase a descendant of ``root_pid`` works for. A process under a tool
    (compute-sanitizer, ncu) belongs to that tool's phase, whatever it runs itself (the
    grading runner a tool starts is that tool's work, not the check's); otherwise the
    first phase that it or an ancestor shows."""
    first = None
    current: psutil.Process | None = proc
    while current is not None and current.pid != root_pid:
        try:
            phase = _phase_of_one(current, mode)
        except (psutil.Error, OSError):
            phase = None
        if phase in (*TOOLS, "profile"):
            return phase
        first = first or phase
        current = current.parent()
    return first or "other"


class ProcessSampler:
    """``with ProcessSampler(mode) as sampler: ...``; then :meth:`by_phase`."""

    def __init__(self, mode: str, interval: float = 0.25, ignore: set[int] = frozenset()):
        self.mode, self.interval, self.ignore = mode, interval, ignore
        self.root = psutil.Process()
        self.seen: dict[tuple[int, float], dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-sampler", daemon=True)

    def __enter__(self) -> ProcessSampler:
        # descendants that were running before (a compile worker, another job's processes)
        # do not work for what is measured
        self.ignore = set(self.ignore) | {p.pid for p in self.root.children(recursive=True)}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        for proc in self.root.children(recursive=True):
            if proc.pid in self.ignore:
                continue
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    times = proc.cpu_times()
                    rss = proc.memory_info().rss
                record = self.seen.setdefault(key, {"phase": "other", "cpu": 0.0, "rss": 0,
                                                    "name": "?"})
                # read again each time: a process seen between fork and exec shows its parent's
                # command line until the exec (the pid and start time stay); a zombie shows
                # none. A grading phase outranks "worker", which outranks "other".
                phase = phase_of(proc, self.mode, self.root.pid)
                if RANK.get(phase, 2) >= RANK.get(record["phase"], 2):
                    record["phase"], record["name"] = phase, proc.name()
                record["cpu"] = max(record["cpu"], times.user + times.system)
                record["rss"] = max(record["rss"], rss)
            except (psutil.Error, OSError):
                continue

    def by_phase(self) -> dict[str, dict]:
        """Per phase: CPU seconds, processes seen, the largest resident memory (MiB)."""
        phases: dict[str, dict] = {}
        for record in self.seen.values():
            entry = phases.setdefault(record["phase"], {"cpu_seconds": 0.0, "processes": 0,
                                                        "max_rss_mib": 0.0, "names": set()})
            entry["cpu_seconds"] += record["cpu"]
            entry["processes"] += 1
            entry["max_rss_mib"] = max(entry["max_rss_mib"], record["rss"] / 2**20)
            entry["names"].add(record["name"])
        for entry in phases.values():
            entry["cpu_seconds"] = round(entry["cpu_seconds"], 2)
            entry["max_rss_mib"] = round(entry["max_rss_mib"], 1)
            entry["names"] = sorted(entry["names"])
        return dict(sorted(phases.items()))


class GpuSampler:
    """``with GpuSampler() as gpus: ...``; then :meth:`summary`: per GPU, mean and peak
    utilisation (% of the time a kernel ran) and peak memory used, with the memory used
    before the batch started. With nvidia-smi, one long-running ``nvidia-smi -lms``
    process does the sampling (:attr:`pids` names it, to leave out of CPU accounts)."""

    QUERY = ["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.samples: list[tuple[float, int, float, float]] = []  # time, gpu, util %, MiB
        self.baseline: dict[int, float] = {}
        self.pids: set[int] = set()
        self.source, self.reason = self._source()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._smi: subprocess.Popen | None = None

    @staticmethod
    def _source() -> tuple[str | None, str]:
        try:
            import pynvml

            pynvml.nvmlInit()
            return "nvml", ""
        except Exception:  # noqa: BLE001  (not installed, or no driver)
            pass
        if shutil.which("nvidia-smi"):
            return "nvidia-smi", ""
        return None, "no GPU readings: neither pynvml nor nvidia-smi is available"

    @staticmethod
    def _rows(text: str) -> list[tuple[int, float, float]]:
        rows = [line.split(",") for line in text.strip().splitlines() if line.strip()]
        return [(int(i), float(u), float(m)) for i, u, m in rows]

    def read(self) -> list[tuple[int, float, float]]:
        """(GPU index, utilisation %, memory used MiB) for each GPU, now."""
        if self.source == "nvml":
            import pynvml

            found = []
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
                used = pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
                found.append((index, float(util), used))
            return found
        if self.source == "nvidia-smi":
            out = subprocess.run(["nvidia-smi", *self.QUERY], capture_output=True, text=True,
                                 timeout=30).stdout
            return self._rows(out)
        return []

    def __enter__(self) -> GpuSampler:
        if self.source:
            try:
                self.baseline = {i: used for i, _, used in self.read()}
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self.source, self.reason = None, f"no GPU readings: {exc}"
        if self.source == "nvidia-smi":
            self._smi = subprocess.Popen(
                ["nvidia-smi", *self.QUERY, "-lms", str(round(self.interval * 1000))],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.pids.add(self._smi.pid)
            self._thread = threading.Thread(target=self._follow, daemon=True)
        elif self.source == "nvml":
            self._thread = threading.Thread(target=self._poll, daemon=True)
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._smi is not None:
            self._smi.terminate()
            self._smi.wait()
        if self._thread is not None:
            self._thread.join()
        if self._smi is not None:
            self._smi.stdout.close()

    def _follow(self) -> None:
        for line in self._smi.stdout:
            try:
                self.samples += [(time.monotonic(), *row) for row in self._rows(line)]
            except ValueError:  # a header or a partial line
                continue

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self.samples += [(now, i, u, m) for i, u, m in self.read()]
            self._stop.wait(self.interval)

    def summary(self) -> dict:
        if not self.source:
            return {"measured": False, "reason": self.reason}
        gpus = {}
        for index in sorted({s[1] for s in self.samples}):
            mine = [s for s in self.samples if s[1] == index]
            utils = [s[2] for s in mine]
            gpus[str(index)] = {
                "mean_utilisation_pct": round(sum(utils) / len(utils), 1),
                "max_utilisation_pct": max(utils),
                "max_memory_used_mib": max(s[3] for s in mine),
                "memory_used_before_mib": self.baseline.get(index),
                "samples": len(mine)}
        return {"measured": bool(gpus), "source": self.source, "interval_s": self.interval,
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpus": gpus,
                **({} if gpus else {"reason": "no sample was read"})}
