"""Benchmark lesson 04's LayerNorm kernels on a GPU against torch.nn.functional.layer_norm.

    python benchmarks/layernorm.py [--out workbook/data/04_layernorm.json]
                                   [--cols 32,64,...] [--dtypes float32,float16]
                                   [--packed-only]

Shape (49152, cols) for cols = 32 ... 32768, float32 and float16, with gamma and beta
(torch: ``layer_norm(x, (cols,), weight, bias, 1e-5)``). Variants, all in one run:

* ``lesson``: the dispatcher of exercise 5 (``plan_layer_norm``) and the kernels of
  exercises 2-4 (scalar loads), launched as a numba user launches them;
* ``packed``: the 16-byte-pack kernels of section 6 (``plan_layer_norm_packed``), same launch;
* ``packed, prepared launch``: the same kernel through ``workbook.launch.prepare`` (numba
  types every argument on every launch: tens of microseconds of Python that a short
  kernel cannot hide);
* for cols > 1024 the other block kernel of the lesson variant, and for cols >= 2048 the
  packed block kernels with 128 and 256 threads, are timed too (``all_rows``).

``--packed-only`` measures the packed rows only and merges them into an existing
``--out`` file (the lesson rows keep the run that measured them; ``updates`` says so).

Before any timing, each variant's y, mean and rstd are checked against
``torch.native_layer_norm`` on the same data. Outputs are allocated once. Timing:
``workbook.bench.time_gpu(..., inner=10)`` (CUDA events, L2 flushed before each of 20 timed
regions, 10 launches queued per region). Effective bandwidth counts x read once and y
written once, ``2 * rows * cols * itemsize`` bytes; gamma, beta, mean and rstd are not
counted (under 0.1 % of the bytes from 1024 columns on). Part ``launch_overhead`` records
the host time per launch, measured while nothing waits for the GPU.
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
from workbook.launch import prepare  # noqa: E402
from workbook.recorded import merge_rows  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "04_layernorm" / "layernorm.ipynb"
ROWS = 49152
COLS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DTYPES = ("float32", "float16")
EPS = 1e-5
INNER = 10  # launches per timed region: hides numba's host-side launch cost where it can


def describe(kind, kernel, block, shared_bytes):
    name = kernel.py_func.__name__ if hasattr(kernel, "py_func") else str(kernel)
    extra = f", {shared_bytes // 1024} KiB shared" if shared_bytes else ""
    return f"{kind}: {name}, {block} threads{extra}"


def check_against_torch(what, y, mean, rstd, want, dtype):
    """Compare our outputs (torch tensors) with torch.native_layer_norm's; exit on mismatch."""
    import torch

    want_y, want_mean, want_rstd = want
    y, want_y = y.float(), want_y.float()
    tol = (1e-3 + 1e-4 * want_y.abs()) if dtype == "float32" else (1e-2 + 2e-3 * want_y.abs())
    bad_y = int(((y - want_y).abs() > tol).sum())
    mean_err = float((mean - want_mean.reshape(-1).float()).abs().max())
    rstd_err = float(((rstd - want_rstd.reshape(-1).float()).abs()
                      / want_rstd.reshape(-1).float()).max())
    finite = bool(torch.isfinite(y).all())
    if bad_y or mean_err > 1e-4 or rstd_err > 1e-3 or not finite:
        raise SystemExit(f"{what}: disagrees with torch: {bad_y} elements of y outside the "
                         f"tolerance, max |d mean| {mean_err:.3g}, max rel d rstd "
                         f"{rstd_err:.3g}, all finite: {finite}")


def bandwidth_part(ns: dict, cols_list, dtypes, packed_only=False) -> tuple[dict, dict]:
    import torch

    rows, all_rows = [], []
    overhead = None
    for dtype in dtypes:
        for cols in cols_list:
            main_rows, other_rows, shape_overhead = measure_shape(
                ns, dtype, cols, overhead is None and not packed_only, packed_only)
            rows.extend(main_rows)
            all_rows.extend(main_rows + other_rows)
            overhead = overhead or shape_overhead
            torch.cuda.empty_cache()
    part = {
        "title": f"LayerNorm of ({ROWS}, cols) with gamma and beta, GB/s counting x read "
                 "once and y written once; median of 20 x 10 back-to-back launches",
        "columns": ["dtype", "cols", "variant", "kernel", "ms", "GB/s", "torch GB/s",
                    "x torch"],
        "rows": rows,
        "all_rows": all_rows,
        "note": "lesson: exercise 5's dispatcher (scalar loads); packed: section 6 (16-byte "
                "loads and stores, Welford per pack); 'prepared launch': the same kernel "
                "through workbook.launch.prepare. torch.nn.functional.layer_norm "
                f"{torch.__version__} measured in the same run on the same data (each row's "
                "torch GB/s). Where x and y together fit in L2 (up to 64 float32 or 128 "
                "float16 columns), the 9 launches after the first of each timed region read "
                "from L2, for torch as for these kernels. all_rows adds, for rows longer than "
                "1024, the lesson's other block kernel, and from 2048 the packed block kernels "
                "with 128 and 256 threads.",
    }
    return part, overhead


