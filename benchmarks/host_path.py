"""Where the host time of a short-row call goes (run on a GPU).

    python benchmarks/host_path.py [--json FILE] [--profile-dir DIR]

A softmax or LayerNorm of short rows is bound by the host: the GPU finishes a launch in a
few microseconds, the Python around it takes longer. This times, per call, on rows small
enough that the GPU never limits the loop (host microseconds, no synchronisation inside
the loop): the pieces of a lesson function's call (an output array from the workbook's
pool, a prepared launch with the same or new arrays, numba's array properties the launch
reads) and the whole calls ``softmax(x)``, ``softmax_gpu(x, y)``, ``layer_norm_packed(x,
...)``, beside ``torch.empty`` and ``torch.softmax`` / ``F.layer_norm``. With
``--profile-dir``, cProfile's statistics of each whole call (20000 calls) are written there.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import workbook  # noqa: E402,F401  (selects the mode before numba.cuda is imported)
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import device_name  # noqa: E402
from workbook.memory import empty, use_pool  # noqa: E402

ROWS = 4  # few rows: the GPU is never what the loop waits for
CALLS = 20000


def host_us(fn, calls: int = CALLS) -> float:
    """Median of 5 loops of host time per call (the GPU synchronised after each loop)."""
    import torch

    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return round(float(np.median(times)), 2)


def profile_text(fn, calls: int = CALLS) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


def measure_shape(dtype, cols, softmax, softmax_gpu, packed, put, profile_dir) -> None:
    """Every measurement of one ``(ROWS, cols)`` shape, reported through ``put``."""
    import torch
    import torch.nn.functional as F
    from numba import cuda

    group = f"{dtype} ({ROWS},{cols})"
    tdtype = getattr(torch, dtype)
    xs = [torch.randn(ROWS, cols, device="cuda", dtype=tdtype) for _ in range(2)]
    dxs = [cuda.as_cuda_array(x) for x in xs]
    y = cuda.as_cuda_array(torch.empty_like(xs[0]))
    tw = torch.ones(cols, device="cuda", dtype=tdtype)
    tb = torch.zeros(cols, device="cuda", dtype=tdtype)
    w, b = cuda.as_cuda_array(tw), cuda.as_cuda_array(tb)
    turn = [0]

    def alternate():
        turn[0] ^= 1
        return dxs[turn[0]]

    put(group, "torch.empty((rows, cols))", host_us(
        lambda: torch.empty((ROWS, cols), device="cuda", dtype=tdtype)))
    put(group, "workbook.memory.empty((rows, cols))", host_us(
        lambda: empty((ROWS, cols), dtype)))
    put(group, "torch.softmax(x)", host_us(lambda: torch.softmax(xs[0], dim=1)))
    put(group, "softmax_gpu(x, y), same x and y", host_us(lambda: softmax_gpu(dxs[0], y)))
    put(group, "softmax_gpu(x, y), x alternating", host_us(
        lambda: softmax_gpu(alternate(), y)))
    put(group, "softmax(x), x alternating", host_us(lambda: softmax(alternate())))
    put(group, "F.layer_norm(x)", host_us(lambda: F.layer_norm(xs[0], (cols,), tw, tb, 1e-5)))
    put(group, "layer_norm_packed(x, w, b, eps), x alternating", host_us(
        lambda: packed(alternate(), w, b, 1e-5)))
    array = dxs[0]
    put(group, "numba array .device_ctypes_pointer.value", host_us(
        lambda: array.device_ctypes_pointer.value))
    put(group, "numba array .flags['C_CONTIGUOUS']", host_us(
        lambda: array.flags["C_CONTIGUOUS"]))
    put(group, "numba array .is_c_contiguous()", host_us(lambda: array.is_c_contiguous()))
    put(group, "cuda.as_cuda_array(torch tensor)", host_us(lambda: cuda.as_cuda_array(xs[0])))
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
        for name, fn in (("softmax", lambda: softmax(alternate())),
                         ("softmax_gpu", lambda: softmax_gpu(alternate(), y)),
                         ("layer_norm_packed", lambda: packed(alternate(), w, b, 1e-5)),
                         ("empty", lambda: empty((ROWS, cols), dtype))):
            (profile_dir / f"{name}.txt").write_text(profile_text(fn))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile-dir", type=Path)
    args = parser.parse_args()
    use_pool(True)
    softmax_ns = definitions_namespace(ROOT / "solutions/03_softmax/softmax.ipynb")
    norm_ns = definitions_namespace(ROOT / "solutions/04_layernorm/layernorm.ipynb")
    softmax, softmax_gpu = softmax_ns["softmax"], softmax_ns["softmax_gpu"]
    packed = norm_ns["layer_norm_packed"]
    results = []

    def put(group, what, us):
        results.append({"group": group, "what": what, "host_us": us})
        print(f"{group:24s} {what:52s} {us:8.2f} us", flush=True)

    for dtype, cols in (("float32", 32), ("float16", 32), ("float32", 128), ("float16", 128)):
        measure_shape(dtype, cols, softmax, softmax_gpu, packed, put,
                      args.profile_dir if (dtype, cols) == ("float32", 32) else None)
    if args.json:
        args.json.write_text(json.dumps({"device": device_name(), "date":
                                         datetime.date.today().isoformat(), "rows": ROWS,
                                         "calls": CALLS, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
