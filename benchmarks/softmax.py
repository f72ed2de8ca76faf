"""Benchmark lesson 03's softmax kernels on a GPU, next to torch.softmax.

    python benchmarks/softmax.py [--out workbook/data/03_softmax.json] [--quick] [--no-ncu]
                                 [--dispatch-only]

Needs torch (the baseline, and the source of the test data). Parts of the JSON file:

``bandwidth``
    (49152, cols) float32 and float16, cols = 32 ... 32768: effective GB/s counting one
    read and one write per element, for ``softmax_gpu`` (the dispatcher), each kernel of
    the lesson in the configurations that apply, and ``torch.softmax``, all in the same
    run: ``time_gpu(..., inner=10)`` (CUDA events, L2 flushed before each timed region,
    10 launches queued per region so that the host's launch cost hides behind the GPU's
    work). Every output is checked against ``torch.softmax`` before it is timed. ``rows``
    holds the dispatcher and the best configuration of each kernel per shape,
    ``all_rows`` every configuration.
``kernel_time``
    The GPU time of the same launches alone (CUPTI, through ``torch.profiler``): what the
    kernels cost without the host. Where it differs much from ``bandwidth``, the host
    (Python and the launch path) is the limit, not the kernel.
``launch``
    Host time per call on a tiny input: ``softmax_gpu``, a bare numba launch, the same
    launch through ``workbook.launch.prepare``, torch.softmax.
``bank_conflicts``
    Nsight Compute's shared-memory bank-conflict counters for the shared-memory kernel
    with the column-major pack layout of the lesson and with the row-major layout
    (the slow variant of ``softmax.block_smem``), float32 and float16, (8192, 4096).

``--quick`` runs fewer shapes and repeats (a smoke test of the script).
``--dispatch-only`` times ``softmax_gpu`` and torch at every shape and replaces only the
dispatcher's rows (and the ``launch`` part) of an existing ``--out`` file: the other rows
keep the run that measured them, and ``updates`` in the file says what was re-measured.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import workbook  # noqa: E402,F401  (selects the mode before numba.cuda is imported)
from grader.exercises import slow_variant  # noqa: E402
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import bandwidth_gbs, device_name, time_gpu  # noqa: E402
from workbook.launch import prepare  # noqa: E402
from workbook.recorded import merge_rows  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "03_softmax" / "softmax.ipynb"
ROWS = 49152
COLS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DTYPES = ("float32", "float16")
BLOCK_SIZES = (128, 256, 512, 1024)
NAIVE_COLS = (128, 1024, 8192)  # float32 only: the three-kernel version is slow
INNER = 10
REPEAT = 20
TOLERANCE = {"float32": dict(rtol=1e-4, atol=1e-6), "float16": dict(rtol=4e-3, atol=1e-4)}
CONFLICT_SHAPE = (8192, 4096)
NCU_METRICS = {
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "store conflicts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "load conflicts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "store wavefronts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "load wavefronts",
    "gpu__time_duration.sum": "duration (us)",
}
NCU_ESSENTIAL = list(NCU_METRICS)[:2] + ["gpu__time_duration.sum"]


def row_major_namespace(ns: dict) -> dict:
    """The solution with the block kernel's packs stored row-major (bank conflicts)."""
    variant = dict(ns)
    exec(compile(slow_variant("softmax.block_smem").new, "<row-major variant>", "exec"),
         variant)
    return variant


# --- one shape ------------------------------------------------------------------------------

