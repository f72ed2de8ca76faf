"""Init + compress variants of lesson 05 (files given as name=path), timed with CUDA events at
8192^2 against the lesson's kernel, each checked to give the same roots and links."""
import sys
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
kernels = {"lesson": ns["block_init_compress_kernel"]}
extras = {"lesson": lambda c: ()}
for spec in sys.argv[1:]:
    name, path = spec.split("=")
    space = dict(ns)
    exec(open(path).read(), space)
    kernels[name] = space["block_init_compress_kernel"]
    extras[name] = space.get("INIT_EXTRA", lambda c: ())
shape = [int(v) for v in __import__("os").environ.get("SIZE", "8192").split("x")]
shape = (shape * 2)[:2]
cases = [(0.1, 4), (0.1, 8), (0.3, 4), (0.5, 8), (0.59, 4), (0.9, 4), (0.9, 8)]
for p, conn in cases:
    rng = np.random.default_rng(1)
    img = (rng.random(tuple(shape), dtype=np.float32) < p).astype(np.uint8)
    h, w = img.shape
    cols = (w + 1) // 2
    n = h * cols
    d_img = cuda.to_device(img.reshape(-1))
    grid = ns["block_grid"](h, w)
    line, ref = [f"p={p} {conn}-conn"], None
    for name, k in kernels.items():
        extras[name](conn)  # build outside the timing
        roots = cuda.device_array(n, np.int32)
        forest = cuda.to_device(np.full(n, -7, np.int32))
        links = cuda.device_array(((h + 1) // 2) * cols, np.uint8)
        k[grid, ns["BLOCK"]](d_img, roots, forest, links, h, w, conn, *extras[name](conn))
        got = (roots.copy_to_host(), forest.copy_to_host(), links.copy_to_host())
        if ref is None:
            ref = got
        same = all(np.array_equal(a, b) for a, b in zip(got, ref))
        t = 0.0 if workbook.MODE == "sim" else time_gpu(lambda k=k: k[grid, ns["BLOCK"]](d_img, roots, forest, links, h, w, conn, *extras[name](conn)),
                     warmup=2, repeat=10).median_ms
        line.append(f"{name} {t:.3f}{'' if same else ' DIFFERENT'}")
    print(" | ".join(line), flush=True)
