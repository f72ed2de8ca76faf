"""A status line showing what each grading phase of a notebook is doing right now."""

from __future__ import annotations

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
