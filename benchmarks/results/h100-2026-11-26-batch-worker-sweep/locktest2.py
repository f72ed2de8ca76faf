import os
import sys
import time
end = sys.argv[1]
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402


@cuda.jit
def k(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


a = cuda.to_device(np.zeros(1 << 24, np.float32))
k[16384, 1024](a)
cuda.synchronize()
t = time.time()
cuda.profile_start()
for _ in range(6):
    k[16384, 1024](a)
cuda.synchronize()
cuda.profile_stop()
t2 = time.time()
print(f"{end} range {t:.2f}-{t2:.2f}", flush=True)
if end == "exit_":
    os._exit(0)
if end == "close_exit_":
    cuda.close()
    os._exit(0)
