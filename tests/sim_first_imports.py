"""Which modules simulated CUDA threads import for the first time: none may.

    python tests/sim_first_imports.py     # prints a JSON list of module names

A module imported for the first time inside a simulated thread takes its import lock there; a
kernel stopped then (an error in another thread, a time limit) can end the thread holding it,
and every later import of that module waits forever. The simulator's own error and sanitizer
paths must find their modules imported before a kernel runs. Runs kernels that take those
paths, in a fresh process (numba picks the simulator once per process).
"""
import importlib.abc
import json
import sys
import threading

import numpy as np
from numba import cuda, float32
from numba.cuda.simulator.kernel import BlockThread

import workbook  # noqa: F401  (installs the simulator's extensions)

first_imports = []


class ImportsInThreads(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if isinstance(threading.current_thread(), BlockThread) and name not in sys.modules:
            first_imports.append(name)
        return None


sys.meta_path.insert(0, ImportsInThreads())


@cuda.jit
def shared_sum(x, out):
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncthreads()
    if t == 0:
        total = float32(0)
        for i in range(32):
            total += buf[i]
        out[0] = total


@cuda.jit
def early_return_before_barrier(x, out):
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    if t % 2 == 1:
        return
    buf[t] = x[t]
    cuda.syncthreads()
    out[t] = buf[t]


@cuda.jit
def barrier_in_branch(x, out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    out[t] = x[t]


@cuda.jit
def shuffle_outside_its_mask(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(0x0000FFFF, x[t], 1)


@cuda.jit
def racing_shared(x, out):
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    out[t] = buf[(t + 1) % 32]


x = np.arange(32, dtype=np.float32)
for kernel in (shared_sum, early_return_before_barrier, barrier_in_branch,
               shuffle_outside_its_mask, racing_shared):
    out = np.zeros(32, np.float32)
    try:
        kernel[1, 32](x, out)
        outcome = "ran"
    except Exception as error:  # the point is which modules the threads imported
        outcome = type(error).__name__
    print(kernel.__name__, outcome, file=sys.stderr)
print(json.dumps(first_imports))
