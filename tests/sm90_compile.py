"""Compile kernels for sm_90 with numba-cuda's real compiler, on a machine without a GPU
(NVVM comes with the numba-cuda[cu13] wheels).

    python tests/sm90_compile.py LESSON NAME=SIGNATURE ...   # kernels of a solution notebook
    python tests/sm90_compile.py variants                    # the metric rules' variants

The simulator runs kernels as Python, so it accepts code that the GPU compiler rejects (a
local array whose size is not a constant of the kernel, types of atomics, unsupported
calls); this finds it before a GPU run does. ``variants`` compiles the kernels that
``benchmarks/metric_rules.py`` profiles, for the solution and for every correct and slow
variant. Runs in its own process: numba chooses the simulator or the compiler once per
process (the compiler comes from :mod:`grader.gpu_compile.target`, which the grader's
compile step uses too). Prints a line per kernel; exit code 1 if one does not compile.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from grader.gpu_compile import target  # noqa: E402  (imports no numba)


def compile_kernel(label: str, kernel, signature: str) -> bool:
    try:
        ptx = target.compile_kernel(kernel.py_func, signature)
    except Exception as exc:  # the compiler's error is the finding
        print(f"FAIL {label}: {type(exc).__name__}: {str(exc)[:600]}", flush=True)
        return False
    atomics, shared = ptx.count("atom."), ptx.count("atom.shared")
    print(f"ok {label}: {len(ptx.splitlines())} lines of PTX, {ptx.count('bar.sync')} "
          f"barriers, {shared} shared-memory and {atomics - shared} other atomics", flush=True)
    return True


def solution_kernels(lesson: str, kernels: list[str]) -> bool:
    from solution_cells import solution_notebook

    from grader.runner import exec_cell

    namespace = {"__name__": "__main__"}
    for cell in solution_notebook(lesson).definitions():
        exec_cell({"index": cell.index, "source": cell.source}, namespace)
    results = []
    for spec in kernels:
        name, signature = spec.split("=", 1)
        results.append(compile_kernel(name, namespace[name], signature))
    return all(results)


F32 = "float32[::1]"
ONE_BLOCK = f"void({F32}, {F32})"
GRID = f"void({F32}, {F32}, int64)"
ROWS = "void(float32[:, ::1], float32[:, ::1])"
NORM = (f"void(float32[:, ::1], {F32}, {F32}, boolean, float32, float32[:, ::1], {F32}, "
        f"{F32})")
STATS = "void(int32[::1], int64, int64, " + ", ".join(["int32[::1]"] * 5 + ["int64[::1]"] * 2) + ")"
GEMM = "void(uint16[:, ::1], uint16[:, ::1], float32[:, ::1])"


def _softmax_warp(ns):
    import numpy as np

    from grader.exercises.softmax import WARP_PROFILE, warp_config

    per_thread, width, rows = warp_config(WARP_PROFILE[1], 4)
    return ns["make_warp_softmax"](np.dtype(np.float32), 4, per_thread, width, rows, False)


def _softmax_block(factory):
    import numpy as np

    return lambda ns: ns[factory](np.dtype(np.float32), 4, False)


# exercise id -> (the kernel it profiles, made from the cells' namespace; its signature)
PROFILED = {
    "ldmatrix.gemm": (lambda ns: ns["gemm_kernel"], GEMM),
    "reduction.convergent": (lambda ns: ns["convergent_sum_kernel"], ONE_BLOCK),
    "reduction.shared": (lambda ns: ns["shared_sum_kernel"], ONE_BLOCK),
    "reduction.segmented": (lambda ns: ns["segmented_sum_kernel"], GRID),
    "reduction.coarsened": (lambda ns: ns["coarsened_sum_kernel"], GRID),
    "reduction.shuffle": (lambda ns: ns["shuffle_sum_kernel"], GRID),
    "softmax.warp": (_softmax_warp, ROWS),
    "softmax.block_smem": (_softmax_block("make_block_smem_softmax"), ROWS),
    "softmax.block_uncached": (_softmax_block("make_block_uncached_softmax"), ROWS),
    "layernorm.warp": (lambda ns: ns["make_warp_layernorm"](32, 32, 1), NORM),
    "layernorm.block_smem": (lambda ns: ns["layernorm_block_smem_kernel"], NORM),
    "layernorm.block_uncached": (lambda ns: ns["layernorm_block_uncached_kernel"], NORM),
    "ccl.stats_block": (lambda ns: ns["blob_stats_block_kernel"], STATS),
    # profiled: exercise 5's compress on this kernel's forest; the variants change this kernel
    "ccl.block_init": (lambda ns: ns["block_init_kernel"],
                       "void(uint8[::1], int32[::1], uint8[::1], int64, int64, int64)"),
    "ccl.union_find": (lambda ns: ns["uf_merge_kernel"],
                       "void(uint8[::1], int32[::1], int32[::1], int64, int64, int64)"),
    "ccl.scan": (lambda ns: ns["block_scan_kernel"],
                 "void(int32[::1], int32[::1], int32[::1], int64)"),
    "ccl.compaction": (lambda ns: ns["relabel_kernel"],
                       "void(int32[::1], int32[::1], int32[::1], int64)"),
}


def variant_kernels() -> bool:
    from solution_cells import namespace_with, namespace_with_variant

    from grader.exercises import correct_variants, get, slow_variant

    ok = True
    for exercise_id, (make, signature) in PROFILED.items():
        lesson = get(exercise_id).lesson
        slow = slow_variant(exercise_id)
        if slow is None:
            raise KeyError(f"{exercise_id} is profiled but declares no slow variant")
        variants = [("solution", None), ("slow", slow),
                    *(("correct", v) for v in correct_variants(exercise_id))]
        for group, variant in variants:
            ns = (namespace_with(lesson, exercise_id) if variant is None
                  else namespace_with_variant(lesson, variant))
            label = f"{exercise_id} {group}" + (f" ({variant.description})" if variant else "")
            ok &= compile_kernel(label, make(ns), signature)
    return ok


if __name__ == "__main__":
    target.use_real_compiler()
    done = (variant_kernels() if sys.argv[1:] == ["variants"]
            else solution_kernels(sys.argv[1], sys.argv[2:]))
    sys.exit(0 if done else 1)
