"""One BlobAnalysis.run per image at 8192^2 (after a warm-up run on another image), for ncu
to profile the init + compress and the packed statistics: p = 0.1 and 0.3 4-conn (many
blobs), 0.59 4-conn (near the threshold), 0.9 8-conn (one blob)."""
import os
import sys

sys.path[:0] = ["tests"]
import numpy as np  # noqa: E402
import workbook  # noqa: E402,F401
from numba import cuda  # noqa: E402
from test_ccl_exercises import example_namespace  # noqa: E402

ns = example_namespace()
profile_start = getattr(cuda, "profile_start", lambda: None)  # none in the simulator
profile_stop = getattr(cuda, "profile_stop", lambda: None)
size = int(os.environ.get("SIZE", "8192"))  # the simulator: SIZE=40
analysis = ns["BlobAnalysis"](size, size)
rng = np.random.default_rng(1)
warm = (rng.random((size, size), dtype=np.float32) < 0.5).astype(np.uint8)
profile_stop()  # the warm-up compiles every kernel outside the profiled range
for conn in (4, 8):
    analysis.run(cuda.to_device(warm.reshape(-1)), conn)
cuda.synchronize()
for p, conn in ((0.1, 4), (0.3, 4), (0.59, 4), (0.9, 8)):
    img = (rng.random((size, size), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    cuda.synchronize()
    profile_start()
    k = analysis.run(d, conn)
    cuda.synchronize()
    profile_stop()
    kernel = ns["packed_stats_for"](k, size * size)
    threads = ns["PACKED_STATS_THREADS"][kernel]
    print(f"p={p} {conn}-conn: {k} blobs, statistics in thread blocks of {threads}", flush=True)
