"""How lesson 03's exercises are run: each exercise's ``run(namespace, inputs, mode)``."""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises.softmax.buffers import device_input, device_output, finish


class quiet_numpy(warnings.catch_warnings):
    """Simulated kernels compute with numpy scalars, which warn about -inf - (-inf)."""

    def __enter__(self):
        result = super().__enter__()
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        return result


@cache
def kernel_for(factory, config):
    """The kernel ``factory(*config)`` makes, made once per factory and configuration."""
    return factory(*config)


def launch_kernel(kernel, grid, block, shared, x, y):
    if shared > 48 * 1024 and not L.cuda().config.ENABLE_CUDASIM:
        from workbook.occupancy import allow_dynamic_shared_memory

        allow_dynamic_shared_memory(kernel, shared, (x, y))
    with quiet_numpy():
        kernel[grid, block, 0, shared](x, y)
        L.cuda().synchronize()


# --- exercise 1: CPU ----------------------------------------------------------------------------

def run_cpu(entry):
    def run(ns, inputs, mode):
        x = inputs["x"]
        before = x.copy()
        with quiet_numpy():  # overflow and log(0) warnings: the comparison explains them
            got = ns[entry](x)
        if not np.array_equal(before, x, equal_nan=True):
            raise Mismatch(f"{entry} modified its input; it must return a new array")
        return got

    return run


# --- exercise 2: three kernels --------------------------------------------------------------------

def run_naive(ns, inputs, mode):
    x = inputs["x"]
    d_x = device_input(x)
    d_y, full = device_output(x.shape, x.dtype)
    with quiet_numpy():
        ns["softmax_naive"](d_x, d_y)
    return finish(full, x.shape[0])


# --- exercise 3: warp softmax ---------------------------------------------------------------------

def run_warp(ns, inputs, mode):
    case, x = inputs["case"], inputs["x"]
    pack, per_thread, width, rows_per_thread = case.config
    kernel = kernel_for(ns["make_warp_softmax"],
                        (np.dtype(case.dtype), pack, per_thread, width, rows_per_thread,
                         case.log))
    rows_per_block = case.block // width * rows_per_thread
    grid = case.grid or L.blocks_for(case.rows, rows_per_block)
    d_x = device_input(x, padded=True, exact=case.exact)
    d_y, full = device_output(x.shape, x.dtype, padded=True, exact=case.exact)
    launch_kernel(kernel, grid, case.block, 0, d_x, d_y)
    return finish(full, case.rows, case.cols)


# --- exercises 4 and 5: block kernels -------------------------------------------------------------

def run_block(entry: str, cached: bool):
    def run(ns, inputs, mode):
        case, x = inputs["case"], inputs["x"]
        (pack,) = case.config
        kernel = kernel_for(ns[entry], (np.dtype(case.dtype), pack, case.log))
        d_x = device_input(x, padded=True, exact=case.exact)
        d_y, full = device_output(x.shape, x.dtype, padded=True, exact=case.exact)
        shared = 4 * case.cols if cached else 0
        launch_kernel(kernel, case.grid or case.rows, case.block, shared, d_x, d_y)
        return finish(full, case.rows, case.cols)

    return run


# --- exercise 6: dispatcher -------------------------------------------------------------------

def run_dispatch(ns, inputs, mode):
    if "table" in inputs:
        counts = dict(zip((128, 256, 512, 1024), inputs["table"]))
        return ns["choose_block_size"](lambda threads: counts[threads])
    case, x = inputs["case"], inputs["x"]
    if case.kind == "plan":
        return ns["plan"](L.cuda().to_device(x), L.cuda().device_array_like(x))
    d_x = device_input(x)
    d_y, full = device_output(x.shape, x.dtype)
    with quiet_numpy():
        name = ns["softmax_gpu"](d_x, d_y, log=case.log) if case.log else ns["softmax_gpu"](
            d_x, d_y)
    return name, finish(full, case.rows)


# --- exercise 7: log-softmax --------------------------------------------------------------------

def run_log(ns, inputs, mode):
    if inputs["case"].calls == "softmax_gpu":
        return run_dispatch(ns, inputs, mode)
    return run_cpu("log_softmax_cpu")(ns, inputs, mode)
