import sys
import time
mode = sys.argv[1]
t0 = time.time()
if mode == "before":
    time.sleep(2)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402


@cuda.jit
def k(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


a = cuda.to_device(np.zeros(1 << 20, np.float32))
k[1024, 1024](a)
cuda.synchronize()
if mode == "after_ctx":
    time.sleep(2)
cuda.profile_start()
k[1024, 1024](a)
cuda.synchronize()
if mode == "inside":
    time.sleep(2)
cuda.profile_stop()
if mode == "end":
    time.sleep(2)
print(f"{mode} start {t0:.2f} end {time.time():.2f}", flush=True)
