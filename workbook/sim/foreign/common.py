"""Constants, the error type and the instruction statistics of the PTX emulation."""

from __future__ import annotations

from workbook.sim.watchdog import StoppableLock

RET_BASE = 0x0010_0000_0000_0000  # generic address of the return slot (above user space)
RET_SIZE = 256
WINDOW_ALIGN = 128
_INSTALLED = "_workbook_foreign_installed"


class ForeignEmulationError(RuntimeError):
    """A foreign function did something the simulator cannot run, or that fails on a GPU."""


# ---------------------------------------------------------------------------
# Statistics


_stats_lock = StoppableLock()  # taken by simulated threads
_stats: dict[str, dict[str, int]] = {}


def reset_stats() -> None:
    """Forget the counts of :func:`stats`."""
    with _stats_lock:
        _stats.clear()


def stats() -> dict[str, dict[str, int]]:
    """Counts since :func:`reset_stats`, per instruction (``"ldmatrix"``, ``"stmatrix"``,
    ``"mma"``): ``instructions`` (warp-wide executions), and for the memory instructions
    ``wavefronts`` (shared-memory passes), ``ideal`` (one per 8x8 matrix) and
    ``conflicts`` (``wavefronts - ideal``: extra passes caused by bank conflicts)."""
    with _stats_lock:
        return {k: dict(v) for k, v in _stats.items()}


def _count(kind: str, **values: int) -> None:
    with _stats_lock:
        entry = _stats.setdefault(kind, {})
        for key, value in values.items():
            entry[key] = entry.get(key, 0) + value
