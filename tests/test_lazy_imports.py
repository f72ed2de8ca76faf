"""grader.lazy_imports: a grading process binds matplotlib.pyplot lazily (it loads at first use)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys
{install}
import matplotlib.pyplot as plt
before = "matplotlib.figure" in sys.modules
figure = plt.figure()
plt.close(figure)
print(before, "matplotlib.figure" in sys.modules)
"""


def loaded_before_and_after_use(install: bool) -> str:
    code = PROBE.format(install="from grader import lazy_imports; lazy_imports.install()"
                        if install else "")
    env = dict(os.environ, MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-2:]


def test_pyplot_loads_at_its_first_use_only():
    assert loaded_before_and_after_use(install=False) == ["True", "True"]  # eager: at import
    assert loaded_before_and_after_use(install=True) == ["False", "True"]  # lazy: at use


def test_the_runner_installs_it_before_the_job(tmp_path, monkeypatch):
    from grader import lazy_imports, runner

    seen = []

    def run_job(job, events):
        seen.append(any(isinstance(f, lazy_imports.LazyFinder) for f in sys.meta_path))
        events.file.close()  # the process's own file: closed at its exit

    monkeypatch.setattr(runner, "run_job", run_job)
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"action": "check", "exercise_ids": []}))
    before = list(sys.meta_path)
    try:
        assert runner.main([str(job), str(tmp_path / "events.jsonl")]) == 0
    finally:
        sys.meta_path[:] = before
    assert seen == [True]
    lazy_imports.install()
    lazy_imports.install()
    try:
        assert sum(isinstance(f, lazy_imports.LazyFinder) for f in sys.meta_path) == 1
    finally:
        sys.meta_path[:] = before


BLAS_PROBE = """
import importlib, sys
import numba.cuda
{skip}
maths = importlib.import_module("numba.cuda.np.arraymath")
print(maths._HAVE_BLAS, "scipy.linalg" in sys.modules)
import scipy.linalg  # a cell's own import still works
print(scipy.linalg.__name__)
"""


def blas_probe(skip: bool) -> list[str]:
    code = BLAS_PROBE.format(skip="from grader import lazy_imports; lazy_imports.skip_blas_probe()"
                             if skip else "")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_numba_cuda_array_maths_load_without_importing_scipy_linalg():
    assert blas_probe(skip=False) == ["True", "True", "scipy.linalg"]  # the probe imports it
    assert blas_probe(skip=True) == ["False", "False", "scipy.linalg"]  # hidden, then usable
