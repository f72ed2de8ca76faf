"""Helpers the exercise specs use to launch student kernels safely.

What lies past a test buffer's data is poisoned: NaN for floating-point types, and
for integers the bytes ``0x7FADBEEF`` (cut or repeated to the element's size, as the
simulator's sanitizer fills fresh shared memory: ``0x7FADBEEF`` in int32, ``0xEF`` in
uint8), a value no test puts in its data. In the simulator a read past the end of a
view raises IndexError; on a GPU nothing checks it, and the read returns the poison,
so a bound off by one (``i <= n``) spoils the result instead of reading a harmless
neighbour. Matrices get the same treatment row by row (:func:`padded_rows`): each row
is followed by 16 bytes of poison, so that a read one past the end of a row does not
land on the first element of the next row.

The profile functions' warm-up launches and ncu's profiled range: :mod:`grader.profiled_range`.
"""

from __future__ import annotations

import functools

import numpy as np

GUARD = 1024  # elements of poison placed after each guarded input on the device
PAD_BYTES = 16  # poison after each row of a padded matrix: one 16-byte pack
POISON_WORD = 0x7FADBEEF


def cuda():
    """numba.cuda, imported after the workbook has chosen the mode."""
    from numba import cuda as _cuda

    import workbook  # noqa: F401  (selects sim or gpu before numba.cuda loads)

    return _cuda


def poison_value(dtype):
    """The poison of ``dtype`` (see the module docstring), as a numpy scalar."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return dtype.type(np.nan)
    if dtype.kind == "b":
        return dtype.type(True)
    raw = (POISON_WORD.to_bytes(4, "little") * 2)[:dtype.itemsize]
    return np.frombuffer(raw, dtype.newbyteorder("<"))[0].astype(dtype)


def poisoned(shape, dtype) -> np.ndarray:
    """A host array of ``shape`` holding the poison of ``dtype`` everywhere."""
    return np.full(shape, poison_value(dtype), dtype=dtype)


def guarded_input(x: np.ndarray):
    """Copy ``x`` to the device followed by GUARD poison elements; return a view of length n.

    In the simulator an out-of-bounds read raises IndexError; on a GPU it reads
    the poison (NaN for floats), so a missing bounds check shows up in the result.
    """
    padded = poisoned(x.size + GUARD, x.dtype)
    padded[: x.size] = x.reshape(-1)
    return cuda().to_device(padded)[: x.size]


def row_pad(dtype) -> int:
    """Elements of poison after each row of a padded matrix of ``dtype`` (16 bytes' worth):
    a row whose length is a multiple of the 16-byte pack stays 16-byte aligned."""
    return max(1, PAD_BYTES // np.dtype(dtype).itemsize)


def padded_rows(x: np.ndarray, guard_rows: int = 0, fill=None):
    """``x`` (rows, cols) on the device in padded rows; returns ``(view, full)``.

    ``full`` has ``rows + guard_rows`` rows of ``cols + row_pad`` elements, all poison
    (or ``fill``) but ``x``; ``view`` is its ``(rows, cols)`` corner, the array a kernel
    gets: its row stride is ``cols + row_pad`` elements, so ``x[r, cols]`` on a GPU reads
    the poison after row ``r`` and not ``x[r + 1, 0]``.
    """
    rows, cols = x.shape
    host = poisoned((rows + guard_rows, cols + row_pad(x.dtype)), x.dtype) if fill is None \
        else np.full((rows + guard_rows, cols + row_pad(x.dtype)), fill, dtype=x.dtype)
    host[:rows, :cols] = x
    full = cuda().to_device(host)
    return full[:rows, :cols], full


def padded_output(shape, fill, dtype, guard_rows: int = 0):
    """An output matrix of ``shape`` filled with ``fill``, in padded rows (see
    :func:`padded_rows`) that hold ``fill`` too; returns ``(view, full)``. After the
    launch, :func:`outside_changes` tells whether the kernel wrote past the view."""
    return padded_rows(np.full(shape, fill, dtype=dtype), guard_rows, fill=fill)


def outside_changes(host_full: np.ndarray, shape, fill) -> tuple[list[int], list[int]]:
    """Where a padded output (copied to the host whole) changed outside its view:
    ``(rows whose padding after the end changed, guard rows that changed)``."""
    rows, cols = shape

    def changed(block):
        if np.isnan(fill):
            return ~np.isnan(block)
        return block != fill

    pads = np.nonzero(changed(host_full[:rows, cols:]).any(axis=1))[0]
    guards = np.nonzero(changed(host_full[rows:]).any(axis=1))[0] + rows
    return [int(r) for r in pads], [int(r) for r in guards]


def output(n: int, fill, dtype, name: str = "output"):
    """A device output array filled with ``fill``.

    In simulator mode it is watched for races between blocks (see
    :mod:`workbook.sim.global_races`), which the simulator would otherwise hide.
    """
    array = cuda().to_device(np.full(n, fill, dtype=dtype))
    if cuda().config.ENABLE_CUDASIM:
        from workbook.sim.global_races import watch

        watch(array, name)
    return array


def launch(kernel, grid: int, block: int, *args) -> None:
    """Launch and wait, so errors surface here and not at the next copy."""
    kernel[grid, block](*args)
    cuda().synchronize()


def blocks_for(n: int, per_block: int) -> int:
    return max(1, -(-n // per_block))


_BUILT: list = []  # the cache of every built_once function


def built_once(make):
    """``make`` (a profile's host inputs from a seeded generator) built once per process and
    returned read-only after: a profile job makes each exercise's profiling launches twice
    (see :func:`grader.runner.profile_job`), and the second time, inside ncu's profiled
    segment, only the launches should take time."""
    @functools.cache
    def remembered(*args):
        made = make(*args)
        for value in made.values() if isinstance(made, dict) else (made,):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        return made

    _BUILT.append(remembered)
    return functools.wraps(make)(remembered)


def forget_built() -> None:
    """Drop what every :func:`built_once` function built (hundreds of MB at GPU sizes)."""
    for remembered in _BUILT:
        remembered.cache_clear()
