"""Shared pytest setup: pick the mode once, before anything imports numba.cuda.

Tests run in the mode ``WORKBOOK_MODE`` selects (``auto`` by default: the GPU
when there is one, the simulator otherwise). Markers:

* ``gpu`` -- needs a real GPU; skipped, with the reason, in simulator mode.
* ``sim_only`` -- exercises a simulator feature; skipped on a real GPU.
* ``gpu_alone`` -- profiles with ncu: on a GPU it waits until no other test (in any
  pytest-xdist worker) uses the GPU, and holds the others off while it runs, so that
  the counters and timings it compares are not disturbed.

A skip that is not on ``skips_allowed.py``'s list (with its reason) is reported as a failure:
a run is green only with every test run that this machine can run.
"""

import fcntl
import tempfile
from pathlib import Path

import numpy as np
import pytest
from skips_allowed import is_allowed

import workbook


def pytest_configure(config):
    config.addinivalue_line("markers", "sim_only: exercises the CUDA simulator only")
    config.addinivalue_line("markers", "gpu_alone: needs the GPU to itself (ncu)")


GPU_LOCK = Path(tempfile.gettempdir()) / "workbook-tests-gpu.lock"


@pytest.fixture(autouse=True)
def gpu_share(request):
    """On a GPU: a shared lock for every test, an exclusive one for ``gpu_alone`` tests."""
    if workbook.MODE != "gpu":
        yield
        return
    alone = request.node.get_closest_marker("gpu_alone") is not None
    with open(GPU_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if workbook.MODE == "sim" and "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs a real NVIDIA GPU (simulator mode)"))
        if workbook.MODE == "gpu" and "sim_only" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="checks a simulator-only feature"))


def skip_reason(report) -> str:
    """The reason a skipped test report gives (pytest keeps it as "Skipped: <reason>")."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip that ``skips_allowed.py`` does not list becomes a failure that says why."""
    report = (yield).get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if not is_allowed(item.nodeid, reason, workbook.MODE):
        report.outcome = "failed"
        report.longrepr = (f"skipped ({reason}) in {workbook.MODE} mode, which "
                           f"tests/skips_allowed.py does not allow: run what it needs, or add "
                           f"the test and its reason to that list")


@pytest.fixture(scope="module", autouse=True)
def no_simulated_threads_left():
    """A simulated kernel that was stopped (time limit, interrupt, error) must not leave
    threads behind: they would run on, slow every later test and confuse the watchdog's.
    The failure says where each one is, to find what kept it."""
    yield
    if workbook.MODE != "sim":
        return
    from sim_threads import LEFT_BEHIND, threads_left_behind

    from workbook.sim.watchdog import where_threads_are

    left = threads_left_behind(wait=5.0)
    LEFT_BEHIND.update(left)
    assert not left, (f"{len(left)} simulated CUDA threads still run after this module's "
                      f"tests: a stopped kernel left them behind. Where they are:\n"
                      f"{where_threads_are(left)}")


@pytest.fixture
def rng(request):
    """A fresh random generator per test; the seed is printed on failure."""
    seed = np.random.SeedSequence().entropy % (2**32)
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)
