"""grader.profiled_range.recorded_launches in gpu mode, without a GPU: every ``kernel[grid,
block](...)`` of numba-cuda goes through ``CUDADispatcher.call`` to ``_Kernel.launch``, where
the recorder names the kernel, inside the profiled range only (the simulator's launch path and a
prepared launch's driver call: tests/test_profile_warm_ups.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# gpu mode on a machine that may have no GPU: the driver's device count is taken as 1, the
# driver call of _Kernel.launch is replaced, and the dispatcher is a stand-in for a compiled
# one (already specialised: numba would compile first, which needs a GPU too). The rest is
# numba-cuda's own code.
SCRIPT = """
import importlib.util
import sys
from types import SimpleNamespace

spec = importlib.util.spec_from_file_location("workbook.mode", "workbook/mode.py")
mode = sys.modules["workbook.mode"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mode)
mode.gpu_count = lambda: 1
import workbook

from numba.cuda.dispatcher import CUDADispatcher, _Kernel

from grader import launch as L
from grader import profiled_range as R

assert workbook.MODE == "gpu" and not L.cuda().config.ENABLE_CUDASIM
driver = []


def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
    driver.append(griddim[0])


def measured_kernel(x):
    pass


_Kernel.launch = launch
kernel = object.__new__(_Kernel)
kernel.py_func = measured_kernel
dispatcher = SimpleNamespace(specialized=True, overloads={(): kernel})
dispatcher._select_launch_config_dispatcher = lambda config: dispatcher
dispatcher._update_launch_config_sensitivity = lambda kernel, config: None


def call(grid):
    config = SimpleNamespace(griddim=(grid, 1, 1), blockdim=(32, 1, 1), stream=0, sharedmem=0,
                             pre_launch_callbacks=[], _push_args=lambda args: None,
                             _pop_args=lambda previous: None)
    CUDADispatcher.call(dispatcher, (1,), config)


with R.recorded_launches() as names:
    call(1)  # outside the range
    R._Range.segment = True  # inside (grader.profiled_range.profiled_segment, without the profiler)
    call(2)
    R._Range.paused = True  # a warm-up (grader.profiled_range.unprofiled)
    call(3)
    R._Range.paused = False
    call(4)
    R._Range.segment = False
assert _Kernel.launch is launch  # the hook is gone
call(5)
print(names, driver)
"""


def test_numba_s_launch_path_is_recorded_inside_the_range_only():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env.pop("WORKBOOK_MODE", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "['measured_kernel', 'measured_kernel'] [1, 2, 3, 4, 5]"


def test_a_kernel_loaded_from_numba_s_disk_cache_is_named_by_its_entry_point():
    """A ``_Kernel`` that numba rebuilds from its disk cache (grader.kernel_cache) has no
    ``py_func``: the recorder reads the name from the mangled entry point, which numba's own
    mangler makes (here for a module-level kernel and for one defined in a notebook cell's
    factory)."""
    from types import SimpleNamespace

    from numba import types
    from numba.cuda import itanium_mangler

    from grader.profiled_range import function_of_entry, kernel_name

    for qualified, name in (("__main__.convergent_sum_kernel", "convergent_sum_kernel"),
                            ("<cell In[3]>.make_warp.<locals>.warp_kernel", "warp_kernel")):
        entry = itanium_mangler.mangle(qualified, [types.float32[:], types.int64],
                                       abi_tags=("v1", "cw51cXTLSUw"))
        assert function_of_entry(entry) == name, entry
        assert kernel_name(SimpleNamespace(entry_name=entry)) == name

    def compiled_here(x):
        pass

    assert kernel_name(SimpleNamespace(py_func=compiled_here, entry_name="_ZN1a1bE")) == \
        "compiled_here"
    assert function_of_entry("plain_name") == "plain_name"
