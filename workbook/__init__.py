"""Runtime support for the Numba-CUDA Workbook notebooks.

Import this package before ``numba.cuda``: it chooses simulator or GPU mode
(see :mod:`workbook.mode`) and, in simulator mode, installs the extensions that
let warp-level code run without a GPU (see :mod:`workbook.sim`).
"""

from workbook.mode import current_mode, select_mode

MODE = select_mode()

if MODE == "sim":
    from workbook import sim as _sim

    _sim.install()

__all__ = ["MODE", "current_mode", "select_mode"]
