"""The allow-list of skips (tests/skips_allowed.py) and the hook that fails any other skip."""

import os
import re
import subprocess
import sys
from pathlib import Path

from skips_allowed import ALLOWED, NO_GPU, NO_NCU, is_allowed

ROOT = Path(__file__).resolve().parents[1]
GPU_SKIP = "needs a real NVIDIA GPU (simulator mode)"  # conftest's reason for a gpu test


def test_gpu_only_tests_may_skip_in_simulator_mode_only():
    node = "tests/test_launch.py::test_fast_path_is_taken_on_a_gpu"
    assert is_allowed(node, GPU_SKIP, "sim")
    assert not is_allowed(node, GPU_SKIP, "gpu")
    assert not is_allowed(node, "some other reason", "sim")
    assert not is_allowed("tests/test_launch.py::test_simulator_calls_the_kernel", GPU_SKIP, "sim")


def test_parameters_are_left_out_and_the_reason_must_match_in_full():
    node = ("tests/test_fragment_literals.py::test_stmatrix_stores_the_isa_layout"
            "[st_x1_kernel-False]")
    assert is_allowed(node, "stmatrix needs sm_90", "gpu")
    assert not is_allowed(node, "stmatrix needs sm_90 (or not)", "gpu")


def test_browser_ruff_and_a_turned_off_sanitizer_are_not_allowed():
    for node, reason in [
        ("tests/test_browser.py::test_lesson_runs_top_to_bottom",
         "no browser at /usr/bin/chromium"),
        ("tests/test_packaging.py::test_code_is_ruff_clean", "ruff is not installed"),
        ("tests/test_ccl_exercises.py::test_buggy_variant_rejected",
         "the simulator's race checks are turned off"),
        ("tests/test_metric_rules.py::test_rules_pass_the_correct_variants_recorded_on_a_gpu",
         "got empty parameter set ['exercise_id', 'run']"),
    ]:
        for mode in ("sim", "gpu"):
            assert not is_allowed(node, reason, mode), (node, reason, mode)


def test_every_entry_names_a_test_that_exists():
    for entry in ALLOWED:
        path, _, name = entry.tests.partition("::")
        files = sorted(ROOT.glob(path))
        assert files, f"{entry.tests}: no such file"
        if "*" in name or "?" in name:
            pattern = re.compile(name.replace("*", r"\w*"))
            assert any(re.search(rf"^def ({pattern.pattern})\(", f.read_text(), re.M)
                       for f in files), entry.tests
        elif name:
            text = files[0].read_text()
            assert re.search(rf"^def {name}\(", text, re.M), f"{entry.tests}: no such test"


def test_tool_reasons_are_the_ones_the_tests_give():
    """The ncu and compute-sanitizer skips name the tool as the allow-list expects."""
    from gpu_tools import NO_NCU_REASON, NO_SANITIZER_REASON

    assert re.fullmatch(NO_NCU, NO_NCU_REASON)
    assert re.fullmatch(r"compute-sanitizer is not installed", NO_SANITIZER_REASON)
    assert re.fullmatch(NO_GPU, GPU_SKIP)


SAMPLE = '''
import pytest


@pytest.mark.gpu
def test_fast_path_is_taken_on_a_gpu():
    pass


def test_not_on_the_list():
    pytest.skip("a tool is missing")


@pytest.mark.skipif(True, reason="no browser here")
def test_marked_not_on_the_list():
    pass


@pytest.mark.parametrize("x", [])
def test_without_cases(x):
    pass


@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False


def test_runs():
    pass
'''


def test_a_run_with_a_skip_not_on_the_list_fails(tmp_path):
    """pytest, with this conftest as a plugin, on a file that stands in for
    tests/test_launch.py: the GPU skip is allowed, every other skip fails the run (in a
    pytest-xdist worker too)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_launch.py").write_text(SAMPLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
               WORKBOOK_MODE="sim")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "xdist",
                          "-n", "1", "-rA", "-p", "no:cacheprovider", "tests/test_launch.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert re.search(r"SKIPPED .*test_fast_path_is_taken_on_a_gpu", out) or \
        "1 skipped" in out, out
    for name in ("test_not_on_the_list", "test_marked_not_on_the_list", "test_without_cases"):
        assert re.search(rf"(FAILED|ERROR) tests/test_launch.py::{name}", out), (name, out)
    assert "skipped (a tool is missing) in sim mode, which tests/skips_allowed.py does not " \
           "allow" in out, out
    assert re.search(r"XFAIL tests/test_launch.py::test_expected_to_fail", out), out
    assert re.search(r"PASSED tests/test_launch.py::test_runs", out), out
