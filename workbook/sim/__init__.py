"""Extensions to numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).

:func:`install` is idempotent and is called by ``import workbook`` in
simulator mode.
"""

from workbook.sim import (
    barrier_predicates,
    global_races,
    local_memory,
    sanitizer,
    scheduler,
    shared_memory,
    shuffle_reads,
    warp,
)


def install() -> None:
    """Attach the workbook's extensions to the simulator."""
    scheduler.install()
    warp.install()
    barrier_predicates.install()
    from workbook.sim import foreign  # declare_device: foreign CUDA C functions

    foreign.install()
    sanitizer.install()  # last: wraps cuda.shared.array; installs the registered detectors


__all__ = ["barrier_predicates", "global_races", "install", "local_memory", "sanitizer",
           "scheduler", "shared_memory", "shuffle_reads", "warp"]
