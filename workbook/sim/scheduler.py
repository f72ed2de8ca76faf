"""A block manager for the simulator that waits instead of spinning.

numba's simulator runs each CUDA thread of a block as a Python thread and has the
launching thread poll them in a tight loop (for barriers, exceptions and exits).
That loop competes for the GIL with the very threads it waits for: where those
threads hand work to each other (warp collectives, barriers), every hand-over can
wait for the poller's time slice. On a two-core machine one 64-thread kernel took
2-3 minutes this way instead of a few seconds. The replacement below keeps the
semantics (release a barrier once every live thread waits at it; abort the block
and re-raise the first exception) and sleeps briefly between polls.

A check's time limit (:class:`~workbook.sim.watchdog.KernelTimeout`), an interrupt
(Jupyter's stop button) or an error in one thread stops all the block's threads before
it propagates, so that the next launch starts clean (the plain simulator leaves a thread
that loops running forever); a timeout carries what each thread was doing.
"""

from __future__ import annotations

import time

import numpy as np

from workbook.sim.watchdog import KernelTimeout, describe_block, stop_threads

POLL_S = 2e-4  # between two polls of the block's threads: hands the GIL to them

_INSTALLED = "_workbook_scheduler_installed"


def _run_block(manager, grid_point, *args) -> None:
    from numba.cuda.simulator.kernel import BlockThread

    def target():
        manager._f(*args)

    threads = [BlockThread(target, manager, grid_point, block_point, manager._debug)
               for block_point in np.ndindex(*manager._block_dim)]
    barriers = [0]  # releases of cuda.syncthreads() so far
    try:
        for thread in threads:
            thread.start()
        _wait_for_block(threads, barriers)
    except BaseException as stop:  # a check's time limit, the stop button, a thread's error
        try:
            if isinstance(stop, KernelTimeout):
                stop.diagnosis = describe_block(threads, barriers[0])
        finally:
            _stop_shielded([t for t in threads if t.ident is not None])
        raise


def _stop_shielded(threads) -> None:
    """:func:`stop_threads`, finished even if the stop button is pressed again meanwhile: a
    thread left looping would run (and slow down every later cell) until the process ends."""
    while True:
        try:
            stop_threads(threads)
            return
        except KeyboardInterrupt:
            continue


def _wait_for_block(threads, barriers: list[int]) -> None:
    live = set(threads)
    while live:
        # a failed thread's error is raised once the thread has ended: until then the
        # sanitizer may still be rewriting it (a never-written read that came first)
        failed = next((t for t in threads if t.exception and not t.is_alive()), None)
        if failed is not None:
            for other in threads:  # let every waiting thread see the abort
                other.abort = True
                other.syncthreads_blocked = False
                other.syncthreads_event.set()
            raise failed.exception[0].with_traceback(failed.exception[1])
        if all(t.syncthreads_blocked for t in live):
            barriers[0] += 1
            for thread in live:
                thread.syncthreads_blocked = False
                thread.syncthreads_event.set()
        live = {t for t in live if t.is_alive()}
        if live:
            time.sleep(POLL_S)
    for thread in threads:  # an exception set just before its thread ended
        if thread.exception:
            raise thread.exception[0].with_traceback(thread.exception[1])


def install() -> None:
    """Replace the simulator's block manager loop (idempotent)."""
    from numba.cuda.simulator import kernel

    manager = kernel.BlockManager
    if getattr(manager, _INSTALLED, False):
        return
    manager.run = _run_block
    setattr(manager, _INSTALLED, True)


__all__ = ["POLL_S", "install"]
