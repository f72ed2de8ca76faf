"""Benchmark lesson 02's solution kernels on a GPU, next to torch.sum and cupy.sum.

    python benchmarks/reduction.py [--out workbook/data/02_reduction.json]

Part "bandwidth": 2^28 float32 (1 GiB), effective GB/s counting the bytes read once.
Part "single_block": the one-block kernels of exercises 1-3 on 2048 elements,
profiled with Nsight Compute (instructions executed, duration, global requests).
Every kernel's result is checked against numpy before it is timed.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import workbook  # noqa: E402,F401  (selects the mode before numba.cuda is imported)
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import device_name, time_gpu  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "02_reduction" / "reduction.ipynb"
N_LARGE = 1 << 28
INNER = 10  # launches per timed region: hides numba's host-side launch cost (1 GiB >> L2)
NCU_METRICS = {
    "gpu__time_duration.sum": "duration (us)",
    "smsp__inst_executed.sum": "instructions executed",
    "smsp__sass_average_branch_targets_threads_uniform.pct": "uniform branches (%)",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global load requests",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "global store requests",
}
SINGLE_BLOCK = ("simple_sum_kernel", "convergent_sum_kernel", "shared_sum_kernel")


def checked_sum(launch, x_dev, expected: float, what: str) -> float:
    from numba import cuda

    out = cuda.to_device(np.zeros(1, np.float32))
    launch(x_dev, out)  # the kernels add into out, which starts at 0
    got = float(out.copy_to_host()[0])
    if abs(got - expected) > 1e-4 * abs(expected) + 1:
        raise SystemExit(f"{what}: wrong sum {got} (expected {expected})")
    return got


def bandwidth_part(ns: dict, sms: int) -> dict:
    from numba import cuda

    rng = np.random.default_rng(0)
    x = rng.random(N_LARGE, dtype=np.float32)
    expected = float(x.sum(dtype=np.float64))
    x_dev = cuda.to_device(x)
    nbytes = x.nbytes
    out = cuda.to_device(np.zeros(1, np.float32))
    rows = []

    def kernel_launcher(kernel, grid, block):
        def launch(inp, o):
            kernel[grid, block](inp, o, N_LARGE)
        return launch

    coarse = int(ns["COARSE_FACTOR"])
    variants = [
        ("segmented_sum_kernel", "1 block per 512 elements", ns["segmented_sum_kernel"],
         -(-N_LARGE // 512), 256),
        ("coarsened_sum_kernel", f"COARSE_FACTOR={coarse}", ns["coarsened_sum_kernel"],
         -(-N_LARGE // (512 * coarse)), 256),
    ]
    for blocks_per_sm in (4, 8, 16, 32):
        for tpb in (256, 512):
            variants.append(("shuffle_sum_kernel", f"grid {blocks_per_sm}xSMs, {tpb} threads",
                             ns["shuffle_sum_kernel"], blocks_per_sm * sms, tpb))
            variants.append(("shuffle_sum_vec4_kernel",
                             f"grid {blocks_per_sm}xSMs, {tpb} threads",
                             ns["shuffle_sum_vec4_kernel"], blocks_per_sm * sms, tpb))
    for name, config, kernel, grid, block in variants:
        launch = kernel_launcher(kernel, grid, block)
        checked_sum(launch, x_dev, expected, f"{name} ({config})")
        # out keeps accumulating while timing: its value no longer matters then
        timing = time_gpu(lambda launch=launch: launch(x_dev, out), repeat=30, inner=INNER)
        rows.append([name, config, timing.median_ms, timing.gbs(nbytes)])
        print(f"{name:26s} {config:30s} {timing.median_ms:8.3f} ms {timing.gbs(nbytes):8.0f} GB/s",
              flush=True)
    rows.extend(baseline_rows(x, expected, nbytes))
    rows = with_ratio_to(rows, "torch.sum")
    return {
        "title": "sum of 2^28 float32 (1 GiB): median of 30 x 10 back-to-back runs, "
                 "GB/s counting the bytes read once",
        "columns": ["kernel", "configuration", "ms", "GB/s", "x torch.sum"],
        "rows": best_rows(rows),
        "all_rows": rows,
        "note": "Kernels of this lesson and library baselines measured in the same run. "
                "For the shuffle kernels the best launch configuration is shown "
                "(all_rows in the JSON file has every one).",
    }


def with_ratio_to(rows: list[list], baseline: str) -> list[list]:
    """Append each row's speed relative to ``baseline`` (its time over the row's time)."""
    base = next((r[2] for r in rows if r[0] == baseline), None)
    return [[*r, round(base / r[2], 3) if base else None] for r in rows]


def best_rows(rows: list[list]) -> list[list]:
    best: dict[str, list] = {}
    for row in rows:
        if row[0] not in best or row[3] > best[row[0]][3]:
            best[row[0]] = row
    return list(best.values())


def baseline_rows(x: np.ndarray, expected: float, nbytes: int) -> list[list]:
    """torch.sum and cupy.sum on the same data, where installed."""
    rows = []
    for module_name, to_device in (("torch", lambda m: m.from_numpy(x).cuda()),
                                   ("cupy", lambda m: m.asarray(x))):
        try:
            module = __import__(module_name)
        except ImportError:
            print(f"{module_name} not installed: no {module_name}.sum baseline")
            continue
        data = to_device(module)
        assert abs(float(data.sum()) - expected) < 1e-4 * expected
        timing = time_gpu(lambda d=data: d.sum(), repeat=30, inner=INNER)
        rows.append([f"{module_name}.sum", module.__version__, timing.median_ms,
                     timing.gbs(nbytes)])
        print(f"{module_name}.sum {timing.median_ms:.3f} ms {timing.gbs(nbytes):.0f} GB/s",
              flush=True)
    return rows


def launch_single_block(ns: dict) -> None:
    """Run each one-block kernel once on 2048 elements (the target of the ncu profile)."""
    from numba import cuda

    x = np.random.default_rng(1).random(2048, dtype=np.float32)
    for name in SINGLE_BLOCK:
        checked_sum(lambda inp, o, k=ns[name]: k[1, 1024](inp, o), cuda.to_device(x),
                    float(x.sum(dtype=np.float64)), name)
    cuda.synchronize()


def single_block_part() -> dict | None:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not os.path.exists(ncu):
        print("ncu not found: skipping the single-block profile")
        return None
    regex = "regex:^(" + "|".join(SINGLE_BLOCK) + r")\["
    cmd = [ncu, "--csv", "--page", "raw", "--metrics", ",".join(NCU_METRICS), "--kernel-name",
           regex, sys.executable, __file__, "--launch-single-block"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    if proc.returncode != 0 or not lines:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit("ncu profiling failed")
    records = list(csv.DictReader(io.StringIO("\n".join(lines))))[1:]  # row 0 holds units
    rows = []
    for record in records:
        kernel = record["Kernel Name"].split("[")[0]
        values = [float(record[m].replace(",", "")) for m in NCU_METRICS]
        values[0] /= 1000.0  # ns -> us
        rows.append([kernel, *values])
    return {
        "title": "one block of 1024 threads summing 2048 float32, Nsight Compute",
        "columns": ["kernel", *NCU_METRICS.values()],
        "rows": rows,
        "note": "Uniform branches stay at 100 %: the compiler predicates the short if, so "
                "branch efficiency does not separate the kernels on this GPU; "
                "instructions executed and duration do.",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "workbook" / "data" / "02_reduction.json")
    parser.add_argument("--launch-single-block", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    ns = definitions_namespace(NOTEBOOK)
    if args.launch_single_block:
        launch_single_block(ns)
        return
    from numba import cuda

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    parts = {"bandwidth": bandwidth_part(ns, sms)}
    single = single_block_part()
    if single:
        parts["single_block"] = single
    result = {
        "device": device_name(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/reduction.py",
        "parts": parts,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
