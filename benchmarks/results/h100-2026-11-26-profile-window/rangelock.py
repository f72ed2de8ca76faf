import sys, time
from numba import cuda
@cuda.jit
def probe_kernel(x):
    x[0] += 1
x = cuda.device_array(1); probe_kernel[1, 1](x); cuda.synchronize()
mode = sys.argv[1]
t = time.time()
for i in range(3):
    if mode == "inside":
        cuda.profile_start(); time.sleep(0.5); probe_kernel[1, 1](x); cuda.synchronize(); cuda.profile_stop()
    else:
        time.sleep(0.5); cuda.profile_start(); probe_kernel[1, 1](x); cuda.synchronize(); cuda.profile_stop()
print(mode, "loop", round(time.time() - t, 2), flush=True)
