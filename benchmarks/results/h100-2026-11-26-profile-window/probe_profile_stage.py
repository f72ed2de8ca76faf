"""Where the profile stage's ncu time goes: per-kernel timestamps of one notebook's run."""
import json, os, sys, time
from dataclasses import asdict
from pathlib import Path
import grader.ncu as ncu
from grader import exercises as catalogue
from grader.notebook import load
from grader.profiling import profile_notebook

OUT = Path(os.environ["OUT"]) / "probe20"; OUT.mkdir(parents=True, exist_ok=True)
lesson = sys.argv[1]; tag = sys.argv[2]; extra = sys.argv[3:]
orig = ncu.command
count = [0]
def command(kernels, metrics, report):
    args = orig(kernels, metrics, report)
    count[0] += 1
    log = OUT / f"{lesson}-{tag}-{count[0]}.log"
    return [sys.executable, str(Path(__file__).parent / "tsw.py"), str(log), args[0], *extra, *args[1:]]
ncu.command = command
path = catalogue.solution_notebook(lesson)
nb = load(path)
ids = [i for i in nb.exercise_ids() if catalogue.get(i).metric_rules]
exs = [catalogue.get(i) for i in ids]
cells = [asdict(c) for c in nb.program_for(ids[-1])]
t = time.perf_counter()
sections = profile_notebook(exs, cells)
took = time.perf_counter() - t
res = {i: [o["status"] for o in s["rules"]] for i, s in sections.items()}
print(tag, lesson, f"{took:.2f} s", res, flush=True)
with open(OUT / "summary.jsonl", "a") as f:
    f.write(json.dumps({"lesson": lesson, "tag": tag, "extra": extra, "seconds": took, "statuses": res}) + "\n")
