"""The local cluster of ``grader batch``: how many workers this machine gets, and each
worker's environment.

A stage worker grades one task at a time: in gpu mode each notebook's check (a process
each), and the three compute-sanitizer tools and the simulator pass for the task's notebooks
together (a process each), side by side, then with metrics one ncu run that profiles the
task's notebooks (or, with profile workers, below, hands them to one); in sim mode the
check, a notebook's only process. The sizing rule of the stage workers (:func:`default_workers`):

* sim mode: one worker per CPU core;
* gpu mode, for each GPU: one worker per :data:`CORES_PER_WORKER` CPU cores of its share
  of the machine's cores, at most one per :data:`GPU_MEMORY_PER_WORKER` of its memory,
  and at least one;
* both: at most one worker per :data:`HOST_MEMORY_PER_WORKER` of the machine's memory
  (at least one per GPU in gpu mode).

Why 2.5 cores per worker: grading is bound by the CPU. On an H100 machine with 16 cores
(lesson 02, every phase, 2026-11-25) one worker graded 12.6 exercises a minute and kept
about 4.7 cores busy (a notebook's phases cost about 22 CPU-seconds per exercise); six
workers graded 43.5 a minute, twelve on two GPUs and 32 cores 67.7. A worker leaves its
cores idle while its notebook waits for the GPU (the ncu run, the slowest tool), so more
workers than 16 / 4.7 keep the cores busy: 16 cores / 2.5 = 6 workers, the best setting
measured. ``--workers`` overrides the rule; ``benchmarks/batch_throughput.py
--compare default workers=N`` measures the default against other counts.

Profiling is serialised per GPU, not per machine. Nsight Compute lets one process at a
time profile: it takes a lock file in ``$TMPDIR`` (``nsight-compute-lock``) from a
process's first profiled launch until it exits. With one ``/tmp`` for all, the ncu runs of
every GPU wait for each other, although each GPU's counters are its own. So each worker's
``TMPDIR`` is a folder of its GPU (:func:`gpu_temp_dir`): workers that share a GPU share
its lock, workers on different GPUs profile at the same time.

With ``profilers`` (``grader batch --profile-workers N``) each GPU also gets N profile
workers: the stage workers check notebooks, the profile workers run the ncu runs
(:mod:`grader.batch_profiles`), so that a stage worker never waits for ncu's lock. With two
per GPU, one run's start (its imports and cells, outside the lock) overlaps the other's
profiled launches. None by default: each stage worker profiles its own notebooks.

The memory budgets are allowances, not measurements: four CUDA processes with their
test buffers and compute-sanitizer's own allocations per worker; six Python processes
with numba loaded. They decide only on machines with little memory per core.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

from distributed.diagnostics.plugin import WorkerPlugin

ROLE_ENV = "WORKBOOK_BATCH_ROLE"  # "stage" or "profile": the worker's resource (local_cluster)
PROCESSES_ENV = "WORKBOOK_GRADER_PROCESSES"  # grader.grade.PROCESSES_ENV (not imported:
# importing grader.grade imports numba.cuda, which must wait for the mode to be chosen)
GiB = 1 << 30
CORES_PER_WORKER = 2.5  # gpu mode
GPU_MEMORY_PER_WORKER = 4 * GiB
HOST_MEMORY_PER_WORKER = {"gpu": 4 * GiB, "sim": 1 * GiB}


@dataclass(frozen=True)
class Machine:
    """What the sizing rule looks at: CPU cores, host memory, and the visible GPUs, each
    as (its name for ``CUDA_VISIBLE_DEVICES``, its memory in bytes; 0 when unknown)."""

    cores: int
    memory: int
    gpus: tuple[tuple[str, int], ...] = ()

    @classmethod
    def detect(cls, mode: str) -> Machine:
        """This machine: the cores and memory this process may use (affinity, cgroup
        limits), and in gpu mode the GPUs the CUDA driver shows it."""
        from dask.system import CPU_COUNT
        from distributed.system import MEMORY_LIMIT

        gpus: tuple[tuple[str, int], ...] = ()
        if mode == "gpu":
            from workbook.mode import gpu_count

            count = gpu_count()
            visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
                       if d.strip()]
            names = (visible or [str(i) for i in range(count)])[: max(1, count)]
            memory = gpu_memory(len(names))
            gpus = tuple(zip(names, memory))
        return cls(CPU_COUNT, MEMORY_LIMIT, gpus)


def gpu_memory(count: int) -> list[int]:
    """The memory of each of the first ``count`` CUDA devices in bytes (0 where the driver
    does not say), asked of ``libcuda`` through ctypes so that numba is not imported."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.cuInit(0) != 0:
            break
        sizes = []
        for ordinal in range(count):
            device, size = ctypes.c_int(0), ctypes.c_size_t(0)
            ok = (lib.cuDeviceGet(ctypes.byref(device), ordinal) == 0
                  and lib.cuDeviceTotalMem_v2(ctypes.byref(size), device) == 0)
            sizes.append(size.value if ok else 0)
        return sizes
    return [0] * count


