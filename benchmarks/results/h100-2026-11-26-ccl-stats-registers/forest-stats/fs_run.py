"""ForestStats (fs_var.py) against the lesson's BlobAnalysis: same labels and statistics;
on a GPU, run / label / write timed with CUDA events, cupyx label beside."""
import os
import sys

sys.path[:0] = ["tests"]
import numpy as np  # noqa: E402
import workbook  # noqa: E402,F401
from numba import cuda  # noqa: E402
from test_ccl_exercises import example_namespace  # noqa: E402
from workbook.bench import time_gpu  # noqa: E402

ns = example_namespace()
space = dict(ns)
exec(open(sys.argv[1] if len(sys.argv) > 1 else ".whl/fs_var.py").read(), space)
gpu = workbook.MODE == "gpu"
sizes = [int(v) for v in os.environ.get("SIZES", "8192,2048" if gpu else "37").split(",")]
cases = [(p, c) for p in (0.1, 0.3, 0.5, 0.59, 0.9) for c in (4, 8)]
if os.environ.get("CASES"):
    cases = [c for c in cases if f"{c[0]}/{c[1]}" in os.environ["CASES"].split(",")]
try:
    import cupy
    from cupyx.scipy import ndimage as cndi
except ImportError:
    cupy = None
for side in sizes:
    h, w = side, side + (0 if gpu else 6)
    lesson = ns["BlobAnalysis"](h, w)
    new = space["ForestStats"](h, w)
    for p, conn in cases:
        rng = np.random.default_rng(1)
        img = (rng.random((h, w), dtype=np.float32) < p).astype(np.uint8)
        d = cuda.to_device(img.reshape(-1))
        k1 = lesson.run(d, conn)
        want = [lesson.labels.copy_to_host()] + [f.copy_to_host()[:k1] for f in lesson.fields]
        for _ in range(3):  # a first run may grow the statistics arrays
            k2 = new.run(d, conn)
        got = [new.labels.copy_to_host()] + [f.copy_to_host()[:k2] for f in new.fields]
        same = k1 == k2 and all(np.array_equal(a, b) for a, b in zip(want, got))
        line = f"{side} p={p} {conn}-conn K={k1} {'same' if same else 'DIFFERENT'}"
        if not same:
            names = ["labels"] + list(ns["STAT_FIELDS"])
            bad = [n for n, a, b in zip(names, want, got) if a.shape != b.shape or not np.array_equal(a, b)]
            line += f" {bad}"
        if gpu:
            t_old = time_gpu(lambda: lesson.run(d, conn), warmup=2, repeat=10).median_ms
            t_new = time_gpu(lambda: new.run(d, conn), warmup=2, repeat=10).median_ms
            t_label_old = time_gpu(lambda: lesson.label(d, conn), warmup=2, repeat=10).median_ms
            t_label_new = time_gpu(lambda: new.label(d, conn), warmup=2, repeat=10).median_ms
            line += (f" | run {t_old:.3f} -> {t_new:.3f} | label {t_label_old:.3f} -> "
                     f"{t_label_new:.3f}")
            for name, a in (("old", lesson), ("new", new)):
                launches = a.label_launches(d, conn)
                prefix = [time_gpu(lambda m=m: [f() for f in launches[:m]], warmup=2,
                                   repeat=10).median_ms for m in (1, 2, 3)]
                line += f" | {name} init {prefix[0]:.3f} merge {prefix[1] - prefix[0]:.3f} resolve {prefix[2] - prefix[1]:.3f}"
            t_w_old = time_gpu(lambda: lesson.write(k1), warmup=2, repeat=10).median_ms
            t_w_new = time_gpu(new.write_labels, warmup=2, repeat=10).median_ms
            line += f" | write+stats {t_w_old:.3f} -> {t_w_new:.3f}"
            if cupy is not None:
                ci = cupy.asarray(img)
                st = cupy.ones((3, 3), dtype=bool) if conn == 8 else None
                t_c = time_gpu(lambda: cndi.label(ci, structure=st), warmup=2,
                               repeat=10).median_ms
                line += f" | cupyx {t_c:.3f}: x{t_c / t_old:.2f} -> x{t_c / t_new:.2f}"
        print(line, flush=True)
