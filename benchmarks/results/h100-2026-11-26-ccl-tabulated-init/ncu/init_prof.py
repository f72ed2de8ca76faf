"""The init launches of lesson 05 at 8192^2 (p=0.59 4-conn, p=0.5 8-conn): the fused init +
compress and exercise 11's init alone, for ncu; and both timed with CUDA events."""
import sys, os
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
size = 8192
a = ns["BlobAnalysis"](size, size)
timing = os.environ.get("TIMING") == "1"
for p, conn in ((0.59, 4), (0.5, 8)):
    rng = np.random.default_rng(1)
    img = (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    fused = lambda: ns["block_init_compress_kernel"][a.grid, ns["BLOCK"]](d, a.roots, a.forest, a.links, size, size, conn)
    plain = lambda: ns["block_init_kernel"][a.grid, ns["BLOCK"]](d, a.forest, a.links, size, size, conn)
    fused(); plain(); cuda.synchronize()
    if timing:
        print(f"p={p} {conn}-conn: init+compress {time_gpu(fused, warmup=2, repeat=10).median_ms:.3f} ms, "
              f"init alone {time_gpu(plain, warmup=2, repeat=10).median_ms:.3f} ms", flush=True)
