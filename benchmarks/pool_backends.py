"""What an output array costs from each pool backend, beside PyTorch (GPU).

    python benchmarks/pool_backends.py OUT.json

Per backend of ``workbook.memory.use_pool`` ("driver": the workbook's own free lists over
cuMemAlloc; "torch": PyTorch's caching allocator) and for numba's own allocator: the
microseconds of ``workbook.memory.empty(shape)`` plus the array's release, in a Python
loop, for the output shapes of the lessons' short and long rows; ``torch.empty`` of the same
sizes is timed in the same process. Then PyTorch's and the pool's free memory after an
alternation of large allocations (60 % of the GPU each).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402  (loaded first: the "auto" backend looks for it)

import workbook  # noqa: E402, F401
from workbook import memory  # noqa: E402
from workbook.bench import device_name  # noqa: E402

SHAPES = ((49152, 32), (49152, 128), (49152, 2048), (4096, 32768))
CALLS = 2000


def per_call_us(fn, calls: int = CALLS) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def fresh_pool(backend: str | None):
    from numba import cuda

    memory.use_pool(enabled=False)
    memory._pool_managers.pop(id(cuda.current_context()), None)
    if backend is not None:
        memory.use_pool(backend=backend)


def main(out: Path) -> None:
    from numba import cuda

    cuda.current_context()
    rows = []
    for backend in ("driver", "torch", None):
        fresh_pool(backend)
        for shape in SHAPES:
            us = per_call_us(lambda shape=shape: memory.empty(shape, "float32"),
                             calls=CALLS if shape[1] <= 2048 else 200)
            torch_us = per_call_us(lambda shape=shape: torch.empty(shape, device="cuda"))
            rows.append({"backend": backend or "numba (no pool)", "shape": list(shape),
                         "empty_us": round(us, 2), "torch_empty_us": round(torch_us, 2)})
            print(rows[-1], flush=True)
    total = cuda.current_context().get_memory_info().total
    alternation = {}
    for backend in ("driver", "torch"):
        fresh_pool(backend)
        nbytes = int(total * 0.6) // 4
        for _ in range(3):
            t = torch.empty(nbytes, dtype=torch.float32, device="cuda")
            del t
            a = memory.empty(nbytes, "float32")
            del a
        stats = memory.pool_stats()
        alternation[backend] = {"pool_free_bytes": stats.free_bytes,
                                "pool_held_bytes": stats.held_bytes,
                                "torch_reserved_bytes": torch.cuda.memory_reserved(),
                                "gpu_free_bytes": cuda.current_context().get_memory_info().free}
        print(backend, alternation[backend], flush=True)
        torch.cuda.empty_cache()
    fresh_pool(None)
    out.write_text(json.dumps({"device": device_name(), "date": time.strftime("%Y-%m-%d"),
                               "torch": torch.__version__, "rows": rows,
                               "alternation_60pct": alternation}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
