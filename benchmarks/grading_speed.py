"""How long grading takes, phase by phase (run on a GPU machine, or in simulator mode).

    python benchmarks/grading_speed.py OUT_DIR [--mode gpu] [--what solutions lessons ...]

Runs ``grader check`` as an instructor would (one command per target, a fresh
process each, everything included: start-up, compilation, compute-sanitizer,
ncu) and writes OUT_DIR/grading_speed.json and a markdown table: wall time per
command and per notebook, and each phase's share (check, the sanitizer tools,
the simulator pass, profiling), summed over the notebook's exercises.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grade(target: str, mode: str, out: Path, extra: list[str]) -> dict:
    """Time one ``grader check`` command and collect its report."""
    report = out / f"grading-{target.replace('/', '_')}.json"
    command = [sys.executable, "-m", "grader.cli", "check", target, "--mode", mode,
               "--json", str(report), *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    (out / f"grading-{target.replace('/', '_')}.log").write_text(proc.stdout + proc.stderr)
    data = json.loads(report.read_text()) if report.exists() else {"notebooks": []}
    notebooks = []
    for nb in data["notebooks"]:
        phases: dict[str, float] = {}
        for ex in nb["exercises"]:
            for phase, s in ex.get("timings", {}).items():
                phases[phase] = round(phases.get(phase, 0.0) + s, 1)
        statuses = [ex["status"] for ex in nb["exercises"]]
        notebooks.append({"path": nb["path"], "seconds": nb.get("seconds"),
                          "exercises": len(statuses), "passed": statuses.count("passed"),
                          "statuses": sorted(set(statuses)), "phase_seconds": phases})
    return {"target": target, "command": " ".join(command[2:]), "exit_code": proc.returncode,
            "seconds": round(seconds, 1), "notebooks": notebooks}


def table(runs: list[dict]) -> str:
    lines = ["| command | notebook | exercises (passed) | wall s | phase seconds (summed over "
             "exercises) |", "| --- | --- | --- | --- | --- |"]
    for run in runs:
        lines.append(f"| `{run['command']}` | all | | **{run['seconds']}** | exit "
                     f"{run['exit_code']} |")
        for nb in run["notebooks"]:
            phases = ", ".join(f"{k} {v}" for k, v in nb["phase_seconds"].items())
            lines.append(f"| | {Path(nb['path']).parent.name} | {nb['exercises']} "
                         f"({nb['passed']}) | {nb['seconds']} | {phases} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", default="gpu")
    parser.add_argument("--what", nargs="+", default=["lessons", "solutions"])
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="more options for grader check (e.g. --no-metrics)")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from workbook.bench import device_name

    device = device_name() if options.mode == "gpu" else "simulator"
    runs = []
    for target in options.what:
        runs.append(grade(target, options.mode, options.out, options.extra))
        print(f"{target}: {runs[-1]['seconds']} s (exit {runs[-1]['exit_code']})", flush=True)
        record = {"device": device, "date": datetime.date.today().isoformat(),
                  "mode": options.mode, "runs": runs}
        (options.out / "grading_speed.json").write_text(json.dumps(record, indent=1) + "\n")
        (options.out / "grading_speed.md").write_text(
            f"{device}, {record['date']}, {options.mode} mode\n\n" + table(runs))
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
