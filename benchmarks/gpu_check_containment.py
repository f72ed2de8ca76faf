"""A notebook's check on a GPU, in a real Jupyter kernel: in the notebook's process or in the
warm child process, a kernel that never ends, the stop button, a partial-warp shuffle.

    python benchmarks/gpu_check_containment.py OUT [--mode gpu|sim] [--timeout S]

Runs one Jupyter kernel (nbclient) through lesson 02's kernels, as a student would:

1. the correct ``reduction.simple`` and ``reduction.shuffle`` checked in the notebook's own
   process (``WORKBOOK_CHECK_PROCESS=notebook``, as before) and in the child process (the
   default on a GPU), three times each, and once more after re-running the exercise cells:
   what the child costs a correct submission;
2. ``reduction.simple`` whose stride never doubles: how long the check takes to return, and
   its message; then the fixed kernel's check in the same Jupyter kernel;
3. the same hang stopped with SIGINT (Jupyter's stop button) 5 s into the check: how long
   the check takes to end; then the fixed kernel again;
4. a ``reduction.shared`` whose last warp shuffles without a guard in a block of fewer than
   32 threads (lanes past the block do not exist), and the guarded version.

Writes, as it goes: OUT/gpu_check_containment.json (every check: label, process, seconds,
status, messages), OUT/log.txt, OUT/notebook.ipynb (the executed notebook). Under 3
minutes on an H100. ``--mode sim`` runs the same steps in the simulator (a dry run: there
the simulator's own watchdog stops the hang, after ``--timeout`` seconds).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

RECORD = "@@record "
INTERRUPT_AFTER_S = 5.0
NO_STRIDE_UPDATE = ("        stride *= 2\n", "")
UNGUARDED = ("            other = cuda.shfl_down_sync(mask, value, offset)\n"
             "            if t + offset < lanes:  # a lane past the block does not exist\n"
             "                value += other\n",
             "            value += cuda.shfl_down_sync(mask, value, offset)\n")

SETUP = """\
%env WORKBOOK_MODE={mode}
%env WORKBOOK_CHECK_PROCESS={process}
import json, os, time
IMPORT_START = time.monotonic()
import workbook  # first: chooses simulator or GPU before numba.cuda is imported

# isort: split
import numpy as np
from numba import cuda, float32

from grader import check, contained

IMPORTED = time.monotonic()
MAX_TPB = 1024
FULL_MASK = 0xFFFFFFFF


def record(**fields):
    print({record!r} + json.dumps(fields), flush=True)


def timed(label, exercise_id, process):
    os.environ["WORKBOOK_CHECK_PROCESS"] = process
    start = time.monotonic()
    try:
        result = check(exercise_id)
        status, messages = result.status, result.messages
    except KeyboardInterrupt as exc:
        status, messages = "interrupted", [str(exc)]
    end = time.monotonic()
    record(label=label, exercise=exercise_id, process=process, start=start, end=end,
           seconds=round(end - start, 3), status=status, messages=messages)


device = cuda.get_current_device().name if workbook.MODE == "gpu" else "simulator"
record(label="setup", pid=os.getpid(), mode=workbook.MODE,
       device=device.decode() if isinstance(device, bytes) else device,
       import_seconds=round(IMPORTED - IMPORT_START, 3))
"""

WORKER_READY = """\
worker = contained._current[0] if contained._current else None
if worker:
    contained.wait_ready(worker)
record(label="child ready", started_at_import=worker is not None,
       start_seconds=round(worker.ready_at - worker.started, 3) if worker else None,
       ready_after_import=round(worker.ready_at - IMPORTED, 3) if worker else None)
