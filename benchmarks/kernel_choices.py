"""What benchmarks/softmax_long_rows.py and layernorm_long_rows.py share: time one kernel
configuration beside the library's, and run a script over the columns ``COLS`` names."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def time_choice(cols: int, name: str, launch, error_of, library_us: float) -> dict:
    """Launch once, check (``error_of()``: the largest error against the library), time
    (CUDA events, L2 flushed, median), print and return the row."""
    from numba import cuda

    from workbook.bench import time_gpu

    launch()
    cuda.synchronize()
    error = error_of()
    us = time_gpu(launch, inner=5).median_ms * 1e3
    print(f"cols {cols} {name:40s} {us:9.1f} us  x{library_us / us:.2f} maxerr {error:.2e}",
          flush=True)
    return {"cols": cols, "what": name, "us": us, "ratio": library_us / us, "err": error}


def run(notebook: str, default_cols: str, measure, out_name: str) -> None:
    """``measure(namespace, cols)`` for each of ``COLS`` (default ``default_cols``) with the
    namespace of the solution ``notebook``; the rows go to the file named by the first
    argument (default ``out_name``)."""
    import workbook
    from grader.runner import definitions_namespace

    if workbook.MODE != "gpu":
        raise SystemExit("this benchmark needs a GPU (WORKBOOK_MODE=gpu)")
    ns = definitions_namespace(ROOT / notebook)
    columns = [int(c) for c in os.environ.get("COLS", default_cols).split(",")]
    rows = [r for cols in columns for r in measure(ns, cols)]
    Path(sys.argv[1] if len(sys.argv) > 1 else out_name).write_text(
        json.dumps(rows, indent=1) + "\n")
