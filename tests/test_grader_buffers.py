"""The grader's test buffers: poison past the data (grader.launch), and what the output
checks make of a kernel that reads or writes one element past the end of a row.

A GPU does not check bounds: a load one past the end of a row returns whatever memory
holds there. The kernel exercises of lessons 03 and 04 put 16 bytes of poison (NaN) after
every row, so such a load spoils the result instead of reading the next row's first
element. These tests read the padded memory the way a GPU would (by address, ignoring the
view's shape) and check that the comparisons reject the result with a message that names
the cause; in the simulator the same bug raises IndexError (see the buggy variants in
grader/exercises/<lesson>/variants/).
"""

import numpy as np
import pytest

import workbook  # noqa: F401  (selects the mode: import it before numba.cuda)
from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises import layernorm, softmax
from workbook.welford import layer_norm_reference


def test_poison_values():
    assert np.isnan(L.poison_value(np.float32)) and np.isnan(L.poison_value(np.float16))
    assert L.poison_value(np.int32) == 0x7FADBEEF
    assert L.poison_value(np.int64) == 0x7FADBEEF7FADBEEF
    assert L.poison_value(np.uint16) == 0xBEEF
    assert L.poison_value(np.uint8) == 0xEF  # a nonzero pixel: foreground, if read
    assert L.poison_value(np.int32).dtype == np.int32


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_guarded_input_is_followed_by_poison(dtype, monkeypatch):
    copied = []

    class Device:  # stands in for numba.cuda: records what goes to the device
        @staticmethod
        def to_device(array):
            copied.append(array)
            return array

    monkeypatch.setattr(L, "cuda", lambda: Device)
    x = np.arange(1, 11).astype(dtype)
    view = L.guarded_input(x)
    np.testing.assert_array_equal(view, x)
    (allocation,) = copied
    assert allocation.shape == (10 + L.GUARD,) and allocation.dtype == dtype
    tail = allocation[10:]
    assert np.isnan(tail).all() if tail.dtype.kind == "f" else (tail == L.poison_value(dtype)).all()


def _gpu_row(full_host: np.ndarray, row: int, count: int) -> np.ndarray:
    """``count`` elements from the start of ``row``, read by address as a GPU would: past
    the row's end they come from whatever follows it in memory."""
    return full_host.reshape(-1)[row * full_host.shape[1]:][:count]


@pytest.mark.parametrize("dtype,pad", [(np.float32, 4), (np.float16, 8)])
def test_padded_rows_put_poison_after_every_row(dtype, pad):
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(dtype)
    view, full = L.padded_rows(x, guard_rows=2)
    host = full.copy_to_host()
    assert view.shape == x.shape and host.shape == (7, 16 + pad)
    # rows of whole 16-byte packs stay 16-byte aligned
    assert L.row_pad(dtype) == pad and (16 + pad) * np.dtype(dtype).itemsize % 16 == 0
    np.testing.assert_array_equal(host[:5, :16], x)
    assert np.isnan(host[:5, 16:]).all() and np.isnan(host[5:]).all()
    for row in range(5):  # one past the end of each row: NaN, not the next row's first value
        assert np.isnan(_gpu_row(host, row, 17)[-1])


def _softmax_with_one_more(rows: np.ndarray) -> np.ndarray:
    """Softmax of each row over one element more than the row has (a bound `col <= cols`),
    as a kernel computes it; only the row's own columns are stored."""
    with np.errstate(invalid="ignore"):
        shifted = rows - rows.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        return (e / e.sum(axis=1, keepdims=True))[:, :-1]


def test_softmax_load_one_past_the_row_is_rejected_by_the_output_check():
    x = np.random.default_rng(1).standard_normal((6, 20)).astype(np.float32)
    inputs = {"x": x, "log": False}
    expected = softmax.reference(inputs)
    _, full = L.padded_rows(x, softmax.GUARD_ROWS)
    host = full.copy_to_host()
    read = np.stack([_gpu_row(host, r, 21) for r in range(6)]).astype(np.float64)
    got = _softmax_with_one_more(read).astype(np.float32)
    assert np.isnan(got).all()  # every row read the NaN after it
    with pytest.raises(Mismatch, match="past the end of the row"):
        softmax.expect_softmax(got, expected, inputs)
    # without the padding the read lands on the next row's first value: a plausible,
    # slightly wrong row (rejected too, but nothing points at the bound)
    contiguous = np.vstack([x, np.full((1, 20), np.nan, np.float32)])
    read = np.stack([_gpu_row(contiguous, r, 21) for r in range(6)]).astype(np.float64)
    got = _softmax_with_one_more(read).astype(np.float32)
    assert np.isfinite(got[:-1]).all()


