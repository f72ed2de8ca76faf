"""Lesson 04's profiled launches (GPU only): one large launch of each kernel exercise,
after a small warm-up one outside the profiled range, for the metric rules to measure."""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader import profiled_range as R
from grader.exercises.layernorm.buffers import device_args
from grader.exercises.layernorm.cases import NormCase
from grader.exercises.layernorm.runs import launch_with_shared, warp_kernel

WARP_SHAPE = (32768, 1024)   # 128 MiB of float32 each way
BLOCK_SHAPE = (8192, 4096)   # 128 MiB of float32 each way
DISPATCH_SHAPE = (393216, 16)  # 24 MiB of float32 each way


def _profile_inputs(shape, dtype=np.float32) -> dict:
    """A profile's inputs: a fresh dict (``device_args`` records its buffers in it) of the
    arrays built once."""
    return dict(_host_inputs(shape, dtype))


@L.built_once
def _host_inputs(shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = (3 + rng.standard_normal(shape, dtype=np.float32)).astype(dtype)
    case = NormCase(shape[1], "normal", rows=shape[0], dtype=np.dtype(dtype).name)
    return {"x": x, "gamma": np.ones(shape[1], dtype), "beta": np.zeros(shape[1], dtype),
            "affine": True, "eps": np.float32(1e-5), "case": case}


def profile_warp(ns):
    kernel = warp_kernel(ns["make_warp_layernorm"], 32, 32, 1)
    small = device_args(_profile_inputs((64, 1000)))
    with R.unprofiled():  # a warm-up
        L.launch(kernel, 4, 128, *small)
    args = device_args(_profile_inputs(WARP_SHAPE))
    L.launch(kernel, WARP_SHAPE[0] // 4, 128, *args)


def profile_block(entry, block, shared):
    """The profiled launch of the block kernel ``entry`` in blocks of ``block`` threads."""
    def profile(ns):
        kernel = ns[entry]
        small = device_args(_profile_inputs((8, 2000)))
        with R.unprofiled():  # a warm-up
            launch_with_shared(kernel, 8, block, 4 * 2000 if shared else 0, *small)
        args = device_args(_profile_inputs(BLOCK_SHAPE))
        launch_with_shared(kernel, BLOCK_SHAPE[0], block,
                           4 * BLOCK_SHAPE[1] if shared else 0, *args)

    return profile


@L.built_once
def _dispatch_input(shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def profile_dispatch(ns):
    """layer_norm on DISPATCH_SHAPE, after a warm-up call on 64 rows (outside the profiled
    range)."""
    cuda = L.cuda()

    def run(shape):
        ns["layer_norm"](cuda.to_device(_dispatch_input(shape)))

    with R.unprofiled():
        run((64, DISPATCH_SHAPE[1]))
    run(DISPATCH_SHAPE)
    cuda.synchronize()
