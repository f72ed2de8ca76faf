"""Compile the variant's kernels for sm_90 with numba-cuda's compiler, without a GPU (as
tests/sm90_compile.py does): python <this> <variant file>, from the repository's root."""
import sys
from pathlib import Path

ROOT = Path.cwd()
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from grader.gpu_compile import target  # noqa: E402

target.use_real_compiler()
from grader.runner import exec_cell  # noqa: E402
from sm90_compile import STATS, compile_kernel  # noqa: E402
from solution_cells import solution_notebook  # noqa: E402

ns = {"__name__": "__main__"}
for cell in solution_notebook("05_ccl").definitions():
    exec_cell({"index": cell.index, "source": cell.source}, ns)
exec(open(sys.argv[1]).read(), ns)
ok = [compile_kernel(f"{pixels} pixels per thread", kernel, STATS)
      for pixels, kernel in ns["DOMINANT"].items()]
sys.exit(0 if all(ok) else 1)
