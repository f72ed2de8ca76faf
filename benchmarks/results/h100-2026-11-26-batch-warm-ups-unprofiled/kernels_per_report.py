import sys, tempfile
from dataclasses import asdict
from pathlib import Path
from workbook.mode import select_mode
select_mode("gpu")
from grader import exercises as C, ncu
from grader.notebook import load
from grader.profiling import REPORT, metric_names, profile_programs
from grader.runner import MARKER_KERNEL
import time
for lesson in sys.argv[1:]:
    t0 = time.time()
    exs = [e for e in C.LESSONS[lesson] if e.metric_rules]
    cells = [asdict(c) for c in load(C.solution_notebook(lesson)).program_for(exs[-1].id)]
    with tempfile.TemporaryDirectory() as tmp:
        found, why, runs = profile_programs(exs, [("solution", None, cells)], 600, Path(tmp))
        for k in range(len(runs)):
            ls = ncu.read_metrics(Path(tmp, str(k), REPORT), metric_names(exs))
            mk = sum(x["kernel"].startswith(MARKER_KERNEL + "[") for x in ls)
            print(lesson, f"report {k}:", len(ls), "kernels,", mk, "markers,", len(found),
                  "of", len(exs), "measured", f"{time.time()-t0:.1f} s", flush=True)
        print(lesson, "not measured:", why) if why else None
