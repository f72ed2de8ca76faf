"""`grader check NOTEBOOK`, printing each ncu run it makes (named or marked segments) and why a
named split failed. Usage: python ncu_runs_of_a_check.py NOTEBOOK (gpu mode)."""
import sys
import grader.profiling as P
_run, _split = P._profile_run, P.split_report
def run(exercises, programs, timeout, workdir, on_event, found, reasons, first=None):
    print("NCU RUN", "marked" if first is not None else "named", [e.id for e in exercises],
          [p[0] for p in programs], flush=True)
    return _run(exercises, programs, timeout, workdir, on_event, found, reasons, first)
def split(launches, segments, complete=True):
    try:
        return _split(launches, segments, complete)
    except Exception as exc:
        print("UNSPLIT", exc, flush=True)
        print("  report:", [l["kernel"][:40] for l in launches], flush=True)
        print("  segments:", segments, flush=True)
        raise
P._profile_run, P.split_report = run, split
sys.argv = ["grader", "check", sys.argv[1]]
from grader.cli import app
app()
