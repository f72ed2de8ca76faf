"""BlobAnalysis.run (K's copy queued before the write of the labels) against the phases called
one after another as run() did before (label, number: a blocking read of K, write): same
labels and statistics; CUDA event times (L2 flushed) and wall time per call in a loop."""
import sys, os, time
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
gpu = workbook.MODE == "gpu"
for size in [int(s) for s in os.environ.get("SIZES", "2048,8192").split(",")]:
    a = ns["BlobAnalysis"](size, size)
    for p, conn in ((0.1, 4), (0.1, 8), (0.3, 4), (0.3, 8), (0.5, 4), (0.5, 8), (0.59, 4),
                    (0.59, 8), (0.9, 4), (0.9, 8)):
        rng = np.random.default_rng(1)
        img = (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)
        d = cuda.to_device(img.reshape(-1))

        def before():
            a.label(d, conn)
            count = a.number()
            a.write(count)
            return count

        def after():
            return a.run(d, conn)

        out = {}
        for name, fn in (("before", before), ("after", after)):
            k = fn()
            out[name] = [k, a.labels.copy_to_host()] + [f.copy_to_host()[:k] for f in a.fields]
        same = out["before"][0] == out["after"][0] and all(
            np.array_equal(x, y) for x, y in zip(out["before"][1:], out["after"][1:]))
        line = f"{size} p={p} {conn}-conn K={out['after'][0]} same={same}"
        if gpu:
            for rnd in range(2):
                for name, fn in (("before", before), ("after", after)):
                    t = time_gpu(fn, warmup=2, repeat=10).median_ms
                    walls = []
                    for _ in range(5):
                        cuda.synchronize()
                        t0 = time.perf_counter()
                        for _ in range(20):
                            fn()
                        cuda.synchronize()
                        walls.append((time.perf_counter() - t0) / 20 * 1e3)
                    line += f" | {name} {t:.3f} wall {np.median(walls):.3f}"
        print(line, flush=True)
