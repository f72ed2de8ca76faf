"""Float16 LayerNorm of long rows: ``layer_norm_packed``'s plan against its block kernels (GPU).

    COLS=2048,16384,32768 python benchmarks/layernorm_long_rows.py OUT.json

Times, on a (49152, cols) float16 input with an affine transform, the kernel lesson 04's
``plan_layer_norm_packed`` chooses, and the block kernels, uncached and cached (the row in
shared memory as float32), with 128-1024 threads, a grid of the plan's waves or one block
per row, beside ``torch.native_layer_norm`` (CUDA events, L2 flushed); each result is
checked against ``F.layer_norm`` in float32.
"""

from __future__ import annotations

import numpy as np
from kernel_choices import run, time_choice  # beside this script

import workbook  # noqa: F401  (selects the mode before numba.cuda is imported)
from workbook.bench import time_gpu
from workbook.occupancy import allow_dynamic_shared_memory, max_active_blocks

ROWS = 49152


def measure(ns, cols: int) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from numba import cuda

    x = torch.randn(ROWS, cols, device="cuda", dtype=torch.float16)
    w = (1 + 0.5 * torch.randn(cols, device="cuda")).half()
    b = torch.randn(cols, device="cuda").half()
    y = torch.empty_like(x)
    mean, rstd = (torch.empty(ROWS, device="cuda") for _ in range(2))
    as_array = cuda.as_cuda_array
    args = (as_array(x.reshape(-1)), as_array(w), as_array(b), True, np.float32(1e-5),
            as_array(y.reshape(-1)), as_array(mean), as_array(rstd), cols)
    want = F.layer_norm(x.float(), (cols,), w.float(), b.float(), 1e-5)
    torch_us = time_gpu(lambda: torch.native_layer_norm(x, (cols,), w, b, 1e-5),
                        inner=5).median_ms * 1e3
    print(f"float16 cols {cols} torch {torch_us:.1f} us", flush=True)
    rows = [{"cols": cols, "what": "torch", "us": torch_us}]
    kind, kernel, grid, block, shared = ns["plan_layer_norm_packed"](args)
    choices = [(f"plan: {kind} grid={grid} T={block}", kernel, grid, block, shared)]
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    for cached in (False, True):
        kernel = ns["make_block_layernorm_packed"](np.dtype(np.float16), cached)
        shared = cols * 4 if cached else 0
        allow_dynamic_shared_memory(kernel, shared, args)
        for threads in (128, 256, 512, 1024):
            resident = max(1, max_active_blocks(kernel, threads, shared, args))
            for size, name in ((min(ROWS, ns["WAVES"] * resident * sms), "waves"),
                               (ROWS, "rows")):
                choices.append((f"block {'cached' if cached else 'uncached'} T={threads} "
                                f"grid={name}", kernel, size, threads, shared))
    for name, kernel, grid, threads, shared in choices:
        def launch(kernel=kernel, grid=grid, threads=threads, shared=shared):
            kernel[grid, threads, 0, shared](*args)

        rows.append(time_choice(cols, name, launch,
                                lambda: (y.float() - want).abs().max().item(), torch_us))
    return rows


def main() -> None:
    run("solutions/04_layernorm/layernorm.ipynb", "2048,16384,32768", measure,
        "layernorm_long_rows.json")


if __name__ == "__main__":
    main()
