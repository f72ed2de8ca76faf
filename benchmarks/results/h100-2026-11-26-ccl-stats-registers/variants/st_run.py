"""blob_stats_packed_kernel variants (name=path) against the lesson's: same statistics;
on a GPU, statistics (with the reset) and the whole run timed with CUDA events."""
import os
import sys

sys.path[:0] = ["tests"]
import numpy as np  # noqa: E402
import workbook  # noqa: E402,F401
from numba import cuda  # noqa: E402
from test_ccl_exercises import example_namespace  # noqa: E402
from workbook.bench import time_gpu  # noqa: E402

ns = example_namespace()
KERNELS = ("blob_stats_packed_kernel", "resolve_rank_kernel", "block_write_kernel",
           "block_merge_kernel", "block_init_compress_kernel")
original = {name: ns[name] for name in KERNELS + ("BlobAnalysis", "STATS_THREADS")}
variants = {"lesson": {}}
for spec in sys.argv[1:]:
    name, paths = spec.split("=")
    space = dict(ns)
    for path in paths.split("+"):
        exec(open(path).read(), space)
    variants[name] = {k: space[k] for k in KERNELS + ("BlobAnalysis", "STATS_THREADS") if space[k] is not ns[k]}
gpu = workbook.MODE == "gpu"
sizes = [int(v) for v in os.environ.get("SIZES", "8192,2048" if gpu else "37").split(",")]
cases = [(p, c) for p in (0.1, 0.3, 0.5, 0.59, 0.9) for c in (4, 8)]
if os.environ.get("CASES"):
    cases = [c for c in cases if f"{c[0]}/{c[1]}" in os.environ["CASES"].split(",")]
for side in sizes:
    for h, w in ((side, side), (side, side + 6)) if not gpu else ((side, side),):
        for p, conn in cases:
            rng = np.random.default_rng(1)
            img = (rng.random((h, w), dtype=np.float32) < p).astype(np.uint8)
            d = cuda.to_device(img.reshape(-1))
            line, ref = [f"{h}x{w} p={p} {conn}-conn"], None
            for name, kernel in variants.items():
                ns.update(original)
                ns.update(kernel)
                a = ns["BlobAnalysis"](h, w)
                k = a.run(d, conn)
                got = [a.labels.copy_to_host()] + [f.copy_to_host()[:k] for f in a.fields]
                ref = got if ref is None else ref
                same = all(np.array_equal(x, y) for x, y in zip(got, ref))
                text = f"{name}{'' if same else ' DIFFERENT'}"
                if gpu:
                    t_stats = time_gpu(lambda: a.statistics(k), warmup=2, repeat=10).median_ms
                    t_run = time_gpu(lambda: a.run(d, conn), warmup=2, repeat=10).median_ms
                    t_label = time_gpu(lambda: a.label(d, conn), warmup=2, repeat=10).median_ms
                    text += f" stats {t_stats:.3f} label {t_label:.3f} run {t_run:.3f}"
                line.append(text)
            ns.update(original)
            print(" | ".join(line), flush=True)
