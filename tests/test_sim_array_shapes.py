"""Array shapes the GPU compiler rejects are rejected by the simulator too
(workbook/sim/array_shapes.py): numba-cuda compiles a local or shared array only with a
constant shape, so ``cuda.local.array(R * N, float32)`` runs in the plain simulator and
fails to compile on a GPU (tests/sm90_compile.py shows both sides)."""

import numpy as np
import pytest
from solution_cells import namespace_with

import workbook
from grader.exercise import check_exercise
from grader.exercises import get

pytestmark = pytest.mark.sim_only

R, N = 2, 4
SIZE = R * N
SHAPE = (R, N)

KERNEL = """
@cuda.jit
def kernel(out):
    a = {call}
    out[0] = 1
"""

REJECTED = {
    "product": "cuda.local.array(R * N, float32)",
    "floor division": "cuda.local.array(N // 2, float32)",
    "negation": "cuda.local.array(-(-N), float32)",
    "call": "cuda.local.array(int(N), float32)",
    "length": "cuda.local.array(len(SHAPE), float32)",
    "one extent of a tuple": "cuda.local.array((R, N // 2), float32)",
    "keyword": "cuda.local.array(shape=R * N, dtype=float32)",
    "over lines": "cuda.local.array(\n        R * N,\n        float32)",
    "shared": "cuda.shared.array(R * N, float32)",
}

ACCEPTED = {  # forms that numba-cuda 0.30.4 compiles for sm_90
    "global": "cuda.local.array(SIZE, float32)",
    "literal arithmetic": "cuda.local.array(2 * 4, float32)",
    "tuple of globals": "cuda.local.array((R, N), float32)",
    "global tuple": "cuda.local.array(SHAPE, float32)",
    "element of a global tuple": "cuda.local.array(SHAPE[1], float32)",
    "keyword": "cuda.local.array(shape=SIZE, dtype=float32)",
    "shared": "cuda.shared.array(SIZE, float32)",
    "dynamic shared": "cuda.shared.array(0, float32)",
}


def run(call: str):
    from numba import cuda, float32

    from grader.runner import exec_cell

    namespace = {"cuda": cuda, "float32": float32, "R": R, "N": N, "SIZE": SIZE,
                 "SHAPE": SHAPE}
    # as the grader and Jupyter run a cell: its source is where tracebacks find it
    exec_cell({"index": abs(hash(call)), "source": KERNEL.format(call=call)}, namespace)
    out = np.zeros(1, np.float32)
    namespace["kernel"][1, 1](out)
    return out


@pytest.mark.parametrize("call", REJECTED.values(), ids=REJECTED.keys())
def test_shapes_the_gpu_compiler_rejects_are_errors(call):
    from workbook.sim.array_shapes import ArrayShapeError

    with pytest.raises(ArrayShapeError, match="must be a constant of the kernel") as error:
        run(call)
    assert "Compute it outside the kernel" in str(error.value)


@pytest.mark.parametrize("call", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_constant_shapes_run(call):
    assert run(call)[0] == 1


def test_grader_names_the_cause():
    """A softmax warp kernel whose register buffer is sized inside the kernel."""
    assert workbook.MODE == "sim"
    ns = namespace_with("03_softmax", "softmax.warp", "buf = cuda.local.array(BUF, float32)",
                        "buf = cuda.local.array(R * CPT, float32)")
    result = check_exercise(get("softmax.warp"), ns, "sim", seed=1)
    assert not result.passed
    assert "`R * CPT`" in result.summary() and "constant of the kernel" in result.summary()
