"""Modules that a grading process imports only when a cell uses them.

Every grading process (:mod:`grader.runner`: the check, each compute-sanitizer tool, the
simulator pass, the profile stage) runs the notebook's first cell, and that cell imports
``matplotlib.pyplot`` for the lesson's plots, which grading never draws. ``import
matplotlib.pyplot as plt`` then binds a lazy module (:class:`importlib.util.LazyLoader`): pyplot
and the modules it pulls in (figures, backends, fonts) load at the first use of ``plt.<name>``,
and not at all in a process that never plots. ``matplotlib`` itself still loads (a submodule's
import needs its package).

On a GPU, numba-cuda loads its array maths (``numba.cuda.np.arraymath``) at the first
compile, and that module imports ``scipy.linalg`` to learn whether numpy's ``dot`` may call
BLAS on the host (the answer only picks how ``np.correlate``/``np.convolve`` multiply in a
kernel, and BLAS is never reachable from one). :func:`skip_blas_probe` loads it with
``scipy.linalg`` hidden, so the probe fails at once and kernels get numba-cuda's own loop.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

LAZY = frozenset({"matplotlib.pyplot"})


class LazyFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`LAZY` as the other finders do, with a lazy loader."""

    def find_spec(self, name, path, target=None):
        if name not in LAZY:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = importlib.util.LazyLoader(spec.loader)
                return spec
        return None


BLAS_PROBE = "scipy.linalg"  # what numba.cuda.np.arraymath imports to look for BLAS
ARRAY_MATHS = "numba.cuda.np.arraymath"


def skip_blas_probe() -> None:
    """Import numba-cuda's array maths (GPU mode) without its BLAS probe: ``scipy.linalg``
    hidden while it loads, unless either is loaded already. A cell's own ``import
    scipy.linalg`` later works as usual."""
    if BLAS_PROBE in sys.modules or ARRAY_MATHS in sys.modules:
        return
    sys.modules[BLAS_PROBE] = None  # an import of it now fails at once
    try:
        importlib.import_module(ARRAY_MATHS)
    finally:
        if BLAS_PROBE in sys.modules and sys.modules[BLAS_PROBE] is None:
            del sys.modules[BLAS_PROBE]


def install() -> None:
    """Make this process's later imports of :data:`LAZY` lazy (once)."""
    if not any(isinstance(finder, LazyFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, LazyFinder())
