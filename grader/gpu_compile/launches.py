"""The first simulated launch of each kernel, while a check records them.

:func:`recording` wraps the simulator's kernel launch (once per process) so that, inside
the ``with`` block, the first launch of each kernel calls ``on_launch(kernel, argtypes)``
before the kernel runs: ``argtypes`` are numba's types of the launch's arguments, as
numba-cuda types them on a GPU (an int is ``int64``, a device array ``float32[::1]``...).
Device functions are not launched: they are compiled through the kernels that call them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

_RECORDERS: list[Callable] = []
_INSTALLED = "_workbook_gpu_compile_recording"


def argument_types(args) -> tuple:
    """numba's types of a launch's arguments (``Purpose.argument``: no literals)."""
    from numba.cuda.typing.typeof import Purpose, typeof

    return tuple(typeof(arg, Purpose.argument) for arg in args)


def _install() -> None:
    from numba.cuda.simulator import kernel as simulated

    fake = simulated.FakeCUDAKernel
    if getattr(fake, _INSTALLED, False):
        return
    launch = fake.__call__

    def recorded_call(self, *args):
        if _RECORDERS and not self._device and simulated._get_kernel_context() is None:
            _RECORDERS[-1](self, args)
        return launch(self, *args)

    fake.__call__ = recorded_call
    setattr(fake, _INSTALLED, True)


@contextmanager
def recording(on_launch: Callable[[object, tuple], None]):
    """Call ``on_launch(kernel, argtypes)`` at the first launch of each kernel in the block
    (``argtypes`` is None where numba cannot type an argument). ``on_launch`` must not
    raise: it runs where the student's code launches the kernel."""
    _install()
    seen: dict[int, object] = {}  # id -> kernel (kept alive, so that ids stay unique)

    def first_launch(kernel, args):
        if id(kernel) in seen:
            return
        seen[id(kernel)] = kernel
        try:
            types = argument_types(args)
        except Exception:  # noqa: BLE001  (the launch itself reports a bad argument)
            types = None
        on_launch(kernel, types)

    _RECORDERS.append(first_launch)
    try:
        yield
    finally:
        _RECORDERS.remove(first_launch)


__all__ = ["argument_types", "recording"]
