"""Experiment: ncu's profile processes on reserved cores, every other grading process off them
(PROBE_PIN_CORES=K reserves cores 0..K-1 for the processes started as ncu)."""
import os
import subprocess

_K = int(os.environ.get("PROBE_PIN_CORES", "0") or 0)
if _K:
    _all = sorted(os.sched_getaffinity(0))
    _ncu_cores, _other_cores = set(_all[:_K]), set(_all[_K:])
    _orig_init = subprocess.Popen.__init__

    def _init(self, args, *a, **kw):
        first = os.path.basename(str(args[0] if isinstance(args, (list, tuple)) else args).split()[0])
        text = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
        if "grader" in text or "compute-sanitizer" in first or first.startswith("ncu"):
            cores = _ncu_cores if first.startswith("ncu") else _other_cores
            previous = kw.get("preexec_fn")

            def pin(cores=cores, previous=previous):
                os.sched_setaffinity(0, cores)
                if previous:
                    previous()
            kw["preexec_fn"] = pin
        _orig_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = _init
