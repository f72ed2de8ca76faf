"""#21: softmax(x) host path, float16/float32 short rows: recycled() shortcut and driver-call
variants, interleaved with torch.softmax (end_to_end.py's loop)."""
import functools, importlib.util, json, os, sys, time
from pathlib import Path
import numpy as np
ROOT = Path.cwd(); sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "benchmarks"))
import workbook  # noqa
import torch
from numba import cuda
from cuda.bindings import driver
from grader.runner import definitions_namespace
from end_to_end import per_call_us
OUT = Path(os.environ.get("OUT", "/tmp"))
ns = definitions_namespace(ROOT / "solutions/03_softmax/softmax.ipynb")
softmax, softmax_gpu = ns["softmax"], ns["softmax_gpu"]
spec = importlib.util.spec_from_file_location("outputs_before", ROOT / ".whl/outputs_before.py")
before = importlib.util.module_from_spec(spec); spec.loader.exec_module(before)
def softmax_before(x, log=False):
    y = before.recycled(x.shape, x.dtype)
    softmax_gpu(x, y, log)
    return y
res = {"device": torch.cuda.get_device_name(), "rounds": []}
for rnd in range(3):
    for dtype, cols in (("float16", 32), ("float32", 32), ("float16", 64), ("float32", 64)):
        t = getattr(torch, dtype)
        xs = [torch.randn(49152, cols, device="cuda", dtype=t) for _ in range(2)]
        dxs = [cuda.as_cuda_array(x) for x in xs]
        y = cuda.as_cuda_array(torch.empty_like(xs[0]))
        softmax(dxs[0])
        plan = ns["_plans"][(dxs[0].dtype, 49152, cols, False)][1].fast
        launch0 = plan._launch
        a = list(launch0.args)
        r = {"dtype": dtype, "cols": cols, "round": rnd}
        r["torch"] = per_call_us([lambda x=x: torch.softmax(x, dim=1) for x in xs])
        r["softmax(x)"] = per_call_us([lambda x=x: softmax(x) for x in dxs])
        r["softmax(x) before"] = per_call_us([lambda x=x: softmax_before(x) for x in dxs])
        r["softmax_gpu(x, y)"] = per_call_us([lambda x=x: softmax_gpu(x, y) for x in dxs])
        r["driver 0"] = per_call_us([launch0])
        for name, stream in (("driver CUstream", driver.CUstream(0)), ("driver None", None)):
            b = list(a); b[8] = stream
            p = functools.partial(driver.cuLaunchKernel, *b)
            r[name] = per_call_us([p])
        b = list(a); b[8] = driver.CUstream(0)
        plan._launch = functools.partial(driver.cuLaunchKernel, *b)
        r["softmax(x), CUstream"] = per_call_us([lambda x=x: softmax(x) for x in dxs])
        plan._launch = launch0
        r["torch again"] = per_call_us([lambda x=x: torch.softmax(x, dim=1) for x in xs])
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
        res["rounds"].append(r)
        (OUT / "host21.json").write_text(json.dumps(res, indent=1))
