"""One BlobAnalysis.run per image at 8192^2 (after a warm-up run), for ncu."""
import sys
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace

ns = example_namespace()
size = 8192
analysis = ns["BlobAnalysis"](size, size)
for p, conn in ((0.3, 4), (0.59, 4), (0.9, 8)):
    rng = np.random.default_rng(1)
    img = (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    k = analysis.run(d, conn)
    cuda.synchronize()
    print(f"p={p} {conn}-conn: {k} blobs", flush=True)
