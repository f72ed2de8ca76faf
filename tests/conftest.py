"""Shared pytest setup: pick the mode once, before anything imports numba.cuda.

Tests run in the mode ``WORKBOOK_MODE`` selects (``auto`` by default: the GPU
when there is one, the simulator otherwise). Markers:

* ``gpu`` -- needs a real GPU; skipped, with the reason, in simulator mode.
* ``sim_only`` -- exercises a simulator feature; skipped on a real GPU.
"""

import numpy as np
import pytest

import workbook


def pytest_configure(config):
    config.addinivalue_line("markers", "sim_only: exercises the CUDA simulator only")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if workbook.MODE == "sim" and "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs a real NVIDIA GPU (simulator mode)"))
        if workbook.MODE == "gpu" and "sim_only" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="checks a simulator-only feature"))


@pytest.fixture
def rng(request):
    """A fresh random generator per test; the seed is printed on failure."""
    seed = np.random.SeedSequence().entropy % (2**32)
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)
