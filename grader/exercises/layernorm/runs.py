"""Lesson 04's launches: how each kernel exercise runs the student's code on a case."""

from __future__ import annotations

from functools import cache

from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises.layernorm.buffers import device_args, read_outputs


def launch_with_shared(kernel, grid, block, shared_bytes, *args) -> None:
    """Launch with ``shared_bytes`` of dynamic shared memory (opting in above 48 KiB)."""
    from workbook.occupancy import allow_dynamic_shared_memory

    allow_dynamic_shared_memory(kernel, shared_bytes, args)
    kernel[grid, block, 0, shared_bytes](*args)
    L.cuda().synchronize()


@cache
def warp_kernel(factory, cols_per_thread, width, rows_per_access):
    """The student's warp kernel for one configuration, made once."""
    return factory(cols_per_thread, width, rows_per_access)


def run_warp(ns, inputs, mode):
    case = inputs["case"]
    kernel = warp_kernel(ns["make_warp_layernorm"], *case.config)
    args = device_args(inputs, padded=True)
    L.launch(kernel, case.grid, case.block, *args)
    return read_outputs(args, inputs)


def run_block(entry: str, shared: bool):
    """The run of the block kernel ``entry``, with the row in dynamic shared memory or not."""
    def run(ns, inputs, mode):
        case = inputs["case"]
        args = device_args(inputs, padded=True)
        shared_bytes = 4 * case.size if shared else 0
        launch_with_shared(ns[entry], case.grid, case.block, shared_bytes, *args)
        return read_outputs(args, inputs)

    return run


def run_dispatch(ns, inputs, mode):
    """A plan case asks ``plan_layer_norm`` for its plan (no launch); the others call
    ``layer_norm``."""
    case = inputs["case"]
    cuda = L.cuda()
    if case.plan:
        args = device_args(inputs)
        plan = ns["plan_layer_norm"](args)
        return ("plan", plan)
    d_x = cuda.to_device(inputs["x"])
    if inputs["affine"]:
        out = ns["layer_norm"](d_x, cuda.to_device(inputs["gamma"]),
                               cuda.to_device(inputs["beta"]), float(inputs["eps"]))
    else:
        out = ns["layer_norm"](d_x, eps=float(inputs["eps"]))
    cuda.synchronize()
    if not isinstance(out, tuple) or len(out) != 3:
        raise Mismatch("layer_norm must return (y, mean, rstd)")
    return tuple(a.copy_to_host() for a in out)
