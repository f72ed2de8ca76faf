"""v12's init + compress (and the lesson's) at 8192^2 p=0.59 4-conn, for ncu."""
import sys
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace

ns = example_namespace()
space = dict(ns)
exec(open(".whl/v12_init.py").read(), space)
size = 8192
a = ns["BlobAnalysis"](size, size)
rng = np.random.default_rng(1)
img = (rng.random((size, size), dtype=np.float32) < 0.59).astype(np.uint8)
d = cuda.to_device(img.reshape(-1))
table = space["init_table"](4)
space["block_init_compress_kernel"][a.grid, ns["BLOCK"]](d, a.roots, a.forest, a.links, size, size, 4, table)
ns["block_init_compress_kernel"][a.grid, ns["BLOCK"]](d, a.roots, a.forest, a.links, size, size, 4)
cuda.synchronize()
