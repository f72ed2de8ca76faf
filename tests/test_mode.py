"""Mode selection: environment variable, auto-detection and clear errors."""

import pytest

from workbook import mode


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(mode, "gpu_count", lambda: 0)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(mode, "gpu_count", lambda: 1)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)


def test_auto_without_gpu_is_sim(no_gpu, monkeypatch):
    monkeypatch.delenv(mode.ENV_VAR, raising=False)
    assert mode.resolve() == "sim"


def test_auto_with_gpu_is_gpu(one_gpu, monkeypatch):
    monkeypatch.setenv(mode.ENV_VAR, "auto")
    assert mode.resolve() == "gpu"


def test_environment_forces_sim_on_a_gpu_machine(one_gpu, monkeypatch):
    monkeypatch.setenv(mode.ENV_VAR, "sim")
    assert mode.resolve() == "sim"


def test_gpu_requested_without_gpu_names_the_fix(no_gpu):
    with pytest.raises(mode.ModeError, match="WORKBOOK_MODE=sim"):
        mode.resolve("gpu")


def test_unknown_mode_is_rejected(no_gpu):
    with pytest.raises(mode.ModeError, match="not one of auto, sim, gpu"):
        mode.resolve("cpu")


def test_switching_after_numba_import_is_refused(one_gpu):
    other = "gpu" if mode.current_mode() == "sim" else "sim"
    with pytest.raises(mode.ModeError, match="restart the kernel"):
        mode.select_mode(other)
