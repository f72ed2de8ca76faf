"""The write of BlobAnalysis (block_write_kernel) against a variant storing each row's two labels
as one 64-bit number: same labels, CUDA event times."""
import sys, os
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
exec(open(".whl/w1_write.py").read(), ns)
shape = [int(v) for v in os.environ.get("SIZE", "8192").split("x")]
h, w = (shape * 2)[:2]
a = ns["BlobAnalysis"](h, w)
gpu = workbook.MODE == "gpu"
for p, conn in ((0.1, 4), (0.3, 4), (0.5, 8), (0.59, 4), (0.9, 4), (0.9, 8)):
    rng = np.random.default_rng(1)
    img = (rng.random((h, w), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    a.label(d, conn); count = a.number(); a.write_labels()
    want = a.labels.copy_to_host()
    pairs = a.labels.view(np.int64)
    k = ns["block_write_pairs_kernel"]
    args = (a.links, a.roots, a.levels[0][1], pairs, h, w, conn)
    launch = ns["prepare"](k, a.grid, ns["BLOCK"], 0, args)
    run = lambda: launch(*args)
    a.labels.copy_to_device(np.zeros(h * w, np.int32))
    run()
    same = np.array_equal(a.labels.copy_to_host(), want)
    line = f"p={p} {conn}-conn {count} blobs: same {same}"
    if gpu:
        line += (f" | write {time_gpu(a.write_labels, warmup=2, repeat=10).median_ms:.3f}"
                 f" | pairs {time_gpu(run, warmup=2, repeat=10).median_ms:.3f}")
    print(line, flush=True)
