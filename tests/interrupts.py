"""Interrupting a child process as Jupyter's stop button does (SIGINT), for the tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_sigint() -> None:
    """For a child process that must stop at SIGINT: its default action even when this
    process was started with SIGINT ignored (a background job without job control), which
    a child inherits and which keeps Python from raising KeyboardInterrupt in it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_interrupting(script: Path, env: dict, at: tuple[str, ...], wait: float,
                     give_up: float) -> tuple[list[str], list[dict]]:
    """Run ``script`` (its argument: the tests folder), which prints its steps as JSON lines
    ``{"step": ...}``; ``wait`` seconds after each step named in ``at``, send it SIGINT. An
    ``interrupted`` step gets ``delay``, the seconds since the last SIGINT. The child is
    killed after ``give_up`` seconds (an interrupt that does not work); it must exit with 0.
    Returns its output lines and its steps, in order."""
    proc = subprocess.Popen([sys.executable, str(script), str(ROOT / "tests")], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=default_sigint)
    lines, steps, sent = [], [], None
    deadline = threading.Timer(give_up, proc.kill)
    deadline.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if not line.startswith("{"):
                continue
            step = json.loads(line)
            if step["step"] in at:
                time.sleep(wait)
                sent = time.monotonic()
                proc.send_signal(signal.SIGINT)
            elif step["step"] == "interrupted" and sent is not None:
                step["delay"] = time.monotonic() - sent
            steps.append(step)
        assert proc.wait(timeout=60) == 0, "".join(lines)
    finally:
        deadline.cancel()
        proc.kill()
        proc.stdout.close()
    return lines, steps
