"""Simulated CUDA threads that outlived their kernel, as the tests track them."""

LEFT_BEHIND: set = set()  # simulated threads a module was already failed for


def threads_left_behind(wait: float = 0.0) -> list:
    """Simulated threads still alive that no module was failed for yet (so threads one
    module left behind fail that module, not every module after it)."""
    from workbook.sim.watchdog import simulated_threads

    return [t for t in simulated_threads(wait=wait) if t not in LEFT_BEHIND]