def variants_for(ns: dict, dtype, cols: int, x, y,
                 dispatch_only: bool = False) -> list[tuple[str, str, object]]:
    """(kind, configuration, launch) of every kernel configuration timed for this shape."""
    from workbook.occupancy import max_active_blocks

    out = []
    name, kernel, rows_per_block, threads, shared = ns["plan"](x, y)
    out.append(("dispatch", name, lambda: ns["softmax_gpu"](x, y)))
    if dispatch_only:
        return out
    pack = ns["pack_size"](dtype, cols)
    build = ns["build"]
    if cols <= 1024:
        per_thread, width, rows_per_thread = ns["warp_config"](cols, pack)
        other = 1 if rows_per_thread == 2 else 2
        if other == 2 and per_thread > 16:
            other = None
        if other:
            kernel = build(ns["make_warp_softmax"], dtype, pack, per_thread, width, other, False)
            grid = -(-ROWS // (128 // width * other))
            out.append(("warp", f"{width} lanes x {per_thread}, rows_per_thread={other}",
                        lambda k=kernel, g=grid: k[g, 128](x, y)))
    if cols == 2048:
        kernel = build(ns["make_warp_softmax"], dtype, pack, cols // 32, 32, 1, False)
        out.append(("warp", f"32 lanes x {cols // 32}, rows_per_thread=1",
                    lambda k=kernel: k[ROWS // 4, 128](x, y)))
    if cols >= 1024:
        smem = build(ns["make_block_smem_softmax"], dtype, pack, False)
        uncached = build(ns["make_block_uncached_softmax"], dtype, pack, False)
        for threads in BLOCK_SIZES:
            if max_active_blocks(smem, threads, 4 * cols, (x, y)) > 0:
                out.append(("block_smem", f"{threads} threads",
                            lambda t=threads: smem[ROWS, t, 0, 4 * cols](x, y)))
            out.append(("block_uncached", f"{threads} threads",
                        lambda t=threads: uncached[ROWS, t](x, y)))
    if np.dtype(dtype) == np.float32 and cols in NAIVE_COLS:
        out.append(("naive", "3 kernels", lambda: ns["softmax_naive"](x, y)))
    return out


def device_us(torch, fn, calls: int = 10) -> float | None:
    """Mean GPU time of the kernels one ``fn()`` launches (CUPTI via torch.profiler)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        total = 0.0
        for event in prof.key_averages():
            total += getattr(event, "device_time_total", None) or getattr(
                event, "cuda_time_total", 0.0)
        return total / calls if total else None
    except Exception as exc:  # the profiler is an extra: never fail the benchmark for it
        print(f"  (no kernel time: {type(exc).__name__}: {exc})", flush=True)
        return None


def measure_shape(ns, torch, dtype: str, cols: int, repeat: int,
                  dispatch_only: bool = False) -> tuple[list, list]:
    from numba import cuda

    torch_dtype = getattr(torch, dtype)
    x_t = torch.randn((ROWS, cols), device="cuda", dtype=torch_dtype)
    expected = torch.softmax(x_t, dim=1)
    y_t = torch.empty_like(x_t)
    x, y = cuda.as_cuda_array(x_t), cuda.as_cuda_array(y_t)
    nbytes = 2 * x_t.numel() * x_t.element_size()

    torch_timing = time_gpu(lambda: torch.softmax(x_t, dim=1), repeat=repeat, inner=INNER)
    torch_gbs = torch_timing.gbs(nbytes)
    torch_us = device_us(torch, lambda: torch.softmax(x_t, dim=1))
    rows, kernel_rows = [], []
    for kind, config, launch in variants_for(ns, np.dtype(dtype), cols, x, y, dispatch_only):
        y_t.fill_(float("nan"))
        launch()
        cuda.synchronize()
        try:
            torch.testing.assert_close(y_t, expected, **TOLERANCE[dtype])
        except AssertionError as exc:
            raise SystemExit(
                f"{dtype} cols={cols} {kind} ({config}): wrong result\n{exc}") from None
        slow = kind == "naive"
        timing = time_gpu(launch, repeat=5 if slow else repeat, inner=1 if slow else INNER)
        gbs = timing.gbs(nbytes)
        label = f"{kind} ({config})" if kind in ("dispatch", "prepared") else f"{kind}, {config}"
        rows.append([dtype, cols, label, round(gbs, 1), round(torch_gbs, 1),
                     round(gbs / torch_gbs, 3)])
        us = None if slow else device_us(torch, launch)
        if us and torch_us:
            kernel_rows.append([dtype, cols, label, round(us, 2),
                                round(bandwidth_gbs(nbytes, us / 1e3), 1), round(torch_us, 2),
                                round(torch_us / us, 3)])
        print(f"{dtype:8s} {cols:6d} {label:40s} {gbs:8,.0f} GB/s  torch {torch_gbs:8,.0f}"
              f"  x{gbs / torch_gbs:5.2f}" + (f"  kernel {us:8.1f} us (torch {torch_us:.1f})"
                                               if us and torch_us else ""), flush=True)
    return rows, kernel_rows


def best_rows(rows: list[list], gbs_column: int = 3) -> list[list]:
    """The dispatcher's row and the fastest configuration of each kernel, per shape."""
    best: dict[tuple, list] = {}
    for row in rows:
        kind = row[2] if row[2].startswith("dispatch") else row[2].split(",")[0]
        key = (row[0], row[1], kind)
        if key not in best or row[gbs_column] > best[key][gbs_column]:
            best[key] = row
    return list(best.values())


# --- host cost of a call ----------------------------------------------------------------------

def launch_part(ns, torch) -> dict:
    from numba import cuda

    x_t = torch.randn((1, 32), device="cuda")
    y_t = torch.empty_like(x_t)
    x, y = cuda.as_cuda_array(x_t), cuda.as_cuda_array(y_t)
    kernel = ns["plan"](x, y)[1]
    prepared = prepare(kernel, 1, 128, 0, (x, y))
    calls = {
        "softmax_gpu (dispatcher)": lambda: ns["softmax_gpu"](x, y),
        "numba launch kernel[grid, block](x, y)": lambda: kernel[1, 128](x, y),
        "workbook.launch.prepare(kernel, 1, 128, 0, (x, y))": lambda: prepared(x, y),
        "torch.softmax": lambda: torch.softmax(x_t, dim=1),
    }
    rows = []
    for name, fn in calls.items():
        if fn is None:
            continue
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        n = 3000
        start = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - start) / n * 1e6
        torch.cuda.synchronize()
        rows.append([name, round(host, 2)])
        print(f"host time per call: {name:40s} {host:6.2f} us", flush=True)
    return {"title": "host time per call on a (1, 32) float32 input (Python and launch path)",
            "columns": ["call", "us per call"], "rows": rows,
            "note": "A kernel that takes less GPU time than this is limited by the host: "
                    "queued launches (inner=10) cannot hide a cost paid for every launch."}


# --- bank conflicts under Nsight Compute --------------------------------------------------------

def launch_bank_conflicts(ns) -> None:
    """Launch the shared-memory kernel once per layout and dtype (the ncu target)."""
    from numba import cuda

    from workbook.occupancy import allow_dynamic_shared_memory

    rows, cols = CONFLICT_SHAPE
    variant = row_major_namespace(ns)
    for dtype in (np.float32, np.float16):
        x = cuda.to_device(np.random.default_rng(0).standard_normal((rows, cols)).astype(dtype))
        y = cuda.device_array_like(x)
        pack = ns["pack_size"](dtype, cols)
        for space in (ns, variant):
            kernel = space["make_block_smem_softmax"](dtype, pack, False)
            allow_dynamic_shared_memory(kernel, 4 * cols, (x, y))
            kernel[rows, 128, 0, 4 * cols](x, y)
            cuda.synchronize()


def run_ncu(metrics: list[str]):
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not os.path.exists(ncu):
        return None, "ncu not found"
    cmd = [ncu, "--csv", "--page", "raw", "--metrics", ",".join(metrics), "--kernel-name",
           r"regex:^block_smem_softmax_kernel\[", sys.executable, __file__,
           "--launch-bank-conflicts"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    if proc.returncode != 0 or len(lines) < 2:
        return None, (proc.stdout[-2000:] + proc.stderr[-2000:])
    return list(csv.DictReader(io.StringIO("\n".join(lines))))[1:], ""  # row 0: units


def bank_conflicts_part() -> dict | None:
    records, problem = run_ncu(list(NCU_METRICS))
    metrics = list(NCU_METRICS)
    if records is None:
        print(f"ncu with every metric failed, retrying with the essential ones:\n{problem}")
        records, problem = run_ncu(NCU_ESSENTIAL)
        metrics = NCU_ESSENTIAL
    if records is None:
        print(f"ncu profiling failed: {problem}")
        return None
    labels = [(d, layout) for d in DTYPES for layout in ("column-major (lesson)", "row-major")]
    rows = []
    for (dtype, layout), record in zip(labels, records):
        values = [float(record[m].replace(",", "")) for m in metrics]
        if "gpu__time_duration.sum" in metrics:
            k = metrics.index("gpu__time_duration.sum")
            values[k] = round(values[k] / 1000.0, 2)  # ns -> us
        rows.append([dtype, layout, *values])
        print(f"bank conflicts {dtype} {layout:22s} " + "  ".join(
            f"{NCU_METRICS[m]} {v:,.0f}" for m, v in zip(metrics, values)), flush=True)
    return {
        "title": f"block shared-memory softmax, {CONFLICT_SHAPE[0]} x {CONFLICT_SHAPE[1]}, "
                 "128 threads, Nsight Compute",
        "columns": ["dtype", "pack layout", *(NCU_METRICS[m] for m in metrics)],
        "rows": rows,
        "note": "Packs of 16 bytes: 4 float32 (4-way conflicts when stored row-major) or "
                "8 float16 (8-way). Column-major packs put the 32 lanes of each shared-memory "
                "access on 32 banks. ncu locks clocks to base: durations are longer than "
                "event timings.",
    }


def merge_dispatch_rows(path: Path, parts: dict, torch_version: str) -> None:
    """Replace the dispatcher's rows and the launch part of the recorded file at ``path``."""
    new = {name: parts[name] for name in ("bandwidth", "kernel_time", "launch") if name in parts}
    merge_rows(path, new, lambda r: r[2].startswith(("dispatch", "prepared")), device_name(),
               {"date": datetime.date.today().isoformat(),
                "command": "python benchmarks/softmax.py --dispatch-only",
                "what": f"softmax_gpu rows (torch {torch_version} re-measured beside them) "
                        "and the launch part"},
               order=lambda r: (DTYPES.index(r[0]), r[1]), whole=("launch",))


# --- main -----------------------------------------------------------------------------------------

def targets(rows: list[list]) -> list[str]:
    """The issue's targets: >= 1.0x torch everywhere; >= 1.5x for float16 with cols >= 2048
    and for cols <= 128."""
    lines = []
    for row in rows:
        if not row[2].startswith("dispatch"):
            continue
        dtype, cols, ratio = row[0], row[1], row[5]
        want = 1.5 if (dtype == "float16" and cols >= 2048) or cols <= 128 else 1.0
        verdict = "met" if ratio >= want else "MISSED"
        lines.append(f"{dtype:8s} cols={cols:6d} x{ratio:5.2f} torch (target {want}x): {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "workbook" / "data" / "03_softmax.json")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
    parser.add_argument("--no-ncu", action="store_true", help="skip the bank-conflict profile")
    parser.add_argument("--dispatch-only", action="store_true",
                        help="re-measure softmax_gpu only, merging into --out")
    parser.add_argument("--launch-bank-conflicts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    ns = definitions_namespace(NOTEBOOK)
    if args.launch_bank_conflicts:
        launch_bank_conflicts(ns)
        return
    import torch

    started = time.monotonic()
    cols_list = (32, 1024, 4096) if args.quick else COLS
    repeat = 5 if args.quick else REPEAT
    rows, kernel_rows = [], []
    for dtype in DTYPES:
        for cols in cols_list:
            shape_rows, shape_kernel_rows = measure_shape(ns, torch, dtype, cols, repeat,
                                                          args.dispatch_only)
            torch.cuda.empty_cache()  # the shape's arrays are gone: give their memory back
            rows.extend(shape_rows)
            kernel_rows.extend(shape_kernel_rows)
    parts = {
        "bandwidth": {
            "title": f"softmax of ({ROWS}, cols): GB/s counting one read and one write, median "
                     f"of {repeat} x {INNER} back-to-back calls",
            "columns": ["dtype", "cols", "variant", "GB/s", "torch GB/s", "x torch"],
            "rows": best_rows(rows),
            "all_rows": rows,
            "note": f"torch {torch.__version__} measured in the same run on the same data. "
                    "'dispatch (k)' is softmax_gpu, which chose kernel k (launched through "
                    "workbook.launch.prepare); other rows show the fastest "
                    "configuration of each kernel (all_rows has every one).",
        },
        "launch": launch_part(ns, torch),
    }
    if kernel_rows:
        parts["kernel_time"] = {
            "title": "GPU time per call without the host (CUPTI via torch.profiler)",
            "columns": ["dtype", "cols", "variant", "kernel us", "GB/s", "torch us",
                        "x torch"],
            "rows": best_rows(kernel_rows, gbs_column=4),
            "all_rows": kernel_rows,
            "note": "Consecutive calls without an L2 flush: shapes smaller than L2 run from "
                    "cache, for torch as for the lesson's kernels.",
        }
    if args.dispatch_only:
        merge_dispatch_rows(args.out, parts, torch.__version__)
        print("\n".join(["", "targets:", *targets(rows)]))
        print(f"updated {args.out} in {time.monotonic() - started:.0f} s")
        return
    if not args.no_ncu:
        conflicts = bank_conflicts_part()
        if conflicts:
            parts["bank_conflicts"] = conflicts
    result = {
        "device": device_name(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/softmax.py" + (" --quick" if args.quick else ""),
        "parts": parts,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("\n".join(["", "targets:", *targets(rows)]))
    print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
