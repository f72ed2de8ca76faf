"""BlobAnalysis.run with the init + compress kernel replaced by variants (name=path): labels and
statistics checked against the lesson's (and scipy's in the simulator), label phase, init
launch and whole run timed with CUDA events."""
import sys, os
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
from workbook.bench import time_gpu

ns = example_namespace()
variants = {"lesson": ns["block_init_compress_kernel"]}
extras = {"lesson": lambda c: ()}
for spec in sys.argv[1:]:
    name, path = spec.split("=")
    space = dict(ns)
    exec(open(path).read(), space)
    variants[name] = space["block_init_compress_kernel"]
    extras[name] = space.get("INIT_EXTRA", lambda c: ())
shape = [int(v) for v in os.environ.get("SIZE", "8192").split("x")]
h, w = (shape * 2)[:2]
gpu = workbook.MODE == "gpu"
cases = [(0.1, 4), (0.1, 8), (0.3, 4), (0.3, 8), (0.5, 4), (0.5, 8), (0.59, 4), (0.59, 8),
         (0.9, 4), (0.9, 8)]
if os.environ.get("CASES"):
    cases = [c for c in cases if f"{c[0]}/{c[1]}" in os.environ["CASES"].split(",")]
analysis = ns["BlobAnalysis"](h, w)
_launch = analysis.launch
current = {"extra": lambda c: ()}
def launch(step, kernel, grid, block, *args):
    extra = current["extra"](analysis.connectivity) if step == "init" else ()
    if extra:  # the variant's own table instead of the lesson's
        args = args[:7] + extra
    _launch(step, kernel, grid, block, *args)
analysis.launch = launch
for p, conn in cases:
    rng = np.random.default_rng(1)
    img = (rng.random((h, w), dtype=np.float32) < p).astype(np.uint8)
    d = cuda.to_device(img.reshape(-1))
    line, ref = [f"p={p} {conn}-conn"], None
    for name, kernel in variants.items():
        ns["block_init_compress_kernel"] = kernel
        current["extra"] = extras[name]
        extras[name](conn)
        analysis.prepared.clear()
        count = analysis.run(d, conn)
        got = [analysis.labels.copy_to_host()] + [f.copy_to_host()[:count] for f in analysis.fields]
        if ref is None:
            ref = got
            if not gpu:
                import scipy.ndimage as ndi
                st = np.ones((3, 3)) if conn == 8 else None
                want, k = ndi.label(img, structure=st)
                assert k == count and np.array_equal(want.reshape(-1), got[0]), "lesson != scipy"
        same = len(got[0]) == len(ref[0]) and all(np.array_equal(a, b) for a, b in zip(got, ref))
        if gpu:
            t_run = time_gpu(lambda: analysis.run(d, conn), warmup=2, repeat=10).median_ms
            t_label = time_gpu(lambda: analysis.label(d, conn), warmup=2, repeat=10).median_ms
            grid = analysis.grid
            t_init = time_gpu(lambda: analysis.launch("init", kernel, grid, ns["BLOCK"], d,
                              analysis.roots, analysis.forest, analysis.links, h, w, conn, *(extras[name](conn) or (analysis.tables[conn],))),
                              warmup=2, repeat=10).median_ms
            line.append(f"{name} run {t_run:.3f} label {t_label:.3f} init {t_init:.3f}"
                        f"{'' if same else ' DIFFERENT'}")
        else:
            line.append(f"{name} {count}{'' if same else ' DIFFERENT'}")
    ns["block_init_compress_kernel"] = variants["lesson"]
    print(" | ".join(line), flush=True)
