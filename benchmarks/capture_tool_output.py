"""Capture the raw output of NVIDIA's tools on a GPU machine, for the tests' fixtures.

    python benchmarks/capture_tool_output.py OUT [REPORT.ncu-rep ...] [--dry-run]

The tests parse compute-sanitizer reports and ncu CSV; this writes the real thing, as it goes:

``OUT/tools/<tool>-<case>.txt``
    compute-sanitizer's whole output (stdout and stderr) for one case of
    ``benchmarks/sanitizer_demo.py`` (lesson 02's solutions and planted bugs), plus initcheck
    cases, run as the grader runs it: ``grader.sanitizer.command`` around the grader's runner
    (``grader.session.run_exercises``), the runner's exercise markers included.
``OUT/ncu/<report>.csv``
    ``ncu --import REPORT --page raw --csv`` for every ``tests/fixtures/ncu/*.ncu-rep`` and
    every report given on the command line.
``OUT/ncu/ldmatrix-bank-conflicts.csv``
    ``benchmarks/ldmatrix.py``'s own ncu run (``--csv --page raw``, its ``==PROF==`` lines
    included) over the plain and swizzled fragment kernels of lesson 01.
``OUT/manifest.json``
    device, date, commit, tool versions, and each capture's command, exit code and seconds
    (rewritten after every capture, so a run cut short still says what it did).

``--dry-run`` writes the manifest with every command it would run and runs none (no GPU
needed). Where a file of the same name is in ``tests/fixtures/tools/`` or ``tests/fixtures/ncu/``,
copy it over (``tests/tool_fixtures.py`` says which fixtures still wait for a capture).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import ncu as ncu_tools  # noqa: E402
from grader import sanitizer  # noqa: E402

FIXTURE_REPORTS = ROOT / "tests" / "fixtures" / "ncu"
SEED = 1  # the runner's inputs: the same on every capture
TIMEOUT = 300.0  # seconds one tool run may go without progress
# initcheck (uninitialised device memory) is not one of the grader's tools; its report is
# captured for the same lesson 02 cases: (name, exercise, text in the solution, replacement)
INITCHECK_CASES = [
    ("generic: solution", "reduction.generic", "", ""),
    ("generic: one slot for every block's result", "reduction.generic",
     "out_values[cuda.blockIdx.x] = value", "out_values[0] = value"),
]


@functools.cache
def _module(name: str):
    """A script of this folder, loaded as a module (once)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def sanitizer_cases() -> list[tuple[str, str, str, str, str]]:
    """(file stem, exercise, tool, text in the solution, replacement) of every capture: each
    case of benchmarks/sanitizer_demo.py under its tool, and the initcheck cases."""
    demo = _module("sanitizer_demo")
    cases = [(f"{tool}-{slug(name)}", exercise, tool, old, new)
             for name, exercise, tool, old, new, _ in demo.CASES]
    cases += [(f"initcheck-{slug(name)}", exercise, "initcheck", old, new)
              for name, exercise, old, new in INITCHECK_CASES]
    return cases


def sanitizer_job(exercise_id: str, old: str, new: str) -> dict:
    """The job the grader's sanitizer step gives its runner (grader.sanitizer.sanitize_notebook)
    for one exercise, with the planted bug."""
    demo = _module("sanitizer_demo")
    return {"mode": "gpu", "action": "sanitize", "exercise_ids": [exercise_id],
            "cells": demo.cells_for(exercise_id, old, new), "seed": SEED}


def sanitizer_command(tool_path: str, tool: str) -> list[str]:
    """compute-sanitizer's command line as the grader runs it (the runner's own arguments,
    a job and an events file, follow)."""
    return [*sanitizer.command(tool_path, tool), sys.executable, "-m", "grader.runner",
            "JOB.json", "EVENTS.jsonl"]


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--page", "raw", "--csv"]


