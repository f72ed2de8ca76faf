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


# --- the fast path's packing, without a GPU ----------------------------------------------------
# A stand-in driver receives what cuLaunchKernel would: the kernel's parameters as an array of
# pointers to their values. The expected layout of an array parameter is numba's own data
# model for arrays (numba.core.datamodel), flattened: one 8-byte value per member, shape and
# strides one per dimension.

class DeviceArrayStandIn:
    """What the fast path reads of a device array (cuda.devicearray.DeviceNDArray)."""

    def __init__(self, pointer, shape, dtype=np.float32, c_contiguous=True):
        import ctypes

        self.device_ctypes_pointer = ctypes.c_void_p(pointer)
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.ndim = len(shape)
        self.size = int(np.prod(shape))
        strides, step = [], self.dtype.itemsize
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        self.strides = tuple(reversed(strides)) if c_contiguous else tuple(strides)
        self.flags = {"C_CONTIGUOUS": c_contiguous, "F_CONTIGUOUS": not c_contiguous}


def _array_members(ndim: int) -> list[str]:
    """The flattened members of numba's array data model, one per 8-byte parameter."""
    from numba import types
    from numba.core.datamodel import default_manager

    model = default_manager.lookup(types.Array(types.float32, ndim, "C"))
    names = []
    for name in model._fields:
        names += [f"{name}[{k}]" for k in range(ndim)] if name in ("shape", "strides") else [name]
    return names


@pytest.fixture
def driver_stand_in(monkeypatch):
    """The fast path built as on a GPU, with axpy_rows's compiled signature and a stand-in for
    cuLaunchKernel that decodes each parameter; returns the list of decoded launches."""
    import ctypes
    from types import SimpleNamespace

    from numba import types

    import workbook.launch as launch_module

    array2, array1 = types.Array(types.float32, 2, "C"), types.Array(types.float32, 1, "C")
    signature = [array2, array1, types.float32, array2, types.boolean]
    kinds = [ctypes.c_int64] * 9 + [ctypes.c_int64] * 7 + [ctypes.c_float] + \
        [ctypes.c_int64] * 9 + [ctypes.c_bool]
    cufunc = SimpleNamespace(handle=0xC0DE)
    overload = SimpleNamespace(argument_types=signature,
                               _codelibrary=SimpleNamespace(get_cufunc=lambda: cufunc))
    launches = []

    def cu_launch_kernel(handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * len(kinds)).from_address(params)
        values = [kind.from_address(pointers[k]).value for k, kind in enumerate(kinds)]
        launches.append({"handle": int(handle), "grid": (gx, gy, gz), "block": (bx, by, bz),
                         "shared": shared, "stream": stream, "params": values})
        return (0,)  # as cuda.bindings: a tuple of the CUresult

    monkeypatch.setattr(launch_module, "current_mode", lambda: "gpu")
    monkeypatch.setattr("workbook.occupancy.compiled", lambda kernel, args: overload)
    monkeypatch.setattr(launch_module, "_driver_launch_function", lambda: cu_launch_kernel)
    return launches


def _axpy_args(x_pointer=0x10000, rows=3, cols=5, alpha=1.5, flag=False):
    return (DeviceArrayStandIn(x_pointer, (rows, cols)), DeviceArrayStandIn(0x20000, (cols,)),
            np.float32(alpha), DeviceArrayStandIn(0x30000, (rows, cols)), flag)


def test_array_parameters_follow_numba_s_array_model():
    assert _array_members(2) == ["meminfo", "parent", "nitems", "itemsize", "data",
                                 "shape[0]", "shape[1]", "strides[0]", "strides[1]"]


def test_fast_path_hands_the_driver_numba_s_parameter_layout(driver_stand_in):
    args = _axpy_args()
    launch = prepare(axpy_rows, (4, 8), (4, 4), 128, args)
    assert launch.fast is not None, launch.why_not_fast
    launch(*args)
    (call,) = driver_stand_in
    assert (call["handle"], call["grid"], call["block"], call["shared"]) == \
        (0xC0DE, (4, 8, 1), (4, 4, 1), 128)
    # the default stream, as numba's own launch, already in the bindings' type
    assert type(call["stream"]).__name__ == "CUstream" and int(call["stream"]) == 0
    x = dict(zip(_array_members(2), call["params"][:9]))
    assert x == {"meminfo": 0, "parent": 0, "nitems": 15, "itemsize": 4, "data": 0x10000,
                 "shape[0]": 3, "shape[1]": 5, "strides[0]": 20, "strides[1]": 4}
    y = dict(zip(_array_members(1), call["params"][9:16]))
    assert y == {"meminfo": 0, "parent": 0, "nitems": 5, "itemsize": 4, "data": 0x20000,
                 "shape[0]": 5, "strides[0]": 4}
    assert call["params"][16] == 1.5 and call["params"][17:26][4] == 0x30000
    assert call["params"][26] is False


