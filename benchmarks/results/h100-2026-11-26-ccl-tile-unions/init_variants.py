"""Init + compress variants of lesson 05, timed (CUDA events) and, with 'prof', run once for ncu."""
import sys, time
sys.path[:0] = ["tests"]
import numpy as np
import workbook
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
old = open("benchmarks/results/h100-2026-11-26-ccl-tile-unions/fused_kernel_before.py").read().replace("def block_init_compress_kernel", "def old_init_compress_kernel")
new = open("benchmarks/results/h100-2026-11-26-ccl-tile-unions/tile_unions_kernel.py").read()
variants = {"old": (old, "old_init_compress_kernel"), "new": (None, "block_init_compress_kernel")}
variants["nounion"] = (new.replace("bits = tile_unions(", "bits = bits if connectivity < 9 else tile_unions(")
                       .replace("def block_init_compress_kernel", "def nounion_kernel"), "nounion_kernel")
variants["plainwalk"] = (new.replace("cuda.atomic.or_(forest, k, 0)", "forest[k]")
                         .replace("def block_init_compress_kernel", "def plainwalk_kernel"), "plainwalk_kernel")
extra = sys.argv[2:] if len(sys.argv) > 2 else None
kernels = {}
for name, (src, kname) in variants.items():
    if src is None:
        kernels[name] = ns[kname]
    else:
        space = dict(ns)
        exec(src, space)
        kernels[name] = space[kname]

def image_of(size, p, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)

mode = sys.argv[1]
size = 8192
rows_ = []
cases = [(0.1, 4), (0.1, 8), (0.5, 4), (0.5, 8), (0.59, 4), (0.9, 4), (0.9, 8)] if mode == "time" else [(0.1, 4), (0.5, 8), (0.9, 4)]
for p, conn in cases:
    img = image_of(size, p)
    h, w = img.shape
    cols = (w + 1) // 2
    n = h * cols
    d_img = cuda.to_device(img.reshape(-1))
    roots = cuda.device_array(n, np.int32)
    forest = cuda.device_array(n, np.int32)
    links = cuda.device_array(((h + 1) // 2) * cols, np.uint8)
    grid = ns["block_grid"](h, w)
    line = [f"p={p} {conn}-conn"]
    for name, k in kernels.items():
        fn = lambda k=k: k[grid, ns["BLOCK"]](d_img, roots, forest, links, h, w, conn)
        if mode == "time":
            t = time_gpu(fn, warmup=2, repeat=10).median_ms
            line.append(f"{name} {t:.3f}")
        else:
            fn(); cuda.synchronize()
    print(" | ".join(line), flush=True)
