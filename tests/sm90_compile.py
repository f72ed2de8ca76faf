"""Compile kernels of a solution notebook for sm_90 with numba-cuda's real compiler, on a
machine without a GPU (NVVM comes with the numba-cuda[cu13] wheels).

    python tests/sm90_compile.py LESSON NAME=SIGNATURE ...

The simulator runs kernels as Python, so it accepts code that the GPU compiler rejects
(types, unsupported calls); this catches that before a GPU does. Run in its own process:
numba chooses the simulator or the compiler once per process. Prints a line per kernel.
"""

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CC = (9, 0)


def gpu_mode_without_a_gpu():
    """Import the workbook in gpu mode although the driver reports no GPU."""
    os.environ["WORKBOOK_MODE"] = "gpu"
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    spec = importlib.util.spec_from_file_location("workbook.mode", ROOT / "workbook/mode.py")
    mode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mode)
    mode.gpu_count = lambda: 1
    sys.modules["workbook.mode"] = mode
    import workbook

    assert workbook.MODE == "gpu"
    from numba.cuda import dispatcher

    class Device:  # device functions compile for the current device's cc: this one
        compute_capability = CC

    dispatcher.get_current_device = Device


def main(lesson: str, kernels: list[str]) -> int:
    gpu_mode_without_a_gpu()
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from numba import cuda
    from solution_cells import solution_notebook

    from grader.runner import exec_cell

    namespace = {"__name__": "__main__"}
    for cell in solution_notebook(lesson).definitions():
        exec_cell({"index": cell.index, "source": cell.source}, namespace)
    for spec in kernels:
        name, signature = spec.split("=", 1)
        ptx, _ = cuda.compile_ptx(namespace[name].py_func, signature, cc=CC)
        atomics = ptx.count("atom.")
        shared = ptx.count("atom.shared")
        print(f"{name}: {len(ptx.splitlines())} lines of PTX, {ptx.count('bar.sync')} "
              f"barriers, {shared} shared-memory and {atomics - shared} other atomics",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
