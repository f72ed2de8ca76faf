"""A bool predicate for cuda.syncthreads_or/_and/_count fails in the simulator as it fails
to compile on a GPU (workbook/sim/barrier_predicates.py); an integer one works in both."""

import numpy as np
import pytest

pytestmark = pytest.mark.sim_only

KERNEL = """
@cuda.jit
def kernel(values, out):
    i = cuda.threadIdx.x
    out[i] = cuda.{barrier}({predicate})
"""


def run(barrier: str, predicate: str) -> np.ndarray:
    from numba import cuda

    from grader.runner import exec_cell

    namespace = {"cuda": cuda}
    exec_cell({"index": abs(hash((barrier, predicate))),
               "source": KERNEL.format(barrier=barrier, predicate=predicate)}, namespace)
    values = np.array([0, 3, 0, 5], np.int32)
    out = np.zeros(4, np.int64)
    namespace["kernel"][1, 4](values, out)
    return out


@pytest.mark.parametrize("barrier", ["syncthreads_or", "syncthreads_and", "syncthreads_count"])
def test_a_bool_predicate_is_an_error_that_names_the_fix(barrier):
    from workbook.sim.barrier_predicates import BarrierPredicateError

    with pytest.raises(BarrierPredicateError, match=r"1 if condition else 0"):
        run(barrier, "values[i] > 0")


@pytest.mark.parametrize("barrier, want", [("syncthreads_or", 1), ("syncthreads_and", 0),
                                           ("syncthreads_count", 2)])
def test_an_integer_predicate_gives_the_barriers_result(barrier, want):
    np.testing.assert_array_equal(run(barrier, "1 if values[i] > 0 else 0"), [want] * 4)
