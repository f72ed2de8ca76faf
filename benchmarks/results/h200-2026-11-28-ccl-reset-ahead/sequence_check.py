import sys  # a run of BlobAnalysis after another on one object: the variant against a fresh lesson object
sys.path[:0] = ["tests"]
import numpy as np
import workbook  # noqa
from numba import cuda
from test_ccl_exercises import example_namespace
ns = example_namespace()
Lesson = ns["BlobAnalysis"]
space = dict(ns)
exec(open(sys.argv[1]).read(), space)
Variant = space["BlobAnalysis"]
h, w = 37, 43
v = Variant(h, w)
rng = np.random.default_rng(3)
for step, (p, conn) in enumerate([(0.3, 4), (0.9, 8), (0.1, 4), (0.5, 8), (0.59, 4), (0.3, 4)]):
    img = (rng.random((h, w)) < p).astype(np.uint8).reshape(-1)
    d = cuda.to_device(img)
    ref = Lesson(h, w); kr = ref.run(d, conn)
    kv = v.run(d, conn)
    same = kr == kv and np.array_equal(ref.labels.copy_to_host(), v.labels.copy_to_host()) and all(
        np.array_equal(a.copy_to_host()[:kr], b.copy_to_host()[:kv]) for a, b in zip(ref.fields, v.fields))
    # statistics() on its own afterwards, twice
    v.statistics(kv); v.statistics(kv)
    same2 = all(np.array_equal(a.copy_to_host()[:kr], b.copy_to_host()[:kv]) for a, b in zip(ref.fields, v.fields))
    print(step, p, conn, kr, same, same2)