"""


def timed_cells(label: str, exercise_id: str, process: str, times: int) -> list[str]:
    return [f"timed({label + (' ' + str(k) if times > 1 else '')!r}, {exercise_id!r}, "
            f"{process!r})" for k in range(1, times + 1)]


def cells(mode: str) -> list[tuple[str, str]]:
    """(role, source) of each cell: roles the driver acts on ("interrupt") or reads."""
    from solution_cells import exercise_cell

    from grader.exercises import correct_variants

    simple = exercise_cell("02_reduction", "reduction.simple")
    shuffle = exercise_cell("02_reduction", "reduction.shuffle")
    hang = simple.replace(*NO_STRIDE_UPDATE)
    (shared_shuffles,) = [v.new for v in correct_variants("reduction.shared")
                          if "then shuffles" in v.description]
    unguarded = shared_shuffles.replace(*UNGUARDED)
    assert hang != simple and unguarded != shared_shuffles, "a planted change did not apply"
    child = "auto" if mode == "gpu" else "child"  # the default on a GPU; asked for in the sim
    steps = [("setup", SETUP.format(mode=mode, process=child, record=RECORD)), ("code", simple),
             ("code", shuffle)]
    for exercise_id in ("reduction.simple", "reduction.shuffle"):
        steps += [("check", c) for c in timed_cells(f"{exercise_id} in the notebook",
                                                      exercise_id, "notebook", 3)]
    steps.append(("check", WORKER_READY))
    for exercise_id in ("reduction.simple", "reduction.shuffle"):
        steps += [("check", c) for c in timed_cells(f"{exercise_id} in the child",
                                                      exercise_id, child, 3)]
    steps += [("code", simple), ("code", shuffle)]  # the student runs the cells again
    for exercise_id in ("reduction.simple", "reduction.shuffle"):
        for process, where in (("notebook", "in the notebook"), (child, "in the child")):
            steps += [("check", c) for c in timed_cells(
                f"{exercise_id} {where}, cell run again", exercise_id, process, 1)]
    steps += [("code", hang), ("check", *timed_cells("never-ending kernel", "reduction.simple",
                                                       child, 1)),
              ("code", simple), ("check", *timed_cells("fixed kernel after the timeout",
                                                       "reduction.simple", child, 1)),
              ("code", hang), ("interrupt", *timed_cells("never-ending kernel, stop button",
                                                           "reduction.simple", child, 1)),
              ("code", simple), ("check", *timed_cells("fixed kernel after the stop button",
                                                       "reduction.simple", child, 1)),
              ("code", unguarded), ("check", *timed_cells(
                  "partial-warp shuffle without a guard", "reduction.shared", child, 1)),
              ("code", shared_shuffles), ("check", *timed_cells(
                  "partial-warp shuffle with the guard", "reduction.shared", child, 1))]
    return steps


class Output:
    """OUT/gpu_check_containment.json, OUT/log.txt and OUT/notebook.ipynb, kept current."""

    def __init__(self, folder: Path, mode: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.data = {"script": "benchmarks/gpu_check_containment.py", "mode": mode,
                     "started": datetime.datetime.now().isoformat(timespec="seconds"),
                     "versions": versions(), "records": [], "cells": []}
        self.log = open(folder / "log.txt", "a")  # noqa: SIM115  (closed by close())

    def say(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def save(self, nb) -> None:
        self.data["summary"] = summary(self.data["records"], self.data.get("sigint_sent"))
        (self.folder / "gpu_check_containment.json").write_text(json.dumps(self.data, indent=1))
        nbformat.write(nb, self.folder / "notebook.ipynb")

    def close(self) -> None:
        self.log.close()


def versions() -> dict:
    found = {"python": sys.version.split()[0]}
    for name in ("numba", "numba_cuda", "numpy", "ipykernel", "nbclient"):
        try:
            found[name] = __import__(name).__version__
        except (ImportError, AttributeError):
            found[name] = None
    try:
        found["gpu"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        found["gpu"] = None
    return found


def records_of(cell) -> list[dict]:
    found = []
    for output in cell.get("outputs", []):
        for line in output.get("text", "").splitlines():
            if line.startswith(RECORD):
                found.append(json.loads(line[len(RECORD):]))
    return found


def summary(records: list[dict], sigint_sent: float | None) -> dict:
    """Seconds per check (first, median of the next two, after the cell was run again), what
    the child costs a correct submission, how long the hang and the stop button took."""
    by_label = {r["label"]: r for r in records if "seconds" in r}

    def seconds(label):
        return by_label[label]["seconds"] if label in by_label else None

    def median(values):
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    found = {}
    for exercise_id in ("reduction.simple", "reduction.shuffle"):
        for where in ("in the notebook", "in the child"):
            first = seconds(f"{exercise_id} {where} 1")
            again = median([seconds(f"{exercise_id} {where} {k}") for k in (2, 3)])
            rerun = seconds(f"{exercise_id} {where}, cell run again")
            found[f"{exercise_id} {where}"] = {"first": first, "again": again,
                                               "cell run again": rerun}
        here, there = found[f"{exercise_id} in the notebook"], found[f"{exercise_id} in the child"]
        found[f"{exercise_id} child minus notebook"] = {
            key: (round(there[key] - here[key], 3)
                  if there[key] is not None and here[key] is not None else None)
            for key in here}
    for label in ("never-ending kernel", "fixed kernel after the timeout",
                  "fixed kernel after the stop button", "partial-warp shuffle without a guard",
                  "partial-warp shuffle with the guard"):
        if label in by_label:
            found[label] = {k: by_label[label][k] for k in ("seconds", "status")}
    stopped = by_label.get("never-ending kernel, stop button")
    if stopped and sigint_sent is not None:
        found["stop button"] = {"status": stopped["status"],
                                "seconds from SIGINT to the end of the check":
                                    round(stopped["end"] - sigint_sent, 3)}
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", choices=("gpu", "sim"), default="gpu")
    parser.add_argument("--timeout", type=float, default=None,
                        help="WORKBOOK_CHECK_TIMEOUT in the kernel (default: the grader's)")
    args = parser.parse_args(argv)
    from nbclient import NotebookClient

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                             os.environ.get("PYTHONPATH")]))
    os.environ.pop("WORKBOOK_CHECK_PROCESS", None)
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    if args.timeout is not None:
        os.environ["WORKBOOK_CHECK_TIMEOUT"] = str(args.timeout)
    out = Output(args.out, args.mode)
    steps = cells(args.mode)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for _, src in steps])
    client = NotebookClient(nb, timeout=150, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT)}})
    pid = None
    try:
        with client.setup_kernel():
            for index, ((role, _), cell) in enumerate(zip(steps, nb.cells)):
                timer = None
                if role == "interrupt" and pid is not None:
                    def stop(pid=pid):
                        out.data["sigint_sent"] = time.monotonic()
                        os.kill(pid, signal.SIGINT)  # what Jupyter's stop button does

                    timer = threading.Timer(INTERRUPT_AFTER_S, stop)
                    timer.start()
                start = time.monotonic()
                client.execute_cell(cell, index)
                wall = round(time.monotonic() - start, 3)
                if timer is not None:
                    timer.cancel()
                records = records_of(cell)
                errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in cell.outputs
                          if o["output_type"] == "error"]
                pid = next((r["pid"] for r in records if "pid" in r), pid)
                out.data["records"].extend(records)
                out.data["cells"].append({"index": index, "role": role, "wall": wall,
                                          "errors": errors})
                for r in records:
                    out.say(f"[{index}] {r.get('label')}: {r.get('status', '')} "
                            f"{r.get('seconds', '')} s {json.dumps(r.get('messages', ''))[:400]}"
                            if "seconds" in r else f"[{index}] {json.dumps(r)}")
                if errors:
                    out.say(f"[{index}] cell errors: {errors}")
                out.save(nb)
    finally:
        out.save(nb)
        out.say(f"summary: {json.dumps(out.data['summary'], indent=1)}")
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
