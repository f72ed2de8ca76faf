"""What one grading process costs before its first exercise, and what each exercise adds:
the check, each compute-sanitizer tool and the simulator pass, on lesson 02's solution.

Runs each job with no exercise, with the first one, and with all of them, several times,
and reports wall and CPU seconds (the process and its children, from wait4)."""
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("WORKBOOK_MODE", "gpu")
from grader import kernel_cache, sanitizer  # noqa: E402
from grader.grade import exercises_in  # noqa: E402,F401
from grader.notebook import load  # noqa: E402
from grader.session import child_env  # noqa: E402
from grader.stages import run_checks  # noqa: E402
from grader.stages.simulate import SETTINGS  # noqa: E402

out = Path(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
nb = load(Path("solutions/02_reduction/reduction.ipynb"))
order = nb.exercise_ids()
cells = [asdict(c) for c in nb.program_for(order[-1])]
tool = sanitizer.find_tool()
rows = []


def run(label, job, prefix=(), env=None):
    with tempfile.TemporaryDirectory() as tmp:
        jp, ep = Path(tmp, "job.json"), Path(tmp, "events.jsonl")
        jp.write_text(json.dumps({**job, "timeout": 300}))
        ep.touch()
        cmd = [*prefix, sys.executable, "-m", "grader.runner", str(jp), str(ep)]
        t = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env={**child_env(job["mode"]), **(env or {})})
        outp = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t
        cpu = ru.ru_utime + ru.ru_stime
        events = [json.loads(x) for x in ep.read_text().splitlines()]
    res = [e["result"]["status"] for e in events if "result" in e]
    rows.append({"label": label, "wall": round(wall, 3), "cpu": round(cpu, 3),
                 "results": res, "status": status})
    print(f"{label:40s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  {res}", flush=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    if status != 0 and label.startswith("sanitize"):
        print(outp.decode()[-2000:])


with kernel_cache.for_notebook("gpu") as folder:
    # fill the kernel cache and the marks as the check stage does
    def mark(event):
        kernel_cache.mark_checked(event["result"]["id"], event.get("unneeded_tools"))
    run_checks(order, cells, "gpu", 300, None, lambda p, e: None, "check", mark)
    kernel_cache.mark_checked(None)
    env = {kernel_cache.CACHE_ENV: folder}
    base = {"cells": cells, "seed": None}
    for r in range(rounds):
        for n, ids in (("none", []), ("first", order[:1]), ("all", order)):
            run(f"check gpu {n}", {**base, "mode": "gpu", "action": "check",
                                   "exercise_ids": ids}, env=env)
            run(f"simulator {n}", {**base, "mode": "sim", "action": "check",
                                   "exercise_ids": ids}, env=SETTINGS)
            for t in sanitizer.TOOLS:
                run(f"sanitize {t} {n}", {**base, "mode": "gpu", "action": "sanitize",
                                          "tool": t, "exercise_ids": ids},
                    prefix=sanitizer.command(tool, t), env=env)
        for t in sanitizer.TOOLS:
            t0 = time.monotonic()
            p = subprocess.run([*sanitizer.command(tool, t), sys.executable, "-c",
                                "from numba import cuda; cuda.current_context()"],
                               capture_output=True)
            rows.append({"label": f"bare {t} context", "wall": round(time.monotonic() - t0, 3)})
            print(rows[-1], flush=True)
(out / "rows.json").write_text(json.dumps(rows, indent=1))