def measure_shape(ns: dict, dtype: str, cols: int, with_overhead: bool,
                  packed_only: bool = False):
    """Check and time every variant on one (ROWS, cols) input; returns
    ``(main rows, other rows, launch overhead part or None)``."""
    import torch
    import torch.nn.functional as F
    from numba import cuda

    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(cols)
    x = torch.randn(ROWS, cols, device="cuda", dtype=tdtype, generator=gen)
    weight = (1 + 0.5 * torch.randn(cols, device="cuda", generator=gen)).to(tdtype)
    bias = torch.randn(cols, device="cuda", generator=gen).to(tdtype)
    want = torch.native_layer_norm(x, [cols], weight, bias, EPS)
    y = torch.empty_like(x)
    stats = torch.empty(2, ROWS, device="cuda", dtype=torch.float32)
    nbytes = 2 * ROWS * cols * np.dtype(dtype).itemsize
    view = cuda.as_cuda_array
    eps = np.float32(EPS)
    args2d = (view(x), view(weight), view(bias), True, eps, view(y), view(stats[0]),
              view(stats[1]))
    args1d = (view(x.view(-1)), view(weight), view(bias), True, eps, view(y.view(-1)),
              view(stats[0]), view(stats[1]), cols)
    candidates = []  # (variant, description, launch function, main row?)
    plans = (("lesson", ns["plan_layer_norm"], args2d),
             ("packed", ns["plan_layer_norm_packed"], args1d))
    for variant, plan, args in plans[1:] if packed_only else plans:
        kind, kernel, grid, block, shared_bytes = plan(args)
        description = describe(kind, kernel, block, shared_bytes)
        launch = kernel[grid, block, 0, shared_bytes]
        candidates.append((variant, description,
                           lambda launch=launch, args=args: launch(*args), True))
        if variant == "packed":
            prepared = prepare(kernel, grid, block, shared_bytes, args)
            candidates.append(("packed, prepared launch", description,
                               lambda prepared=prepared, args=args: prepared(*args), True))
            if cols >= 2048:
                candidates.extend(packed_block_configurations(ns, dtype, cols, args,
                                                              (kind, block)))
        elif kind != "warp":  # the other block kernel, for comparison
            alt = alternative_block_kernel(ns, variant, kind, dtype, args)
            if alt:
                alt_kind, alt_kernel, alt_block, alt_shared = alt
                alt_launch = alt_kernel[grid, alt_block, 0, alt_shared]
                candidates.append((f"{variant}, {alt_kind}",
                                   describe(alt_kind, alt_kernel, alt_block, alt_shared),
                                   lambda launch=alt_launch, args=args: launch(*args), False))

    def torch_layer_norm():
        return F.layer_norm(x, (cols,), weight, bias, EPS)

    torch_time = time_gpu(torch_layer_norm, inner=INNER)
    torch_gbs = torch_time.gbs(nbytes)
    main_rows, other_rows = [], []
    for variant, description, launch, main in candidates:
        y.fill_(float("nan"))
        stats.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        check_against_torch(f"{variant} ({dtype}, {cols} cols)", y, stats[0], stats[1], want,
                            dtype)
        timing = time_gpu(launch, inner=INNER)
        row = [dtype, cols, variant, description, round(timing.median_ms, 5),
               round(timing.gbs(nbytes), 1), round(torch_gbs, 1),
               round(torch_time.median_ms / timing.median_ms, 3)]
        (main_rows if main else other_rows).append(row)
        print(f"{dtype:8s} {cols:6d} {variant:24s} {timing.median_ms:9.4f} ms "
              f"{row[5]:8.0f} GB/s   torch {torch_gbs:7.0f} GB/s   x{row[7]:.2f}   "
              f"{description}", flush=True)
    overhead = None
    if with_overhead:
        overhead = launch_overhead(candidates, torch_layer_norm, f"({ROWS}, {cols}) {dtype}")
    return main_rows, other_rows, overhead