def test_softmax_store_one_past_the_row_changes_the_padding():
    view, full = softmax.buffers.device_output((4, 10), np.float32, padded=True)
    host = full.copy_to_host()
    host[:4, :10] = 0.1
    assert softmax.buffers.finish(L.cuda().to_device(host), 4, 10).shape == (4, 10)
    host[2, 10] = 0.1  # y[2, cols]
    with pytest.raises(Mismatch, match=r"past the end of rows 2 of y.*col < cols"):
        softmax.buffers.finish(L.cuda().to_device(host), 4, 10)
    host[2, 10] = softmax.SENTINEL
    host[4, 0] = 0.1  # the first guard row
    with pytest.raises(Mismatch, match="past the last row"):
        softmax.buffers.finish(L.cuda().to_device(host), 4, 10)


def _norm_inputs(x):
    cols = x.shape[1]
    return {"x": x, "gamma": np.ones(cols, np.float32), "beta": np.zeros(cols, np.float32),
            "affine": True, "eps": np.float32(1e-5)}


def _stats(rows: np.ndarray, eps=1e-5):
    mean = rows.mean(axis=1)
    return mean.astype(np.float32), (1 / np.sqrt(rows.var(axis=1) + eps)).astype(np.float32)


def test_layernorm_statistics_over_one_past_the_row_are_rejected_and_named():
    x = layernorm.make_rows(np.random.default_rng(2), 6, 37, "normal", "float32")
    inputs = _norm_inputs(x)
    expected = layer_norm_reference(x, inputs["gamma"], inputs["beta"], 1e-5)
    y = expected[0].astype(np.float32)
    _, full = L.padded_rows(x, 1)
    host = full.copy_to_host()
    read = np.stack([_gpu_row(host, r, 38) for r in range(6)]).astype(np.float64)
    mean, rstd = _stats(read)
    assert np.isnan(mean).all()
    with pytest.raises(Mismatch, match=r"NaN, and the kernel wrote them.*past the end of the"):
        layernorm.expect_layer_norm((y, mean, rstd), inputs, expected, seq=2)
    # the contiguous layout: the next row's first value joins each row's statistics; the
    # comparison names one element too many
    contiguous = np.vstack([x, x[:1]]).astype(np.float64)
    read = np.stack([_gpu_row(contiguous, r, 38) for r in range(6)])
    mean, rstd = _stats(read)
    with pytest.raises(Mismatch, match=r"one element more.*past the end of the row"):
        layernorm.expect_layer_norm((y, mean, rstd), inputs, expected, seq=2)


def test_layernorm_statistics_without_the_last_element_are_named():
    x = layernorm.make_rows(np.random.default_rng(3), 5, 40, "normal", "float32")
    inputs = _norm_inputs(x)
    expected = layer_norm_reference(x, inputs["gamma"], inputs["beta"], 1e-5)
    mean, rstd = _stats(x[:, :-1].astype(np.float64))
    with pytest.raises(Mismatch, match="without its last element"):
        layernorm.expect_layer_norm((expected[0].astype(np.float32), mean, rstd), inputs,
                                    expected, seq=2)


def test_layernorm_store_one_past_the_row_is_seen():
    x = layernorm.make_rows(np.random.default_rng(4), 3, 9, "normal", "float32")
    inputs = _norm_inputs(x)
    args = layernorm.buffers.device_args(inputs, padded=True)
    y, mean, rstd = layernorm.buffers.read_outputs(args, inputs)
    assert np.isnan(y).all() and y.shape == (3, 9)
    assert layernorm.never_written(mean).all() and layernorm.never_written(rstd).all()
    host = inputs["y_full"].copy_to_host()
    host[1, 9] = 0.5  # y[1, cols]
    inputs["y_full"].copy_to_device(host)
    with pytest.raises(Mismatch, match=r"past the end of rows \[1 \(of 3\)\] of y"):
        layernorm.buffers.read_outputs(args, inputs)


def test_outside_changes():
    host = np.full((4, 6), 7.0, np.float32)
    host[:3, :4] = 0.0
    assert L.outside_changes(host, (3, 4), 7.0) == ([], [])
    host[1, 5] = 0.0
    host[3, 0] = 1.0
    assert L.outside_changes(host, (3, 4), 7.0) == ([1], [3])
    nan = np.full((2, 3), np.nan, np.float32)
    nan[0, 2] = 1.0
    assert L.outside_changes(nan, (2, 2), np.nan) == ([0], [])


def test_profile_inputs_are_built_once_per_process_and_read_only():
    """A profile job makes each exercise's launches twice; their host inputs are built once
    (the second time must not spend ncu's window on a random generator) and cannot be
    changed by the first launch's code."""
    import numpy as np
    import pytest

    from grader.launch import built_once

    made = []

    @built_once
    def inputs(n):
        made.append(n)
        return {"x": np.arange(n, dtype=np.float32), "n": n}

    first = inputs(4)
    assert inputs(4) is first and inputs(5) is not first and made == [4, 5]
    with pytest.raises(ValueError, match="read-only"):
        first["x"][0] = 1
