"""Floors of the short-row call's pieces on the GPU (host us per call)."""
import json, os, sys, time, weakref
from pathlib import Path
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import numpy as np
import torch
import workbook  # noqa
from grader.runner import definitions_namespace
from workbook.memory import empty, use_pool
from host_path import host_us
OUT = Path(os.environ["OUT"]) / "probe21"; OUT.mkdir(parents=True, exist_ok=True)
use_pool(True)
ns = definitions_namespace(ROOT / "solutions/03_softmax/softmax.ipynb")
softmax, softmax_gpu = ns["softmax"], ns["softmax_gpu"]
from numba import cuda
res = []
def put(what, us):
    res.append((what, us)); print(f"{what:60s} {us:8.2f}", flush=True)
for dtype in ("float32", "float16"):
    td = getattr(torch, dtype)
    xs = [torch.randn(4, 32, device="cuda", dtype=td) for _ in range(2)]
    dxs = [cuda.as_cuda_array(x) for x in xs]
    y = empty((4, 32), np.dtype(dtype))
    softmax_gpu(dxs[0], y)
    name, prepared = ns["_plans"][(dxs[0].dtype, 4, 32, False)]
    fast = prepared.fast
    put(f"{dtype} torch.softmax", host_us(lambda: torch.softmax(xs[0], dim=1)))
    put(f"{dtype} torch.empty", host_us(lambda: torch.empty((4, 32), device="cuda", dtype=td)))
    put(f"{dtype} ctypes launch only (fast._launch())", host_us(fast._launch))
    from cuda.bindings import driver as cu
    import functools, ctypes
    f = cu.CUfunction(fast._launch.args[0])
    params = ctypes.addressof(fast.params)
    g = fast._launch.args[1:4]; b = fast._launch.args[4:7]
    call = functools.partial(cu.cuLaunchKernel, f, *g, *b, 0, 0, params, 0)
    put(f"{dtype} cuda.bindings cuLaunchKernel (int params)", host_us(call))
    put(f"{dtype} prepared(x, y) same x, y", host_us(lambda: prepared(dxs[0], y)))
    put(f"{dtype} softmax_gpu(x, y) same", host_us(lambda: softmax_gpu(dxs[0], y)))
    turn = [0]
    def alt():
        turn[0] ^= 1
        return dxs[turn[0]]
    put(f"{dtype} softmax_gpu(x, y) x alternating", host_us(lambda: softmax_gpu(alt(), y)))
    put(f"{dtype} softmax(x) x alternating", host_us(lambda: softmax(alt())))
    put(f"{dtype} empty((4,32))", host_us(lambda: empty((4, 32), np.dtype(dtype))))
    put(f"{dtype} weakref.ref(array)", host_us(lambda: weakref.ref(y)))
    put(f"{dtype} array.device_ctypes_pointer.value", host_us(lambda: y.device_ctypes_pointer.value))
    put(f"{dtype} array.gpu_data.device_ctypes_pointer.value", host_us(lambda: y.gpu_data.device_ctypes_pointer.value))
    put(f"{dtype} array.__cuda_array_interface__", host_us(lambda: y.__cuda_array_interface__))
    xp, yp = fast.packers[0].slots[4], fast.packers[1].slots[4]
    launch = fast._launch
    def lean(x):
        out = empty(x.shape, x.dtype)
        xp.value = x.gpu_data.device_ctypes_pointer.value
        yp.value = out.gpu_data.device_ctypes_pointer.value
        launch()
        return out
    put(f"{dtype} lean prototype softmax(x) alternating", host_us(lambda: lean(alt())))
    def lean2(x):
        xp.value = x.gpu_data.device_ctypes_pointer.value
        launch()
    put(f"{dtype} lean prototype no alloc", host_us(lambda: lean2(alt())))
    torch.cuda.synchronize()
json.dump({"device": torch.cuda.get_device_name(), "results": res}, open(OUT / "probe21.json", "w"), indent=1)
