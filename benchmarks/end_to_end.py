"""The lessons' final functions timed as a user calls them, next to the libraries.

    python benchmarks/end_to_end.py [--lessons layernorm,softmax,ccl] [--quick]
                                    [--out-dir workbook/data] [--json FILE]

A user calls a function in a loop: its outputs are allocated by the function, its inputs
change (here they alternate between two buffers), and the time that matters is the wall
time per call with the GPU synchronised at the end. That is what ``per_call_us`` measures,
for the lesson's function and the library's in the same process on the same data:

* LayerNorm: ``layer_norm_packed`` (section 6 of lesson 04, with the plan cache, prepared
  launch and memory pool of section 8) and, as it was before, the same kernels planned,
  allocated from the driver and launched by numba on every call ("uncached"); the
  exercise's ``layer_norm`` dispatcher; vs ``torch.nn.functional.layer_norm``.
* softmax: ``softmax(x)`` (allocates its output) and ``softmax_gpu(x, y)`` (writes into a
  given ``y``) of lesson 03 vs ``torch.softmax``.
* blob analysis: ``BlobAnalysis.run`` of lesson 05 (label, relabel, statistics) vs
  ``cupyx.scipy.ndimage.label`` alone, 8192^2 random images of densities 0.1 to 0.9, 4- and
  8-connectivity; with the block labelling (the default) and, beside it, the per-pixel
  union-find (``labelling="pixels"``), whose labels it must equal.

Beside each end-to-end row, the kernel alone on preallocated buffers (CUDA events,
``workbook.bench.time_gpu(..., inner=10)``, L2 flushed per timed region) for ours and the
library's. Every function's result is checked against the library's before it is timed.
Writes the ``end_to_end`` part of ``workbook/data/<lesson>.json`` (merged into the file;
the other parts keep their run) and prints the tables.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import workbook  # noqa: E402,F401  (selects the mode before numba.cuda is imported)
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import device_name, time_gpu  # noqa: E402
from workbook.memory import pool_stats, use_pool  # noqa: E402

ROWS = 49152
COLS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DTYPES = ("float32", "float16")
EPS = 1e-5
CCL_SIZE = 8192
CCL_DENSITIES = (0.1, 0.3, 0.5, 0.59, 0.9)
MIN_SECONDS = 0.05  # each timed loop runs at least this long
REPEAT = 5          # loops per measurement; the median is kept


def per_call_us(calls, repeat: int = REPEAT) -> float:
    """Median over ``repeat`` loops of the wall time per call, in microseconds.

    ``calls`` is a list of functions called in turn (one per input buffer); each loop
    ends with the GPU synchronised, so queued work is paid for."""
    import torch

    for fn in calls * 3:  # warm-up: compilation, plans, pools
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    once = (time.perf_counter() - start) / len(calls)
    n = max(len(calls), int(MIN_SECONDS / max(once, 1e-7)) // len(calls) * len(calls))
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for k in range(n):
            calls[k % len(calls)]()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / n * 1e6)
    return float(np.median(times))


def free_memory() -> None:
    """Drop the last shape's arrays. Neither PyTorch's cache nor the workbook's pool is
    emptied: the sweep runs as a user's session would, both libraries allocating in one
    process, and the memory each holds at the end of a section is recorded."""
    import gc

    gc.collect()


def kernel_us(fn) -> float:
    """GPU time of ``fn()`` on preallocated buffers (CUDA events, 10 launches per region)."""
    return time_gpu(fn, inner=10).median_ms * 1e3


def row(lesson_row: list, ours_us: float, lib_us: float) -> list:
    return [*lesson_row, round(ours_us, 2), round(lib_us, 2), round(lib_us / ours_us, 3)]


def shape_rows(name: str, shape_fn, ns, cols_list, dtypes) -> tuple[list, list]:
    """``shape_fn(ns, dtype, cols)`` for every shape: end-to-end rows, kernel-only rows."""
    end_rows, kernel_rows = [], []
    for dtype in dtypes:
        for cols in cols_list:
            ends, kernel = shape_fn(ns, dtype, cols)
            end_rows += ends
            kernel_rows.append(kernel)
            for r in [*ends, kernel]:
                print(f"{name} {dtype:8s} {cols:6d} {r[2][:40]:40s} {r[3]:9.1f} us  "
                      f"torch {r[4]:9.1f} us  x{r[5]:.2f}", flush=True)
            free_memory()
    return end_rows, kernel_rows


# --- LayerNorm ----------------------------------------------------------------------------------

def layernorm_shape(ns, dtype: str, cols: int) -> tuple[list, list]:
    """End-to-end rows and the kernel-only row of one (ROWS, cols) shape."""
    import torch
    import torch.nn.functional as F
    from numba import cuda

    as_array = cuda.as_cuda_array
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(cols)
    xs = [torch.randn(ROWS, cols, device="cuda", dtype=tdtype, generator=gen) for _ in range(2)]
    weight = (1 + 0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    bias = torch.randn(cols, device="cuda", generator=gen).to(tdtype)
    dxs = [as_array(x) for x in xs]
    dw, db = as_array(weight), as_array(bias)
    want = F.layer_norm(xs[1], (cols,), weight, bias, EPS).float()
    tol = dict(atol=1e-3, rtol=1e-4) if dtype == "float32" else dict(atol=1e-2, rtol=2e-3)

    def check(name, y):
        got = torch.as_tensor(y, device="cuda").float()
        try:
            torch.testing.assert_close(got, want, **tol)
        except AssertionError as exc:
            raise SystemExit(f"{name} ({dtype}, {cols} cols) disagrees with torch:\n"
                             f"{exc}") from None

    def torch_call(x):
        return F.layer_norm(x, (cols,), weight, bias, EPS)

    packed, exercise = ns["layer_norm_packed"], ns["layer_norm"]
    check("layer_norm_packed", packed(dxs[1], dw, db, EPS)[0])
    torch_us = per_call_us([lambda x=x: torch_call(x) for x in xs])
    shape = [dtype, cols]
    rows = [None]  # the first version's row, measured last (see softmax_shape)
    ours = per_call_us([lambda x=x: packed(x, dw, db, EPS) for x in dxs])
    rows.append(row(shape + ["layer_norm_packed"], ours, torch_us))
    outs = (cuda.device_array((ROWS, cols), dtype), cuda.device_array(ROWS, np.float32),
            cuda.device_array(ROWS, np.float32))
    with_out = per_call_us([lambda x=x: packed(x, dw, db, EPS, out=outs) for x in dxs])
    rows.append(row(shape + ["out="], with_out, torch_us))
    if cols in (128, 2048, 8192):
        check("layer_norm", exercise(dxs[1], dw, db, EPS)[0])
        dispatcher = per_call_us([lambda x=x: exercise(x, dw, db, EPS) for x in dxs])
        rows.append(row(shape + ["layer_norm (ex. 5)"], dispatcher, torch_us))
    y_t = torch.empty_like(xs[0])
    torch_kernel = kernel_us(lambda: torch.native_layer_norm(xs[0], (cols,), weight, bias, EPS))
    out_k = (as_array(y_t), outs[1], outs[2])
    ours_kernel = kernel_us(lambda: packed(dxs[0], dw, db, EPS, out=out_k))
    kernel = row(shape + ["kernel only"], ours_kernel,
                 torch_kernel)
    use_pool(False)
    uncached = per_call_us([lambda x=x: uncached_layer_norm_packed(ns, x, dw, db)
                            for x in dxs])
    use_pool(True)
    rows[0] = row(shape + ["first version"], uncached, torch_us)
    return rows, kernel


def uncached_layer_norm_packed(ns, x, gamma, beta, eps=EPS):
    """``layer_norm_packed`` as section 6 first wrote it: allocate, plan, launch, per call."""
    from numba import cuda

    rows, cols = x.shape
    y = cuda.device_array((rows, cols), dtype=x.dtype)
    mean = cuda.device_array(rows, dtype=np.float32)
    rstd = cuda.device_array(rows, dtype=np.float32)
    args = (x.reshape(rows * cols), gamma, beta, True, np.float32(eps),
            y.reshape(rows * cols), mean, rstd, cols)
    kind, kernel, grid, block, shared_bytes = ns["plan_layer_norm_packed"](args)
    kernel[grid, block, 0, shared_bytes](*args)
    return y, mean, rstd


# --- softmax -------------------------------------------------------------------------------------

def softmax_shape(ns, dtype: str, cols: int) -> tuple[list, list]:
    """End-to-end rows and the kernel-only row of one (ROWS, cols) shape."""
    import torch
    from numba import cuda

    as_array = cuda.as_cuda_array
    gen = torch.Generator(device="cuda").manual_seed(cols)
    xs = [torch.randn(ROWS, cols, device="cuda", dtype=getattr(torch, dtype), generator=gen)
          for _ in range(2)]
    dxs = [as_array(x) for x in xs]
    softmax, softmax_gpu = ns["softmax"], ns["softmax_gpu"]
    want = torch.softmax(xs[1], dim=1).float()
    got = torch.as_tensor(softmax(dxs[1]), device="cuda").float()
    tol = dict(atol=1e-6, rtol=1e-4) if dtype == "float32" else dict(atol=1e-4, rtol=1e-2)
    try:
        torch.testing.assert_close(got, want, **tol)
    except AssertionError as exc:
        raise SystemExit(f"softmax ({dtype}, {cols} cols) disagrees with torch:\n{exc}") from None
    shape = [dtype, cols]
    torch_us = per_call_us([lambda x=x: torch.softmax(x, dim=1) for x in xs])
    # numba's allocator last: after its loop, numba's pending frees (cuMemFree waits for the
    # GPU) slowed the next measurement: softmax(x), then softmax_gpu(x, y), measured 0.88x at
    # float32 1024-2048 columns there, 1.0x otherwise (H100, 2026-11-26)
    ours = per_call_us([lambda x=x: softmax(x) for x in dxs])
    y_t = torch.empty_like(xs[0])
    dy = as_array(y_t)
    given = per_call_us([lambda x=x: softmax_gpu(x, dy) for x in dxs])
    torch_kernel = kernel_us(lambda: torch.softmax(xs[0], dim=1))
    ours_kernel = kernel_us(lambda: softmax_gpu(dxs[0], dy))
    use_pool(False)
    no_pool = per_call_us([lambda x=x: softmax(x) for x in dxs])
    use_pool(True)
    rows = [row(shape + ["numba's allocator"], no_pool, torch_us),
            row(shape + ["softmax(x)"], ours, torch_us),
            row(shape + ["softmax_gpu(x, y)"], given, torch_us)]
    kernel = row(shape + ["kernel only"], ours_kernel,
                 torch_kernel)
    return rows, kernel


# --- blob analysis -------------------------------------------------------------------------------

def ccl_rows(ns, size, densities) -> tuple[list, list]:
    import cupy
    from cupyx.scipy import ndimage as cupy_ndimage
    from numba import cuda
    from scipy import ndimage

    end_rows = []
    for connectivity in (4, 8):
        structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
        for p in densities:
            rng = cupy.random.default_rng(int(p * 100) + connectivity)
            images = [(rng.random((size, size), dtype=cupy.float32) < p).astype(cupy.uint8)
                      for _ in range(2)]
            flat = [cuda.as_cuda_array(im.reshape(-1)) for im in images]
            _, want = cupy_ndimage.label(images[1], structure=structure)
            labels = {}
            for labelling in ("blocks", "pixels"):
                check = ns["BlobAnalysis"](size, size, labelling)
                count = check.run(flat[1], connectivity)
                if count != int(want):
                    raise SystemExit(f"BlobAnalysis.run ({labelling}), p={p}, {connectivity}-"
                                     f"connectivity: {count} blobs, cupyx finds {int(want)}")
                labels[labelling] = cupy.asarray(check.labels).copy()
                del check
            if not cupy.array_equal(labels["blocks"], labels["pixels"]):
                raise SystemExit(f"p={p}, {connectivity}-connectivity: the block labelling's "
                                 "labels differ from the per-pixel labelling's")
            del labels
            lib = per_call_us([lambda im=im, s=structure: cupy_ndimage.label(im, structure=s)
                               for im in images], repeat=3)
            for labelling, name in (("blocks", "BlobAnalysis.run"),
                                    ("pixels", "BlobAnalysis.run (pixels)")):
                analysis = ns["BlobAnalysis"](size, size, labelling)
                ours = per_call_us([lambda im=im, c=connectivity, a=analysis: a.run(im, c)
                                    for im in flat], repeat=3)
                end_rows.append(row([f"p={p}", connectivity, name], ours, lib))
                print(f"ccl p={p} {connectivity}-conn {name:26s} {ours:9.0f} us  cupyx label "
                      f"{lib:9.0f} us  x{lib / ours:.2f}", flush=True)
                del analysis
            del images, flat
            cupy.get_default_memory_pool().free_all_blocks()
    return end_rows, []


# --- main ----------------------------------------------------------------------------------------

LESSONS = {
    "layernorm": ("04_layernorm", "solutions/04_layernorm/layernorm.ipynb",
                  "F.layer_norm", "(49152, cols)"),
    "softmax": ("03_softmax", "solutions/03_softmax/softmax.ipynb", "torch.softmax",
                "(49152, cols)"),
    "ccl": ("05_ccl", "solutions/05_ccl/ccl.ipynb", "cupyx label", f"{CCL_SIZE}^2"),
}


NOTES = {
    "layernorm": "'first version': layer_norm_packed as section 6 first wrote it (outputs "
                 "from cuda.device_array, i.e. the driver; plan and numba launch on every "
                 "call). 'layer_norm_packed': with the plan cache, prepared launch and pooled "
                 "outputs. 'out=': writing into given arrays. ",
    "softmax": "'numba's allocator': softmax(x) with cuda.device_array from the driver; "
               "'softmax(x)': its output from the pool; 'softmax_gpu(x, y)': into a given y. ",
    "ccl": "cupyx.scipy.ndimage.label alone against the whole BlobAnalysis.run (label, "
           "relabel, statistics): with the block labelling (the default), and '(pixels)' "
           "with the per-pixel union-find. ",
}


def part_for(lesson: str, end_rows: list, kernel_rows: list) -> dict:
    import torch

    _, _, library, shape = LESSONS[lesson]
    first = ["image", "connectivity"] if lesson == "ccl" else ["dtype", "cols"]
    return {
        "title": f"{shape}: wall time per call in a loop (outputs allocated by the function, "
                 f"inputs alternating between two buffers, GPU synchronised), vs {library}",
        "columns": [*first, "function", "us per call", f"{library} us", f"x {library}"],
        "rows": end_rows + kernel_rows,
        "note": NOTES[lesson] + f"Same process, same data; median of {REPEAT} loops of at "
                f"least {MIN_SECONDS * 1e3:.0f} ms (3 for blob analysis). 'kernel only': GPU "
                "time from CUDA events, 10 launches per region, L2 flushed per region, ours "
                f"and the library's kernel. torch {torch.__version__}. Higher x is better.",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", default="layernorm,softmax,ccl")
    parser.add_argument("--quick", action="store_true", help="three shapes, one density")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "workbook" / "data")
    parser.add_argument("--json", type=Path, help="also write every part to this file")
    args = parser.parse_args()
    if workbook.MODE != "gpu":
        raise SystemExit("this benchmark needs a GPU (WORKBOOK_MODE=gpu)")
    cols_list = (32, 1024, 8192) if args.quick else COLS
    started = time.monotonic()
    # PyTorch first, as a user comparing with it imports it: the notebooks' use_pool() then
    # takes its blocks from PyTorch's caching allocator (one pool in the process)
    import torch

    torch.cuda.init()
    parts, memory = {}, []
    for lesson in args.lessons.split(","):
        name, notebook = LESSONS[lesson][:2]
        ns = definitions_namespace(ROOT / notebook)
        if lesson == "layernorm":
            end_rows, kernel_rows = shape_rows(lesson, layernorm_shape, ns, cols_list,
                                                  DTYPES)
        elif lesson == "softmax":
            end_rows, kernel_rows = shape_rows(lesson, softmax_shape, ns, cols_list, DTYPES)
        else:
            end_rows, kernel_rows = ccl_rows(ns, CCL_SIZE,
                                             CCL_DENSITIES[:1] if args.quick else CCL_DENSITIES)
        parts[name] = part_for(lesson, end_rows, kernel_rows)
        memory.append(memory_held(lesson))
        print(f"{lesson}: done at {time.monotonic() - started:.0f} s; {memory[-1]}", flush=True)
        record(args.out_dir / f"{name}.json", parts[name])
    if args.json:
        args.json.write_text(json.dumps({"device": device_name(),
                                         "date": datetime.date.today().isoformat(),
                                         "parts": parts, "memory": memory}, indent=1) + "\n")


def memory_held(section: str) -> dict:
    """GPU memory after a section, in GB: PyTorch's cache (reserved) and its live tensors
    (allocated), the workbook pool's blocks (held) and the free ones among them, the
    device's free memory; before anything is given back."""
    import torch
    from numba import cuda

    stats = pool_stats()
    free, _ = cuda.current_context().get_memory_info()
    gb = 1e-9
    return {"section": section, "torch_reserved_gb": round(torch.cuda.memory_reserved() * gb, 2),
            "torch_allocated_gb": round(torch.cuda.memory_allocated() * gb, 2),
            "pool_held_gb": round(stats.held_bytes * gb, 2) if stats else 0.0,
            "pool_free_gb": round(stats.free_bytes * gb, 2) if stats else 0.0,
            "pool_backend": stats.backend if stats else "none",
            "device_free_gb": round(free * gb, 2)}


def record(path: Path, part: dict) -> None:
    """Put ``part`` as ``end_to_end`` into a lesson's recorded file, with its own device and
    date (the file's other parts may come from another run or GPU)."""
    data = json.loads(path.read_text()) if path.exists() else {
        "device": device_name(), "date": datetime.date.today().isoformat(), "parts": {}}
    data["parts"]["end_to_end"] = {**part, "device": device_name(),
                                   "date": datetime.date.today().isoformat(),
                                   "command": "python benchmarks/end_to_end.py"}
    path.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
