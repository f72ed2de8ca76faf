"""Profile each named lesson's solution notebook once (grader.profiling.profile_programs, as
the profile stage does, solution program only) and print, per ncu report: its kernels, the
marker kernels among them, how its segments are told apart (segment events of 4 fields:
named; 3: marked, the fallback run) and how many exercises were measured.

    python kernels_per_report.py 01_ldmatrix 02_reduction 03_softmax 04_layernorm 05_ccl
"""
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from workbook.mode import select_mode

select_mode("gpu")
from grader import exercises as C, ncu  # noqa: E402
from grader.notebook import load  # noqa: E402
from grader.profiling import REPORT, metric_names, profile_programs  # noqa: E402
from grader.runner import MARKER_KERNEL  # noqa: E402

for lesson in sys.argv[1:]:
    t0 = time.time()
    exs = [e for e in C.LESSONS[lesson] if e.metric_rules]
    cells = [asdict(c) for c in load(C.solution_notebook(lesson)).program_for(exs[-1].id)]
    with tempfile.TemporaryDirectory() as tmp:
        found, why, runs = profile_programs(exs, [("solution", None, cells)], 600, Path(tmp))
        for k, run in enumerate(runs):
            fields = sorted({len(e["segment"]) for e in run.events if "segment" in e})
            kind = {(4,): "named", (3,): "marked"}.get(tuple(fields), f"fields {fields}")
            try:
                ls = ncu.read_metrics(Path(tmp, str(k), REPORT), metric_names(exs))
            except ncu.NotAssessed as exc:
                print(lesson, f"report {k}: not read ({exc})")
                continue
            mk = sum(x["kernel"].startswith(MARKER_KERNEL + "[") for x in ls)
            print(lesson, f"report {k} ({kind}):", len(ls), "kernels,", mk, "markers,",
                  len(found), "of", len(exs), "measured", f"{time.time() - t0:.1f} s",
                  flush=True)
        if why:
            print(lesson, "not measured:", why)
