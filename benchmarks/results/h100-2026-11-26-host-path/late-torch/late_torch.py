"""A notebook's order: the pool made first (the lesson's use_pool()), PyTorch imported later."""
import os, sys, time
sys.path.insert(0, os.getcwd())
import numpy as np
import workbook  # noqa
from grader.runner import definitions_namespace
ns = definitions_namespace("solutions/03_softmax/softmax.ipynb")  # use_pool() runs here
assert "torch" not in sys.modules
import torch
from numba import cuda
from workbook.memory import pool_stats
softmax, softmax_gpu = ns["softmax"], ns["softmax_gpu"]
for cols in (16384, 32768):
    xs = [cuda.as_cuda_array(torch.randn(49152, cols, device="cuda")) for _ in range(2)]
    y = cuda.as_cuda_array(torch.empty(49152, cols, device="cuda"))
    def per_call(fn, n=20):
        for k in range(4): fn(xs[k % 2])
        torch.cuda.synchronize(); t = time.perf_counter()
        for k in range(n): fn(xs[k % 2])
        torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e6
    a = per_call(lambda x: softmax(x)); b = per_call(lambda x: softmax_gpu(x, y))
    print(f"f32 {cols}: softmax(x) {a:.0f} us, softmax_gpu(x, y) {b:.0f} us, pool {pool_stats()}", flush=True)
    del xs, y
