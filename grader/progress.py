"""What the grader is doing right now: a status line for each grading phase of a notebook
(``grader check``), one updating line for a notebook's own check."""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console

PHASE_WORDS = {"check": "checking", "simulator": "simulating", "profile": "profiling",
               "memcheck": "sanitizing (memcheck)", "racecheck": "sanitizing (racecheck)",
               "synccheck": "sanitizing (synccheck)"}


class PhaseDisplay:
    """``with PhaseDisplay(console, title): ... update(phase, exercise_id)``; phases report
    from several threads at once."""

    def __init__(self, console: Console, title: str):
        self.console, self.title = console, title
        self.active: dict[str, str] = {}
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.status = None

    def __enter__(self) -> PhaseDisplay:
        self.status = self.console.status(f"grading {self.title}")
        self.status.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.status.__exit__(*exc)

    def update(self, phase: str, exercise_id: str | None) -> None:
        with self.lock:
            if exercise_id is None:
                self.active.pop(phase, None)
            else:
                self.active[phase] = exercise_id
            doing = "; ".join(f"{PHASE_WORDS.get(p, p)} {e}" for p, e in self.active.items())
            elapsed = time.monotonic() - self.start
            text = f"grading {self.title} [{elapsed:.0f} s]" + (f": {doing}" if doing else "")
        if self.status is not None:
            self.status.update(text)


class CheckProgress:
    """One line under a notebook's check cell, updated in place, saying what the check is
    doing (``reduction.simple: test case 3 of 6 (n=64, integers)``); removed when the check
    ends, where the result shows. In a Jupyter kernel it is an updatable display; in a
    terminal a line rewritten with ``\\r``; elsewhere (output to a file) nothing."""

    def __init__(self, exercise_id: str, mode: str, out=None):
        self.exercise_id, self.mode = exercise_id, mode
        self.start = time.monotonic()
        self.handle = None
        self.out = out
        self.shown = False

    def __enter__(self) -> CheckProgress:
        self.show(f"{self.exercise_id}: starting the check")
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)
        elif self.shown:
            self.out.write("\r\033[K")
            self.out.flush()

    def case(self, k: int, n: int, case) -> None:
        """``on_case`` of :func:`grader.exercise.check_exercise`."""
        first = " (the first launch compiles the kernel)" if k == 1 and self.mode == "gpu" else ""
        self.show(f"{self.exercise_id}: test case {k} of {n} ({case.name()}){first}, "
                  f"{time.monotonic() - self.start:.0f} s so far")

    def show(self, text: str) -> None:
        if self.handle is None and not self.shown:
            self.handle = _kernel_display(text)
            if self.handle is not None:
                return
        if self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)
            return
        out = self.out or sys.stderr
        if not getattr(out, "isatty", lambda: False)():
            return
        self.out, self.shown = out, True
        out.write(f"\r\033[K{text}")
        out.flush()


def _kernel_display(text: str):
    """A display in the running Jupyter kernel's cell that can be updated, or None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    if getattr(shell, "kernel", None) is None:
        return None
    from IPython.display import display

    return display({"text/plain": text}, raw=True, display_id=True)
