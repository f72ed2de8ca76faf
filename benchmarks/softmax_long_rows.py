"""Float16 softmax of long rows: lesson 03's block kernels, block sizes and grids (GPU).

    COLS=4096,8192,16384,32768 [ROWS_ONLY=1] python benchmarks/softmax_long_rows.py OUT.json

Times each kernel configuration (CUDA events, L2 flushed) on a (49152, cols) float16 input
beside ``torch.softmax``, and checks its result against torch's in float32: the uncached
kernel with 128-1024 threads, one block per row or (without ``ROWS_ONLY``) 2, 4 or 8 blocks
per SM looping over the rows, and the shared-memory kernel (its row cached as float32).
Section 6 of lesson 03 chooses the uncached kernel's block size from this run.
"""

from __future__ import annotations

import os

import numpy as np
from kernel_choices import run, time_choice  # beside this script

import workbook  # noqa: F401  (selects the mode before numba.cuda is imported)
from workbook.bench import time_gpu
from workbook.occupancy import allow_dynamic_shared_memory, max_active_blocks

ROWS = 49152


def configurations(ns, cols: int, sms: int, rows_only: bool) -> list[tuple]:
    """``(name, kernel, grid, threads, shared bytes)`` of every configuration timed."""
    pack = ns["pack_size"](np.float16, cols)
    dtype = np.dtype(np.float16)
    uncached = ns["build"](ns["make_block_uncached_softmax"], dtype, pack, False)
    found = []
    for threads in (128, 256, 512, 1024):
        found.append((f"uncached T={threads} grid=rows", uncached, ROWS, threads, 0))
        for k in () if rows_only else (2, 4, 8):
            found.append((f"uncached T={threads} grid={k}xSM", uncached, k * sms, threads, 0))
    smem = ns["build"](ns["make_block_smem_softmax"], dtype, pack, False)
    for threads in () if rows_only else (256, 512, 1024):
        found.append((f"smem(f32) T={threads} grid=rows", smem, ROWS, threads, cols * 4))
        found.append((f"smem(f32) T={threads} grid=2xSM", smem, 2 * sms, threads, cols * 4))
    return found


def measure(ns, cols: int, rows_only: bool) -> list[dict]:
    import torch
    from numba import cuda

    x = torch.randn(ROWS, cols, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    dx, dy = cuda.as_cuda_array(x), cuda.as_cuda_array(y)
    want = torch.softmax(x.float(), dim=1)
    torch_us = time_gpu(lambda: torch.softmax(x, dim=1), inner=5).median_ms * 1e3
    print(f"cols {cols} torch {torch_us:.1f} us", flush=True)
    rows = [{"cols": cols, "what": "torch", "us": torch_us}]
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    for name, kernel, grid, threads, shared in configurations(ns, cols, sms, rows_only):
        if shared:
            allow_dynamic_shared_memory(kernel, shared, (dx, dy))
            if max_active_blocks(kernel, threads, shared, (dx, dy)) <= 0:
                print(f"cols {cols} {name}: does not fit", flush=True)
                continue

        def launch(kernel=kernel, grid=grid, threads=threads, shared=shared):
            kernel[grid, threads, 0, shared](dx, dy)

        rows.append(time_choice(cols, name, launch,
                                lambda: (y.float() - want).abs().max().item(), torch_us))
    return rows


def main() -> None:
    rows_only = bool(os.environ.get("ROWS_ONLY"))
    run("solutions/03_softmax/softmax.ipynb", "16384,32768",
        lambda ns, cols: measure(ns, cols, rows_only), "softmax_long_rows.json")


if __name__ == "__main__":
    main()
