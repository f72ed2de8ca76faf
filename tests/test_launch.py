"""workbook.launch: a prepared launch computes what the ordinary launch computes."""

import weakref

import numpy as np
import pytest
from numba import cuda

import workbook  # noqa: F401  (selects the mode)
from workbook.launch import prepare


@cuda.jit
def axpy_rows(x, y, alpha, out, flag):
    row, col = cuda.grid(2)
    if row < x.shape[0] and col < x.shape[1]:
        value = alpha * x[row, col] + y[col]
        out[row, col] = -value if flag else value


def _arrays(rng, rows, cols, dtype=np.float32):
    x = rng.standard_normal((rows, cols)).astype(dtype)
    y = rng.standard_normal(cols).astype(dtype)
    return x, y


# a GPU fuses a * x + y into one FMA (one rounding instead of two): where the terms nearly
# cancel, the float32 results differ by a few units in the last place of the terms
FMA_ATOL = 1e-6


def _expected(x, y, alpha, flag):
    value = alpha * x + y[None, :]
    return -value if flag else value


def test_prepared_launch_matches_numpy_for_new_arrays_of_the_same_kind(rng):
    x, y = _arrays(rng, 13, 29)
    out = cuda.device_array(x.shape, np.float32)
    args = (cuda.to_device(x), cuda.to_device(y), np.float32(1.5), out, False)
    launch = prepare(axpy_rows, (4, 8), (4, 4), 0, args)
    launch(*args)
    np.testing.assert_allclose(out.copy_to_host(), _expected(x, y, 1.5, False),
                               rtol=1e-6, atol=FMA_ATOL)
    # other arrays, other values: only pointers, shapes and scalars change
    x2, y2 = _arrays(rng, 13, 29)
    out2 = cuda.device_array(x2.shape, np.float32)
    launch(cuda.to_device(x2), cuda.to_device(y2), np.float32(-2.0), out2, True)
    np.testing.assert_allclose(out2.copy_to_host(), _expected(x2, y2, -2.0, True),
                               rtol=1e-6, atol=FMA_ATOL)


def test_arguments_of_another_kind_take_the_ordinary_path(rng):
    x, y = _arrays(rng, 5, 7)
    out = cuda.device_array(x.shape, np.float32)
    launch = prepare(axpy_rows, (2, 2), (4, 4), 0,
                     (cuda.to_device(x), cuda.to_device(y), np.float32(1.0), out, False))
    # host arrays, and float64: numba's own launch (copying, compiling another overload)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    out64 = cuda.device_array(x.shape, np.float64)
    launch(x64, y64, 2.0, out64, False)
    np.testing.assert_allclose(out64.copy_to_host(), _expected(x64, y64, 2.0, False))


@pytest.mark.gpu
def test_fast_path_is_taken_on_a_gpu(rng):
    x, y = _arrays(rng, 3, 3)
    args = (cuda.to_device(x), cuda.to_device(y), np.float32(1.0),
            cuda.device_array(x.shape, np.float32), False)
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    assert launch.fast is not None, launch.why_not_fast
    assert launch.fast.accepts(args)
    assert not launch.fast.accepts((x,) + args[1:])  # a host array
    launch(*args)
    assert launch.fast.same_as_last(args)
    # the same arrays with new contents: the reused arguments still point at them
    x2, _ = _arrays(rng, 3, 3)
    args[0].copy_to_device(x2)
    launch(*args)
    np.testing.assert_allclose(args[3].copy_to_host(), _expected(x2, y, 1.0, False),
                               rtol=1e-6, atol=FMA_ATOL)


@pytest.mark.gpu
def test_a_prepared_launch_does_not_keep_its_last_arrays_alive(rng):
    x, y = _arrays(rng, 3, 3)
    args = [cuda.to_device(x), cuda.to_device(y), np.float32(1.0),
            cuda.device_array(x.shape, np.float32), False]
    launch = prepare(axpy_rows, 1, (4, 4), 0, tuple(args))
    launch(*args)
    gone = weakref.ref(args[3])
    args[3] = cuda.device_array(x.shape, np.float32)
    assert gone() is None
    assert not launch.fast.same_as_last(tuple(args))
    launch(*args)  # the new output array is written, not the freed one
    np.testing.assert_allclose(args[3].copy_to_host(), _expected(x, y, 1.0, False),
                               rtol=1e-6, atol=FMA_ATOL)
    args[2] = np.float32(2.0)  # a scalar of equal type and value counts as the same
    assert not launch.fast.same_as_last(tuple(args))
    launch(*args)
    assert launch.fast.same_as_last((*args[:2], np.float32(2.0), *args[3:]))


@pytest.mark.sim_only
def test_simulator_calls_the_kernel():
    launch = prepare(axpy_rows, 1, (4, 4))
    assert launch.fast is None and launch.why_not_fast == "simulator mode"