class Capture:
    """Runs the captures and keeps the manifest up to date in OUT."""

    def __init__(self, out: Path, dry_run: bool):
        self.out, self.dry_run = out, dry_run
        self.manifest = {"date": datetime.date.today().isoformat(), "dry_run": dry_run,
                         "commit": _git("rev-parse", "HEAD"), "captures": []}
        out.mkdir(parents=True, exist_ok=True)

    def record(self, **entry) -> None:
        self.manifest["captures"].append(entry)
        (self.out / "manifest.json").write_text(json.dumps(self.manifest, indent=1) + "\n")
        status = "planned" if self.dry_run else f"exit {entry.get('returncode')}"
        print(f"{entry['file']}: {status}  ({' '.join(entry['command'])})", flush=True)

    def sanitizer_runs(self, tool_path: str) -> None:
        from grader.session import run_exercises

        folder = self.out / "tools"
        folder.mkdir(exist_ok=True)
        for stem, exercise_id, tool, old, new in sanitizer_cases():
            job = sanitizer_job(exercise_id, old, new)
            entry = {"file": f"tools/{stem}.txt", "exercise": exercise_id, "tool": tool,
                     "planted": new if old else None,
                     "command": sanitizer_command(tool_path, tool)}
            if not self.dry_run:
                start = time.monotonic()
                attempts = run_exercises(job, TIMEOUT, wrap=lambda n, folder, tool=tool: (
                    sanitizer.command(tool_path, tool), {}))
                (self.out / entry["file"]).write_text("".join(a.output for a in attempts))
                entry.update(returncode=[a.returncode for a in attempts],
                             timed_out=any(a.timed_out for a in attempts),
                             seconds=round(time.monotonic() - start, 1))
            self.record(**entry)

    def ncu_imports(self, ncu: str, reports: list[Path]) -> None:
        folder = self.out / "ncu"
        folder.mkdir(exist_ok=True)
        for report in reports:
            name = report.name.removesuffix(".ncu-rep")
            self.run_to_file(f"ncu/{name}.csv", import_command(ncu, report))

    def ldmatrix_bank_conflicts(self, ncu: str) -> None:
        bench = _module("ldmatrix")
        command = bench.ncu_command(ncu, list(bench.NCU_METRICS), bench.BANK_KERNELS)
        self.run_to_file("ncu/ldmatrix-bank-conflicts.csv", command, env=bench.NCU_ENV)

    def run_to_file(self, file: str, command: list[str], env: dict | None = None) -> None:
        """Run ``command``; its stdout goes to OUT/file, its stderr (if any) beside it."""
        entry = {"file": file, "command": command}
        if not self.dry_run:
            start = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                                  timeout=900, env=dict(os.environ, **(env or {})))
            (self.out / file).write_text(done.stdout)
            if done.stderr.strip():
                (self.out / f"{file}.stderr.txt").write_text(done.stderr)
            entry.update(returncode=done.returncode, seconds=round(time.monotonic() - start, 1))
        self.record(**entry)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=30).stdout.strip()
    except OSError:
        return ""


def _version(command: list[str]) -> str:
    """The last lines a ``--version`` command prints."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"not run: {exc}"
    return " | ".join((done.stdout or done.stderr).strip().splitlines()[-2:])


def _device() -> str:
    """The GPU's name, from nvidia-smi (this process keeps off the GPU)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no nvidia-smi"
    done = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the captured files")
    parser.add_argument("reports", type=Path, nargs="*",
                        help="more .ncu-rep reports to export as CSV")
    parser.add_argument("--dry-run", action="store_true",
                        help="write the manifest of what would run, run nothing")
    args = parser.parse_args(argv)

    reports = sorted(FIXTURE_REPORTS.glob("*.ncu-rep")) + list(args.reports)
    missing = [str(r) for r in args.reports if not r.exists()]
    if missing:
        parser.error(f"no such report: {', '.join(missing)}")
    tool_path = sanitizer.find_tool()
    ncu = ncu_tools.find_ncu()
    capture = Capture(args.out, args.dry_run)
    if args.dry_run:
        tool_path = tool_path or "compute-sanitizer"
        ncu = ncu or "ncu"
    else:
        absent = [name for name, path in (("compute-sanitizer", tool_path), ("ncu", ncu))
                  if path is None]
        if absent:
            print(f"not found: {', '.join(absent)} (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
            return 2
        capture.manifest.update(device=_device(),
                                compute_sanitizer=_version([tool_path, "--version"]),
                                ncu=_version([ncu, "--version"]),
                                numba_cuda=_version([sys.executable, "-c", "import numba_cuda; "
                                                     "print(numba_cuda.__version__)"]))
    capture.sanitizer_runs(tool_path)
    capture.ncu_imports(ncu, reports)
    capture.ldmatrix_bank_conflicts(ncu)
    # a tool that finds a planted bug exits with an error code: only a timeout fails those
    failed = [c["file"] for c in capture.manifest["captures"]
              if c.get("timed_out") or (c.get("returncode") not in (None, 0)
                                        and not c["file"].startswith("tools/"))]
    print(f"{len(capture.manifest['captures'])} captures in {args.out}" +
          (f"; these did not complete: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
