"""Extensions to numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).

:func:`install` is idempotent and is called by ``import workbook`` in
simulator mode.
"""

from workbook.sim import global_races, warp


def install() -> None:
    """Attach the workbook's extensions to the simulator."""
    warp.install()
    global_races.install()


__all__ = ["global_races", "install", "warp"]
