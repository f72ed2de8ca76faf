"""A notebook's kernels compiled once, not once per grading process.

On a GPU, ``grader check`` runs a notebook's exercises in several processes: the check, three
compute-sanitizer tools, ncu. Each imported the notebook's cells and compiled every kernel
again. With ``WORKBOOK_KERNEL_CACHE`` naming a folder (``grade_notebook`` makes one per
notebook, shared by its processes), the kernels and device functions of the notebook's cells
(``<cell In[N]>``) use numba's disk cache there: the first process to compile a kernel for a
signature stores it, the others load it.

numba keys a cached kernel by its bytecode, closure, signature and compute target, not by
the globals it reads (a constant such as ``COARSE_FACTOR`` is frozen into the code when it
compiles): that is why the folder belongs to one notebook, whose processes run the same
cells in the same order. A source stamp (the hash of the function's cell text) guards
against a different function under the same name. A cache that fails to read or write is
a miss, never an error of the student's code.

The check compiles each exercise's kernels; the compute-sanitizer tools, which start beside
it and run only the small cases, would reach an exercise first and compile its kernels
again, each tool for itself. So the grading process marks each exercise the check has
finished (:func:`mark_checked`), and a tool's process waits for that mark before it runs
the exercise (:func:`wait_for_check`), then loads the kernels the check stored.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "WORKBOOK_KERNEL_CACHE"
CELL_PREFIX = "<cell"
CHECKED_MARK = ".checked-{}"  # in the folder: the check has finished exercise {} (or "all")
WAIT_FOR_CHECK_S = 60.0  # a tool waits at most this long for the check, then compiles itself

_installed: list[str] = []


def cache_dir() -> str | None:
    """The folder of this process's kernel cache, or None (unset or ``0``)."""
    value = os.environ.get(CACHE_ENV, "")
    return value if value not in ("", "0") else None


@contextmanager
def for_notebook(mode: str, folder: str | None = None, remove: bool = True):
    """The kernel cache of one notebook's grading processes (GPU mode; none where
    ``WORKBOOK_KERNEL_CACHE=0``): ``folder``, or a fresh one; removed afterwards unless
    ``remove`` is false (a batch keeps it until the notebook is profiled) and the block
    ended without an exception. One notebook at a time per process: the folder reaches the
    processes through the environment."""
    if mode != "gpu" or os.environ.get(CACHE_ENV) == "0":
        yield None
        return
    previous = os.environ.get(CACHE_ENV)
    folder = folder or tempfile.mkdtemp(prefix="grader-kernels-")
    os.environ[CACHE_ENV] = folder
    try:
        yield folder
    except BaseException:
        remove = True  # nothing will profile a notebook whose stages failed
        raise
    finally:
        if previous is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = previous
        if remove:
            shutil.rmtree(folder, ignore_errors=True)


def mark_checked(exercise_id: str | None, unneeded: dict[str, str] | None = None,
                 folder: str | None = None) -> None:
    """Mark that the check has finished ``exercise_id`` (None: every exercise it will), so
    that its kernels are in the cache (``folder``, else this process's); ``unneeded``: the
    compute-sanitizer tools that have nothing to look for in its kernels, and why
    (:mod:`grader.kernel_code`). Nothing without a cache."""
    folder = folder or cache_dir()
    if folder is None:
        return
    mark = Path(folder, CHECKED_MARK.format(exercise_id or "all"))
    try:  # written whole, then renamed: a tool never reads half a mark
        partial = mark.with_name(mark.name + ".partial")
        partial.write_text(json.dumps(unneeded or {}))
        os.replace(partial, mark)
    except OSError:  # a missing mark costs a tool the wait, never a verdict
        pass


def unneeded_tools(exercise_id: str) -> dict[str, str]:
    """The tools the check's mark of ``exercise_id`` leaves out, with the reasons; none
    without a mark or a cache (then every tool runs)."""
    folder = cache_dir()
    if folder is None:
        return {}
    try:
        found = json.loads(Path(folder, CHECKED_MARK.format(exercise_id)).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def wait_for_check(exercise_id: str, seconds: float = WAIT_FOR_CHECK_S,
                   poll: float = 0.02) -> bool:
    """Wait until the check has finished ``exercise_id`` (or every exercise), at most
    ``seconds``; whether it has. Without a cache there is nothing to wait for."""
    folder = cache_dir()
    if folder is None:
        return False
    marks = [Path(folder, CHECKED_MARK.format(name)) for name in (exercise_id, "all")]
    deadline = time.monotonic() + seconds
    while not any(mark.exists() for mark in marks):
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def install() -> bool:
    """Cache the kernels of notebook cells compiled from now on in this process (GPU mode)
    in :func:`cache_dir`; whether caching is on."""
    folder = cache_dir()
    if folder is None:
        return False
    if _installed:
        return True
    from numba.cuda import dispatcher
    from numba.cuda.core import caching

    caching.CacheImpl._locator_classes.insert(0, _cell_locator_class(caching))
    original_init = dispatcher.CUDADispatcher.__init__

    def init(self, py_func, *args, **kwargs):
        original_init(self, py_func, *args, **kwargs)
        if is_cell_function(py_func):
            try:
                self.enable_caching()
            except Exception:  # noqa: BLE001  (no cache for this one: it compiles as before)
                pass

    dispatcher.CUDADispatcher.__init__ = init
    _harmless(caching.Cache)
    _installed.append(folder)
    return True


def is_cell_function(py_func) -> bool:
    code = getattr(py_func, "__code__", None)
    return code is not None and code.co_filename.startswith(CELL_PREFIX)


def _harmless(cache_class) -> None:
    """A cache that fails to load is a miss, one that fails to save is skipped."""
    load, save = cache_class.load_overload, cache_class.save_overload

    def load_overload(self, sig, target_context):
        try:
            return load(self, sig, target_context)
        except Exception:  # noqa: BLE001
            return None

    def save_overload(self, sig, data):
        try:
            save(self, sig, data)
        except Exception:  # noqa: BLE001
            pass

    cache_class.load_overload, cache_class.save_overload = load_overload, save_overload


def _cell_locator_class(caching):
    class CellCacheLocator(caching._CacheLocator):
        """numba's cache locator for functions of notebook cells (``<cell In[N]>``): the
        folder of :func:`cache_dir`, stamped with the hash of the function's source."""

        def __init__(self, py_func, py_file):
            source = inspect.getsource(py_func).encode()
            self._stamp = hashlib.sha256(py_file.encode() + b"\0" + source).hexdigest()

        def get_cache_path(self):
            return cache_dir()

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self):
            return self._stamp[:10]

        @classmethod
        def from_function(cls, py_func, py_file):
            if not py_file.startswith(CELL_PREFIX) or cache_dir() is None:
                return None
            try:
                self = cls(py_func, py_file)
                self.ensure_cache_path()
            except (OSError, TypeError):  # no source, or an unwritable folder: no cache
                return None
            return self

    return CellCacheLocator