def default_workers(mode: str, machine: Machine) -> list[int]:
    """Workers per GPU in gpu mode (the module's sizing rule), or ``[workers]`` in sim mode."""
    cap = max(1, machine.memory // HOST_MEMORY_PER_WORKER[mode]) if machine.memory else None
    if mode != "gpu":
        return [max(1, min(machine.cores, cap or machine.cores))]
    gpus = machine.gpus or (("0", 0),)
    share = machine.cores / len(gpus)
    per_gpu = []
    for _, memory in gpus:
        count = int(share / CORES_PER_WORKER)
        if memory:
            count = min(count, memory // GPU_MEMORY_PER_WORKER)
        per_gpu.append(max(1, count))
    while cap is not None and sum(per_gpu) > max(cap, len(gpus)):
        per_gpu[per_gpu.index(max(per_gpu))] -= 1  # the host's memory: take from the most
    return per_gpu


def gpu_temp_dir(device: str) -> Path:
    """The temporary folder of the workers on GPU ``device`` (created): ncu's lock file
    lives there, so that ncu runs on different GPUs do not wait for each other."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in device)
    folder = Path(tempfile.gettempdir()) / f"workbook-{os.getuid()}-gpu-{safe}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def shared_bytecode() -> dict[str, str]:
    """Where the environment turns bytecode off, the grading processes' bytecode cache
    (:func:`grader.session.bytecode_folder`), named here: a worker's own ``TMPDIR`` would
    give each GPU's workers a cache of their own, each compiled from nothing."""
    from grader.session import bytecode_folder, writes_no_bytecode

    if not writes_no_bytecode(os.environ) or os.environ.get("PYTHONPYCACHEPREFIX"):
        return {}
    return {"PYTHONPYCACHEPREFIX": bytecode_folder()}


def local_worker_env(mode: str, workers: int | None, machine: Machine | None = None,
                     profilers: int = 0) -> list[dict[str, str]]:
    """One environment per worker of the local cluster: ``workers`` of them, or as many as
    :func:`default_workers` gives. In gpu mode each worker sees one GPU
    (``CUDA_VISIBLE_DEVICES``, set before the worker process starts), the GPUs taken in
    turn, and its GPU's temporary folder (``TMPDIR``, :func:`gpu_temp_dir`);
    ``WORKBOOK_GRADER_PROCESSES`` (processes per phase) is one per six of the worker's
    cores, at most three, unless set. In gpu mode ``profilers`` profile workers per GPU
    follow (``WORKBOOK_BATCH_ROLE``: ``profile``; the others are ``stage``)."""
    machine = machine or Machine.detect(mode)
    inherited = os.environ.get(PROCESSES_ENV)
    if mode == "gpu":
        devices = [name for name, _ in machine.gpus] or ["0"]
        if workers:
            order = [devices[i % len(devices)] for i in range(workers)]
        else:  # per GPU as the rule says, taken in turn
            counts = default_workers(mode, machine)
            order = [devices[g] for k in range(max(counts)) for g, n in enumerate(counts)
                     if k < n]
        cores = max(1, machine.cores // len(order))
        processes = inherited or str(max(1, min(3, cores // 6)))  # grader.grade's default
        temp = {device: str(gpu_temp_dir(device)) for device in dict.fromkeys(order)}
        profile_order = [device for device in dict.fromkeys(order) for _ in range(profilers)]
        return [{"WORKBOOK_MODE": "gpu", "CUDA_VISIBLE_DEVICES": device, "TMPDIR": temp[device],
                 PROCESSES_ENV: processes, ROLE_ENV: role, **shared_bytecode()}
                for role, devices in (("stage", order), ("profile", profile_order))
                for device in devices]
    count = workers or default_workers(mode, machine)[0]
    return [{"WORKBOOK_MODE": "sim", "NUMBA_ENABLE_CUDASIM": "1", PROCESSES_ENV: inherited or "1",
             ROLE_ENV: "stage"} for _ in range(count)]


def local_cluster(envs: list[dict[str, str]]):
    """A cluster on this machine: one single-threaded worker process per environment
    (a dask.distributed SpecCluster of Nannies, each with its ``env``), with one unit of
    the resource its role names (``WORKBOOK_BATCH_ROLE``: ``stage`` by default)."""
    from distributed import Nanny, Scheduler, SpecCluster

    quiet = logging.ERROR
    workers = {f"grader-{env.get(ROLE_ENV, 'stage')}-{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "host": "127.0.0.1", "env": env, "memory_limit": 0,
        "resources": {env.get(ROLE_ENV, "stage"): 1}, "silence_logs": quiet}}
        for i, env in enumerate(envs)}
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
