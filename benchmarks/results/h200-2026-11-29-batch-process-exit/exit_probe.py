"""One ncu run over two copies of lesson 02's solution (a batch task's profile stage), the
profile process ending as usual or through libc's exit(), in turns: wall seconds per run and
whether every exercise was measured in the shared run (no marked or alone re-run)."""

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict

from grader import exercises as catalogue
from grader.notebook import load
from grader.profiling import PROFILED_AGAIN, profile_notebooks

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
nb = load("solutions/02_reduction/reduction.ipynb")
ids = nb.exercise_ids()
exs = [e for e in map(catalogue.get, ids) if e.metric_rules]
cells = [asdict(c) for c in nb.program_for(ids[-1])]
os.environ["WORKBOOK_REFERENCE_PROFILES"] = tempfile.mkdtemp()  # stored after the first run
rows = []
for r in range(ROUNDS + 1):
    for mode in ("usual", "libc"):
        if mode == "libc":
            os.environ["XP_PROFILE_EXIT"] = "libc"
        else:
            os.environ.pop("XP_PROFILE_EXIT", None)
        start = time.monotonic()
        sections = profile_notebooks([(exs, cells, None), (exs, cells, None)])
        wall = time.monotonic() - start
        notes = [s.get("note", "") for nbk in sections for s in nbk.values()]
        statuses = sorted({o["status"] for nbk in sections for s in nbk.values()
                           for o in s.get("rules", ())})
        row = {"round": r, "exit": mode, "wall_s": round(wall, 3),
               "again": sum(PROFILED_AGAIN in n for n in notes),
               "notes": sorted(set(n[:80] for n in notes if n)), "statuses": statuses}
        rows.append(row)
        print(json.dumps(row), flush=True)
json.dump(rows, open(sys.argv[2] if len(sys.argv) > 2 else "exit_probe.json", "w"), indent=1)
