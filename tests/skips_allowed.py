"""The skips a test run may have, each with its reason; ``conftest.py`` fails any other.

A skipped test proves nothing, so a green run must not hide one: each entry names the tests
(a pattern of pytest node ids, without their parameters) and the reason they may be skipped
for (a regular expression, matched in full), and in which mode. What is allowed:

* tests of what only a GPU has (a launch through the CUDA driver, device memory, Nsight
  Compute and compute-sanitizer on real kernels, the driver's occupancy calculator), in
  simulator mode; each has a simulator-mode test of its logic beside it;
* on a GPU, the tests of simulator-only features, and what needs a newer GPU than the one
  there (stmatrix: compute capability 9.0);
* the tests of ncu and compute-sanitizer where the tool is not installed, skipped before they
  start with that reason.

Nothing else: a missing browser (CI installs Chromium), ruff, Playwright, or the simulator's
sanitizer turned off fail the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

NO_GPU = r"needs a real NVIDIA GPU \(simulator mode\)"
NO_NCU = r"Nsight Compute \(ncu\) is not installed"
NO_SANITIZER = r"compute-sanitizer is not installed"


@dataclass(frozen=True)
class Allowed:
    tests: str    # fnmatch pattern of node ids, parameters left out
    reason: str   # regular expression the skip's reason must match in full
    modes: tuple[str, ...] = ("sim", "gpu")

    def covers(self, nodeid: str, reason: str, mode: str) -> bool:
        return (mode in self.modes and fnmatchcase(nodeid.split("[", 1)[0], self.tests)
                and re.fullmatch(self.reason, reason) is not None)


def _gpu_only(*tests: str) -> list[Allowed]:
    return [Allowed(t, NO_GPU, ("sim",)) for t in tests]


ALLOWED = [
    *_gpu_only(
        "tests/test_batch.py::test_gpu_class_on_the_default_local_cluster",
        "tests/test_collectives.py::test_gpu_occupancy_and_large_dynamic_shared_memory",
        "tests/test_collectives.py::test_occupancy_estimate_agrees_with_the_driver",
        "tests/test_grading_phases.py::test_one_ncu_run_profiles_every_exercise_of_a_notebook",
        "tests/test_grading_phases.py::test_racecheck_blames_only_the_exercise_without_its_barrier",
        "tests/test_grading_phases.py::test_a_task_s_tools_blame_only_the_notebook_whose_barrier_"
        "is_missing",
        "tests/test_kernel_code.py::test_on_a_gpu_racecheck_runs_where_there_is_shared_memory",
        "tests/test_kernel_cache.py::test_a_second_process_loads_the_kernel_the_first_compiled",
        "tests/test_launch.py::test_fast_path_is_taken_on_a_gpu",
        "tests/test_launch.py::test_a_prepared_launch_does_not_keep_its_last_arrays_alive",
        "tests/test_outputs.py::test_pooled_device_arrays_are_reused_only_when_nothing_holds_them",
        "tests/test_memory.py::test_device_arrays_come_back_from_the_pool_with_their_data_intact",
        "tests/test_memory_policy.py::test_pytorch_imported_after_the_pool_serves_its_next_blocks",
        "tests/test_metric_rules.py::test_metric_grading_on_the_gpu",
        "tests/test_sim_sanitizer.py::test_compute_sanitizer_catches_a_missing_barrier",
        "tests/test_workbook_runtime.py::test_timing_measures_a_kernel_on_the_gpu",
    ),
    Allowed("tests/test_memory_policy.py::test_alternating_torch_and_workbook_allocations_never_"
            "run_out", r"needs a GPU \(simulator mode\)", ("sim",)),
    # the tools, where they are missing
    Allowed("tests/test_metric_rules.py::test_metric_grading_on_the_gpu", NO_NCU),
    Allowed("tests/test_grading_phases.py::test_one_ncu_run_profiles_every_exercise_of_a_notebook",
            NO_NCU, ("gpu",)),
    Allowed("tests/test_grading_phases.py::test_racecheck_blames_only_the_exercise_without_its_"
            "barrier", NO_SANITIZER, ("gpu",)),
    Allowed("tests/test_grading_phases.py::test_a_task_s_tools_blame_only_the_notebook_whose_"
            "barrier_is_missing", NO_SANITIZER, ("gpu",)),
    Allowed("tests/test_kernel_code.py::test_on_a_gpu_racecheck_runs_where_there_is_shared_"
            "memory", NO_SANITIZER, ("gpu",)),
    Allowed("tests/test_sim_sanitizer.py::test_compute_sanitizer_catches_a_missing_barrier",
            NO_SANITIZER, ("gpu",)),
    Allowed("tests/test_memory_policy.py::test_alternating_torch_and_workbook_allocations_never_"
            "run_out", r"PyTorch is not installed", ("gpu",)),
    Allowed("tests/test_memory_policy.py::test_pytorch_imported_after_the_pool_serves_its_next_"
            "blocks", r"PyTorch is not installed", ("gpu",)),
    # on a GPU
    Allowed("tests/*", r"checks a simulator-only feature", ("gpu",)),
    # lesson 05's broken pointer jumping: on a GPU its stray walk is a fault that ends the
    # process's CUDA context (the other broken kernels of that test run on the GPU too)
    Allowed("tests/test_ccl_fused.py::test_the_checks_catch_broken_fused_kernels",
            r"a broken pointer jumping walks unwritten memory: .*", ("gpu",)),
    Allowed("tests/test_sim_foreign.py::test_stmatrix", r"stmatrix needs sm_90", ("gpu",)),
    Allowed("tests/test_fragment_literals.py::test_stmatrix_*", r"stmatrix needs sm_90",
            ("gpu",)),
    Allowed("tests/test_collectives.py::test_occupancy_estimate_agrees_with_the_driver",
            r"the estimate describes an SM of compute capability 9\.0 \(H100, H200\)", ("gpu",)),
]


def is_allowed(nodeid: str, reason: str, mode: str) -> bool:
    """Whether a skip of test ``nodeid`` for ``reason`` in ``mode`` is on the list."""
    return any(entry.covers(nodeid, reason, mode) for entry in ALLOWED)
