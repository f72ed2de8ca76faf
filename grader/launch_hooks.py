"""Every path by which a kernel launch reaches the driver, hooked while a block runs.

The paths: numba's own (``kernel[grid, block](...)``, a ``forall``, a specialised kernel: each
ends in ``_Kernel.launch``), a prepared launch's driver call
(:meth:`workbook.launch._DriverLaunch.try_launch`), and the simulator's launch.
:func:`on_launch` calls ``note(launched)`` after each launch that returned (one that raised
may not have reached the GPU): ``launched`` is numba's compiled kernel (``_Kernel``), the
prepared launch, or the simulated kernel.

Two readers: :func:`grader.profiled_range.recorded_launches` (the kernels' names inside ncu's
profiled range) and :func:`grader.kernel_code.launched_kernels` (the compiled kernels an
exercise's check ran).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import contextmanager

from grader.launch import cuda


@contextmanager
def on_launch(note: Callable[[object], None]):
    """``note(launched)`` after every kernel launch while the block runs (see the module)."""
    originals = []
    try:
        for owner, attribute, hook in _launch_paths():
            originals.append((owner, attribute, owner.__dict__.get(attribute)))
            setattr(owner, attribute, hook(getattr(owner, attribute), note))
        yield
    finally:
        for owner, attribute, original in reversed(originals):
            if original is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


def _launch_paths():
    """``(class, method, hook)`` of each launch path of this mode; ``hook(method, note)``
    returns the method calling ``note`` after each launch."""
    from workbook.launch import _DriverLaunch

    paths = [(_DriverLaunch, "try_launch", _hooked_driver_launch)]
    if cuda().config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        return [*paths, (FakeCUDAKernel, "__call__", _hooked_simulated_launch)]
    from numba.cuda.dispatcher import _Kernel

    return [*paths, (_Kernel, "launch", _hooked_numba_launch)]


def _hooked_numba_launch(launch, note):
    @functools.wraps(launch)
    def hooked(self, *args, **kwargs):
        result = launch(self, *args, **kwargs)
        note(self)
        return result

    return hooked


def _hooked_driver_launch(try_launch, note):
    @functools.wraps(try_launch)
    def hooked(self, args):
        launched = try_launch(self, args)
        if launched:  # False: numba's own path launches instead, and is hooked there
            note(self)
        return launched

    return hooked


def _hooked_simulated_launch(call, note):
    from numba.cuda.simulator import kernel as simulated

    @functools.wraps(call)
    def hooked(self, *args):
        launch = not self._device and simulated._get_kernel_context() is None
        result = call(self, *args)
        if launch:  # not a device function's call, nor a call from inside a kernel
            note(self)
        return result

    return hooked
