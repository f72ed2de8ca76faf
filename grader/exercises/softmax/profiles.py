"""The launches lesson 03's metric rules profile on a GPU (see ``profile`` in
:class:`grader.exercise.Exercise`): each exercise's kernel on one large float32 shape."""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader import profiled_range as R
from grader.exercises.softmax.plans import warp_config
from grader.exercises.softmax.runs import kernel_for, launch_kernel, quiet_numpy

WARP_PROFILE = (49152, 1024)       # float32, 201 MB each way
BLOCK_PROFILE = (8192, 4096)       # float32, 134 MB each way, 16 KiB of cache per block
UNCACHED_PROFILE = (4096, 16384)   # float32, 268 MB each way
DISPATCH_PROFILE = (393216, 16)    # float32, 25 MB each way: rows a warp would leave 7/8 idle
SOFTMAX_KERNELS = ("warp_softmax_kernel", "block_smem_softmax_kernel",
                   "block_uncached_softmax_kernel")


@L.built_once
def _host_data(rows, cols, dtype=np.float32):
    return np.random.default_rng(0).standard_normal((rows, cols)).astype(dtype)


def _data(rows, cols, dtype=np.float32):
    x = _host_data(rows, cols, dtype)
    cuda = L.cuda()
    return cuda.to_device(x), cuda.device_array((rows, cols), dtype)


def profile_warp(ns):
    rows, cols = WARP_PROFILE
    pack = 4
    per_thread, width, rows_per_thread = warp_config(cols, pack)
    kernel = kernel_for(ns["make_warp_softmax"],
                        (np.dtype(np.float32), pack, per_thread, width, rows_per_thread, False))
    x, y = _data(rows, cols)
    rows_per_block = 128 // width * rows_per_thread
    with R.unprofiled():  # a warm-up
        kernel[1, 128](x[:8], y[:8])
    kernel[L.blocks_for(rows, rows_per_block), 128](x, y)


def profile_block(entry, cached, shape_, threads):
    def profile(ns):
        rows, cols = shape_
        kernel = kernel_for(ns[entry], (np.dtype(np.float32), 4, False))
        x, y = _data(rows, cols)
        shared = 4 * cols if cached else 0
        with R.unprofiled():  # a warm-up
            launch_kernel(kernel, 2, threads, shared, x[:2], y[:2])
        launch_kernel(kernel, rows, threads, shared, x, y)

    return profile


def profile_dispatch(ns):
    """softmax_gpu on DISPATCH_PROFILE: a first call on 64 rows warms up the kernel it picks
    (outside the profiled range), the second call's launch is profiled."""
    def run(rows):
        x, y = _data(rows, DISPATCH_PROFILE[1])
        with quiet_numpy():
            ns["softmax_gpu"](x, y)

    with R.unprofiled():
        run(64)
    run(DISPATCH_PROFILE[0])
    L.cuda().synchronize()