def test_new_arrays_and_scalars_are_written_the_same_arrays_reused(driver_stand_in):
    args = _axpy_args()
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    launch(*args)
    launch(*args)  # the very same objects: nothing to rewrite
    assert launch.fast.same_as_last(args)
    other = _axpy_args(x_pointer=0x50000, rows=7, cols=2, alpha=-2.0, flag=True)
    launch(*other)
    first, again, third = (c["params"] for c in driver_stand_in)
    assert first == again
    assert third[4:9] == [0x50000, 7, 2, 8, 4] and third[16] == -2.0 and third[26] is True


def test_only_the_arguments_that_changed_are_checked_and_written(driver_stand_in):
    args = _axpy_args()
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    launch(*args)
    written = []

    def recording(position, take):
        def record(arg):
            written.append(position)
            return take(arg)

        return record

    for k, packer in enumerate(launch.fast.packers):
        packer.take = recording(k, packer.take)
    other = _axpy_args(x_pointer=0x50000)
    launch(other[0], *args[1:])  # a new first array, the rest the very same objects
    assert written == [0]
    assert driver_stand_in[-1]["params"][4] == 0x50000
    launch(other[0], *args[1:])
    assert written == [0]


def test_a_loop_alternating_between_arrays_checks_and_reads_each_once(driver_stand_in):
    """A parameter remembers the arrays it accepted (weakly) with their pointers: a loop over
    two inputs does not check contiguity or read a pointer again; a new array is checked."""
    class Counted(DeviceArrayStandIn):
        reads = 0

        @property
        def device_ctypes_pointer(self):
            Counted.reads += 1
            return self._pointer

        @device_ctypes_pointer.setter
        def device_ctypes_pointer(self, value):
            self._pointer = value

    args = _axpy_args()
    inputs = [Counted(0x10000 + k * 0x1000, (3, 5)) for k in range(2)]
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    Counted.reads = 0
    for k in range(6):
        launch(inputs[k % 2], *args[1:])
    assert [c["params"][4] for c in driver_stand_in[-6:]] == [0x10000, 0x11000] * 3
    reads = Counted.reads
    assert reads <= 4  # hasattr and the pointer, once per array
    inputs[0] = Counted(0x30000, (3, 5))
    launch(inputs[0], *args[1:])
    assert Counted.reads > reads and driver_stand_in[-1]["params"][4] == 0x30000


def test_arguments_of_another_kind_are_left_to_numba(driver_stand_in, monkeypatch):
    args = _axpy_args()
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    ordinary = []
    monkeypatch.setattr(launch, "kernel", {(1, (4, 4), 0, 0): lambda *a: ordinary.append(a)})
    host = np.zeros((3, 5), np.float32)
    wrong_dtype = DeviceArrayStandIn(0x10000, (3, 5), np.float64)
    not_contiguous = DeviceArrayStandIn(0x10000, (3, 5), c_contiguous=False)
    for first in (host, wrong_dtype, not_contiguous):
        launch(first, *args[1:])
    launch(*args[:4], 1)  # an int where a bool belongs
    assert len(ordinary) == 4 and not driver_stand_in
    launch(*args[:2], 2.5, *args[3:])  # a Python float converts to float32 as numba's does
    assert len(driver_stand_in) == 1 and driver_stand_in[0]["params"][16] == 2.5


def test_a_failed_launch_raises_with_the_driver_s_code(driver_stand_in, monkeypatch):
    import workbook.launch as launch_module

    args = _axpy_args()
    launch = prepare(axpy_rows, 1, (4, 4), 0, args)
    launch.fast._launch = lambda: (700,)  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(launch_module.CudaLaunchError, match="CUresult 700"):
        launch(*args)
    assert not launch.fast.same_as_last(args)  # the next launch writes its arguments again


def test_unsupported_parameters_keep_the_ordinary_launch(monkeypatch):
    from types import SimpleNamespace

    from numba import types

    import workbook.launch as launch_module

    overload = SimpleNamespace(argument_types=[types.float16],
                               _codelibrary=SimpleNamespace(get_cufunc=lambda: None))
    monkeypatch.setattr(launch_module, "current_mode", lambda: "gpu")
    monkeypatch.setattr("workbook.occupancy.compiled", lambda kernel, args: overload)
    launch = prepare(axpy_rows, 1, 1, 0, (np.float16(1),))
    assert launch.fast is None
    assert launch.why_not_fast == "TypeError: no fast path for an argument of type float16"


def test_a_remembered_argument_is_the_same_object_or_an_equal_scalar():
    from workbook.launch import _is_same, _remember

    array = DeviceArrayStandIn(0x1000, (2,))
    same = _remember(array)
    assert _is_same(same, array) and not _is_same(same, DeviceArrayStandIn(0x1000, (2,)))
    assert not _is_same(same, np.float32(2.0))
    scalar = _remember(np.float32(2.0))
    assert _is_same(scalar, np.float32(2.0))
    assert not _is_same(scalar, np.float64(2.0)) and not _is_same(scalar, 2.0)
    assert not _is_same(scalar, np.float32(3.0)) and not _is_same(scalar, array)
    gone = weakref.ref(array)
    del array, same
    assert gone() is None  # remembering an array does not keep it alive
