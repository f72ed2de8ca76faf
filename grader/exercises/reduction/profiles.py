"""Lesson 02's profiling launches (GPU only): what Nsight Compute measures for the metric
rules, made the same way for the student's kernel and the reference solution."""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader import profiled_range as R
from grader.exercises.reduction.cases import THREADS
from grader.exercises.reduction.runs import NO_INDEX, kernel_for

PROFILE_N = 1 << 25  # 128 MiB: long enough for stable DRAM metrics


@L.built_once
def _profile_input(n: int) -> np.ndarray:
    return np.random.default_rng(0).random(n, dtype=np.float32)


def _sms() -> int:
    return L.cuda().get_current_device().MULTIPROCESSOR_COUNT


def single_block(entry: str):
    """One block of 1024 threads over 2048 floats, after a small warm-up launch (outside the
    profiled range)."""
    def profile(ns):
        x = _profile_input(2048)
        out = L.output(1, 0, np.float32)
        with R.unprofiled():
            L.launch(ns[entry], 1, 32, L.cuda().to_device(x[:64]), out)
        L.launch(ns[entry], 1, 1024, L.cuda().to_device(x), out)

    return profile


def multi_block(entry: str, per_block=None):
    """PROFILE_N floats over enough blocks of ``per_block(ns, threads)`` elements each, or
    (without ``per_block``) a grid of 8 blocks per SM for the grid-stride kernels."""
    def profile(ns):
        x = _profile_input(PROFILE_N)
        out = L.output(1, 0, np.float32)
        kernel, tpb = ns[entry], THREADS["gpu"]
        with R.unprofiled():  # a warm-up
            L.launch(kernel, 1, tpb, L.cuda().to_device(x[:1000]), out, 1000)
        grid = L.blocks_for(x.size, per_block(ns, tpb)) if per_block else 8 * _sms()
        L.launch(kernel, grid, tpb, L.cuda().to_device(x), out, x.size)

    return profile


def generic_sum(ns):
    """The generic kernel's first pass of a sum, as the grid-stride kernels are profiled."""
    kernel = kernel_for(ns["make_reduce_kernel"], "sum")
    x = _profile_input(PROFILE_N)
    grid, tpb = 8 * _sms(), THREADS["gpu"]
    part_v, part_i = L.output(grid, 0, np.float32), L.output(grid, 0, np.int64)

    def run(data):
        L.launch(kernel, grid, tpb, L.cuda().to_device(data), part_i, data.size, False,
                 np.float32(0), NO_INDEX, part_v, part_i)

    with R.unprofiled():  # a warm-up
        run(x[:1000])
    run(x)