def packed_block_configurations(ns, dtype, cols, args, chosen):
    """The packed block kernels with 128 and 256 threads (except the dispatcher's choice),
    as benchmark candidates."""
    from workbook.occupancy import max_active_blocks

    out = []
    rows = args[6].shape[0]
    for kind, cached in (("smem", True), ("uncached", False)):
        kernel = ns["_packed"]((kind, np.dtype(dtype)),
                               lambda cached=cached: ns["make_block_layernorm_packed"](dtype,
                                                                                       cached))
        shared = 4 * cols if cached else 0
        for block in (128, 256):
            resident = max_active_blocks(kernel, block, shared, args)
            if (kind, block) == chosen or resident == 0:
                continue
            grid = min(rows, ns["WAVES"] * resident * ns["sm_count"]())
            launch = kernel[grid, block, 0, shared]
            out.append((f"packed, {kind}", describe(kind, kernel, block, shared),
                        lambda launch=launch, args=args: launch(*args), False))
    return out


def alternative_block_kernel(ns, variant, kind, dtype, args):
    """The block kernel the dispatcher did not choose: ``(kind, kernel, block, shared)``."""
    from workbook.occupancy import max_active_blocks

    cols = args[0].shape[1] if variant == "lesson" else args[8]
    if variant == "lesson":
        smem, uncached = ns["layernorm_block_smem_kernel"], ns["layernorm_block_uncached_kernel"]
    else:
        smem = ns["_packed"](("smem", np.dtype(dtype)),
                             lambda: ns["make_block_layernorm_packed"](dtype, True))
        uncached = ns["_packed"](("uncached", np.dtype(dtype)),
                                 lambda: ns["make_block_layernorm_packed"](dtype, False))
    if kind == "smem":
        for block in (1024, 512, 256):
            if max_active_blocks(uncached, block, 0, args) > 0:
                return "uncached", uncached, block, 0
        return None
    if max_active_blocks(smem, 1024, 4 * cols, args) > 0:
        return "smem", smem, 1024, 4 * cols
    return None


def launch_overhead(candidates, torch_layer_norm, shape: str) -> dict:
    """Host microseconds per launch (nothing waits for the GPU while they are queued)."""
    import torch

    def host_us(fn, count=200):
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            fn()
        elapsed = time.perf_counter() - start
        torch.cuda.synchronize()
        return elapsed / count * 1e6

    rows = [[variant, round(host_us(launch), 2)] for variant, _, launch, main in candidates
            if main]
    rows.append(["torch.nn.functional.layer_norm", round(host_us(torch_layer_norm), 2)])
    for name, us in rows:
        print(f"host time per launch, {name}: {us:.1f} us")
    return {"title": f"host time per launch (us), {shape}",
            "columns": ["launch", "host us per launch"], "rows": rows,
            "note": "A kernel shorter than this is limited by the host, whatever inner= does."}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "workbook" / "data" / "04_layernorm.json")
    parser.add_argument("--cols", default=",".join(map(str, COLS)))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--packed-only", action="store_true",
                        help="re-measure the packed rows only, merging them into --out")
    args = parser.parse_args()
    if workbook.MODE != "gpu":
        raise SystemExit("this benchmark needs a GPU (WORKBOOK_MODE=gpu)")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("torch is needed for the baseline: pip install torch") from None
    start = time.monotonic()
    ns = definitions_namespace(NOTEBOOK)
    cols_list = [int(c) for c in args.cols.split(",")]
    part, overhead = bandwidth_part(ns, cols_list, args.dtypes.split(","), args.packed_only)
    print_summary(part)
    if args.packed_only:
        import torch

        merge_rows(args.out, {"bandwidth": part}, lambda r: r[2].startswith("packed"),
                   device_name(), {"date": datetime.date.today().isoformat(),
                                   "command": "python benchmarks/layernorm.py --packed-only",
                                   "what": f"packed rows (torch {torch.__version__} "
                                           "re-measured beside them)"},
                   order=lambda r: (DTYPES.index(r[0]), r[1]))
        print(f"updated {args.out} ({time.monotonic() - start:.0f} s)")
        return
    result = {
        "device": device_name(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/layernorm.py",
        "parts": {"bandwidth": part, "launch_overhead": overhead},
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} ({time.monotonic() - start:.0f} s)")


def print_summary(part: dict) -> None:
    """Best variant per shape, and whether the targets (>= 1x torch, >= 3x at <= 128) hold."""
    best: dict = {}
    for row in part["rows"]:
        key = (row[0], row[1])
        if key not in best or row[5] > best[key][5]:
            best[key] = row
    print("\n dtype     cols  best variant                   GB/s  torch GB/s  x torch  target")
    for (dtype, cols), row in sorted(best.items()):
        target = 3.0 if cols <= 128 else 1.0
        verdict = "met" if row[7] >= target else "MISSED"
        print(f" {dtype:8s} {cols:6d}  {row[2]:26s} {row[5]:8.0f}  {row[6]:10.0f}  "
              f"{row[7]:7.2f}  >= {target:g}x {verdict}")


if __name__ == "__main__":
    main()
