"""BlobAnalysis variants (name=path[+path]) against the lesson's: the same labels and
statistics over a sequence of images on one object (simulator or GPU); on a GPU, per image
the run between CUDA events (median of 10, L2 flushed) and as users call it: the run in a
Python loop of 20 calls, wall clock per call (the GPU drained before and after)."""
import os
import sys
import time

sys.path[:0] = ["tests"]
import numpy as np  # noqa: E402
import workbook  # noqa: E402,F401
from numba import cuda  # noqa: E402
from test_ccl_exercises import example_namespace  # noqa: E402
from workbook.bench import time_gpu  # noqa: E402

ns = example_namespace()
classes = {"lesson": ns["BlobAnalysis"]}
for spec in sys.argv[1:]:
    name, paths = spec.split("=")
    space = dict(ns)
    for path in paths.split("+"):
        exec(open(path).read(), space)
    classes[name] = space["BlobAnalysis"]
gpu = workbook.MODE == "gpu"
sizes = [int(v) for v in os.environ.get("SIZES", "8192,2048" if gpu else "37").split(",")]
cases = [(p, c) for p in (0.1, 0.3, 0.5, 0.59, 0.9) for c in (4, 8)]


def results(a, k):
    return [k, a.labels.copy_to_host()] + [f.copy_to_host()[:k] for f in a.fields]


def same(x, y):
    return x[0] == y[0] and all(np.array_equal(u, v) for u, v in zip(x[1:], y[1:]))


for side in sizes:
    shape = (side, side) if gpu else (side, side + 6)
    objects = {name: cls(*shape) for name, cls in classes.items()}  # one per variant, reused
    rng = np.random.default_rng(1)
    for p, conn in cases + cases[::-1]:  # K goes up and down: the last run's K is a stale hint
        img = (rng.random(shape, dtype=np.float32) < p).astype(np.uint8)
        d = cuda.to_device(img.reshape(-1))
        line, ref = [f"{shape[0]}x{shape[1]} p={p} {conn}-conn"], None
        for name, a in objects.items():
            got = results(a, a.run(d, conn))
            ref = got if ref is None else ref
            text = f"{name} K={got[0]}{'' if same(got, ref) else ' DIFFERENT'}"
            if gpu:
                t_run = time_gpu(lambda: a.run(d, conn), warmup=2, repeat=10).median_ms
                cuda.synchronize()
                start = time.perf_counter()
                for _ in range(20):
                    a.run(d, conn)
                cuda.synchronize()
                wall = (time.perf_counter() - start) / 20 * 1e3
                text += f" run {t_run:.3f} wall {wall:.3f}"
                again = results(a, a.run(d, conn))
                text += "" if same(again, ref) else " DIFFERENT-AFTER-TIMING"
            line.append(text)
        print(" | ".join(line), flush=True)
