"""The packed statistics kernel against a variant with plain stores for blobs inside one tile,
on BlobAnalysis's labels of 8192^2 images: same statistics, CUDA event times (reset included)."""
import sys, os
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
exec(open(".whl/stores_kernel.py").read(), ns)
size = int(os.environ.get("SIZE", 8192))
a = ns["BlobAnalysis"](size, size)
for p, conn in ((0.1, 4), (0.3, 4), (0.3, 8), (0.5, 8), (0.59, 4), (0.9, 4)):
    rng = np.random.default_rng(1)
    img = (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    a.label(d, conn); count = a.number(); a.write_labels()
    out, line = {}, [f"p={p} {conn}-conn {count} blobs"]
    packed = ns["blob_stats_packed_kernel"]
    for name in ("blob_stats_packed_kernel", "blob_stats_stores_kernel", "blob_stats_block_kernel"):
        k = ns[name]
        if name == "blob_stats_stores_kernel":
            ns["blob_stats_packed_kernel"] = k  # launched as the default, a block per tile
        a.statistics(count, k)
        out[name] = [x.copy_to_host()[:count] for x in a.fields]
        same = all(np.array_equal(u, v) for u, v in zip(out[name], out["blob_stats_packed_kernel"]))
        t = 0.0 if workbook.MODE == "sim" else time_gpu(lambda k=k: a.statistics(count, k), warmup=2, repeat=10).median_ms
        ns["blob_stats_packed_kernel"] = packed
        line.append(f"{name.split('_')[2]} {t:.3f}{'' if same else ' DIFFERENT'}")
    print(" | ".join(line), flush=True)
