"""workbook.atomics.load_relaxed: an atomic read in both modes (PTX ld.relaxed.gpu on a GPU)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import workbook  # first: chooses the mode before numba.cuda is imported

# isort: split
from numba import cuda

from workbook.atomics import load_relaxed

ROOT = Path(__file__).resolve().parents[1]


def test_reads_the_element():
    @cuda.jit
    def copy(values, out):
        i = cuda.grid(1)
        if i < values.size:
            out[i] = load_relaxed(values, i)

    values = np.arange(5, 45, 3, dtype=np.int32)
    out = cuda.device_array_like(values)
    copy[1, 32](cuda.to_device(values), out)
    np.testing.assert_array_equal(out.copy_to_host(), values)


@pytest.mark.skipif(workbook.MODE != "sim", reason="the workbook's race checks run in the "
                    "simulator")
def test_the_simulator_counts_it_as_atomic():
    """Thread 1 links an entry with atomic.min while thread 0 reads it: no race, unlike a
    plain read of the same element."""
    @cuda.jit
    def relaxed(forest, seen):
        if cuda.threadIdx.x == 1:
            cuda.atomic.min(forest, 0, 0)
        else:
            seen[0] = load_relaxed(forest, 0)

    @cuda.jit
    def plain(forest, seen):
        if cuda.threadIdx.x == 1:
            cuda.atomic.min(forest, 0, 0)
        else:
            seen[0] = forest[0]

    forest = cuda.to_device(np.array([7], np.int32))
    seen = cuda.device_array(1, np.int32)
    relaxed[1, 2](forest, seen)
    assert seen.copy_to_host()[0] in (0, 7)
    with pytest.raises(Exception, match="(?i)race"):
        plain[1, 2](cuda.to_device(np.array([7], np.int32)), seen)


@pytest.mark.slow
def test_compiles_to_one_relaxed_load_for_sm90():
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from grader.gpu_compile import target  # the GPU compiler, without a GPU
        target.use_real_compiler()
        from numba import cuda
        from workbook.atomics import load_relaxed

        def find(forest, out):
            i = cuda.grid(1)
            if i < forest.size:
                out[i] = load_relaxed(forest, i)

        print(target.compile_kernel(find, "void(int32[::1], int32[::1])"))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("ld.relaxed.gpu.global.b32") == 1, done.stdout[-2000:]
    assert "atom." not in done.stdout
