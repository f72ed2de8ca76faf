"""compute-sanitizer checks of graded exercises on a GPU.

In simulator mode every kernel runs under the workbook's own sanitizer
(:mod:`workbook.sim.sanitizer`). On a GPU, after grading an exercise, the grader
runs it once more for each of NVIDIA's compute-sanitizer tools -- ``memcheck``
(out-of-bounds and misaligned accesses), ``racecheck`` (shared-memory data
races) and ``synccheck`` (barriers not every thread reaches) -- on its test
cases of at most :data:`MAX_SIZE` elements (the tools slow kernels down a
hundredfold and more). A tool that reports an error fails the exercise, with
the tool's first finding in the result's messages. A tool with nothing to look
for in the kernels the check launched (racecheck without shared memory, synccheck
without a barrier or warp-synchronous primitive: :mod:`grader.kernel_code`) does
not run, and the result says why. Where compute-sanitizer is
not installed the exercise is graded as before, with a note saying the checks
were skipped. The grading pipeline runs the tools in its sanitize stage
(:mod:`grader.stages.sanitize`); this module finds the tool, builds its command line and
reads its report.

``WORKBOOK_SANITIZE=0`` turns these runs off, as it turns off the simulator's
sanitizer; ``WORKBOOK_GPU_SANITIZERS`` chooses the tools (comma-separated, e.g.
``racecheck``; empty for none).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from pathlib import Path

from grader.exercise import SANITIZED_MAX_SIZE
from grader.results import FAILED, PASSED

TOOLS = ("memcheck", "racecheck", "synccheck")
TOOLS_ENV = "WORKBOOK_GPU_SANITIZERS"
SWITCH_ENV = "WORKBOOK_SANITIZE"  # shared with the simulator's sanitizer
FALLBACK_PATHS = ("/usr/local/cuda/bin/compute-sanitizer",)
MAX_SIZE = SANITIZED_MAX_SIZE  # the largest test case run under a tool
ERROR_EXITCODE = 99

WHAT = {
    "memcheck": "an out-of-bounds or misaligned memory access (a missing bounds check?)",
    "racecheck": "a data race in shared memory (a missing cuda.syncthreads()?)",
    "synccheck": "a barrier that not all threads reach (cuda.syncthreads() inside a branch, "
                 "or after an early return?)",
}

_SUMMARY = re.compile(r"=+ ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"=+ RACECHECK SUMMARY: (\d+) hazards? displayed "
                           r"\((\d+) errors?, (\d+) warnings?\)")
_FINDING = re.compile(r"^=+ (?!ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|\s)(.+)$")
_NOISE = ("Saved host backtrace", "Host Frame", "Device Frame", "=========     in ",
          "Target application returned")
_ABI_TAG = re.compile(r"\[abi:[^\]]*\]")  # numba's kernel names: name[abi:v1,<hash>](args)
_ARGUMENTS = re.compile(r"\((?:[^()]|\([^()]*\))*\)(?=\+0x)")


def tidy(line: str) -> str:
    """A report line with numba's kernel names shortened: ``__main__::shared_sum_kernel+0x3a0``
    for ``__main__::shared_sum_kernel[abi:v1,...](Array<float, (int)1, ...>, ...)+0x3a0``."""
    return _ARGUMENTS.sub("", _ABI_TAG.sub("", line))


def find_tool() -> str | None:
    """Path of compute-sanitizer: on PATH, in $CUDA_HOME/bin, or /usr/local/cuda/bin."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    candidates = [str(Path(h, "bin", "compute-sanitizer")) for h in homes if h]
    return next((p for p in (*candidates, *FALLBACK_PATHS) if os.access(p, os.X_OK)), None)


def selected_tools() -> tuple[str, ...]:
    """The tools to run: none when WORKBOOK_SANITIZE=0, else WORKBOOK_GPU_SANITIZERS."""
    if os.environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return ()
    text = os.environ.get(TOOLS_ENV)
    if text is None:
        return TOOLS
    names = tuple(t.strip() for t in text.split(",") if t.strip() and t.strip() != "none")
    unknown = [t for t in names if t not in TOOLS]
    if unknown:
        raise ValueError(f"{TOOLS_ENV}: unknown tool(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(TOOLS)}")
    return names


def small_cases(exercise, mode: str):
    """``exercise`` with only its test cases of at most MAX_SIZE elements (else its
    smallest case)."""
    if mode == "gpu" and exercise.sanitizer_cases is not None:
        return dataclasses.replace(exercise, cases={**exercise.cases,
                                                    mode: tuple(exercise.sanitizer_cases)})
    cases = tuple(exercise.cases_for(mode))
    small = tuple(c for c in cases if c.size <= MAX_SIZE)
    if not small and cases:
        small = (min(cases, key=lambda c: c.size),)
    return dataclasses.replace(exercise, cases={**exercise.cases, mode: small})


def command(tool_path: str, tool: str, job_path: Path | None = None,
            events_path: Path | None = None) -> list[str]:
    """compute-sanitizer running :mod:`grader.runner` under ``tool`` (the runner's arguments
    follow when given)."""
    prefix = [tool_path, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
              "--report-api-errors", "no", "--print-limit", "20"]
    if job_path is None:
        return prefix
    return [*prefix, sys.executable, "-m", "grader.runner", str(job_path), str(events_path)]


@dataclasses.dataclass
class Finding:
    """What one tool run reported: ``errors`` is None when the run did not complete."""

    tool: str
    errors: int | None
    lines: list[str]
    note: str = ""
    unneeded: str = ""  # why the tool did not run: nothing in the kernels for it to check

    def message(self) -> str:
        if self.unneeded:
            return f"compute-sanitizer {self.tool}: not run ({self.unneeded})"
        if self.errors is None:
            return f"compute-sanitizer {self.tool}: not assessed ({self.note})"
        if self.errors == 0:
            return f"compute-sanitizer {self.tool}: no errors"
        shown = "\n    ".join(self.lines[:8])
        return (f"compute-sanitizer {self.tool}: {self.errors} error(s), {WHAT[self.tool]}. "
                f"First report:\n    {shown}")


def parse(tool: str, output: str, returncode: int) -> Finding:
    """Read a compute-sanitizer run's output: the error count and the first error's lines."""
    counts = [int(m.group(1)) for m in _SUMMARY.finditer(output)]
    race = _RACE_SUMMARY.search(output)
    if race:
        counts.append(int(race.group(2)))
    if not counts:
        tail = " | ".join(output.strip().splitlines()[-6:])
        return Finding(tool, None, [], f"no summary from compute-sanitizer, exit code "
                                       f"{returncode}: {tail}")
    errors = max(counts)
    if errors == 0 and returncode == ERROR_EXITCODE:
        errors = 1
    return Finding(tool, errors, _first_report(output) if errors else [])


def _first_report(output: str) -> list[str]:
    """The lines of the first error the tool printed, without host backtraces."""
    lines, started = [], False
    for raw in output.splitlines():
        if not raw.startswith("========="):
            if started:
                break
            continue
        text = raw.lstrip("=").rstrip()
        if not text.strip():
            if started:
                break
            continue
        if _SUMMARY.match(raw) or _RACE_SUMMARY.match(raw):
            break
        if not started:
            if not _FINDING.match(raw) or text.strip().startswith(("Warning", "COMPUTE")):
                continue
            started = True
        if any(noise in raw for noise in _NOISE):
            continue
        lines.append(tidy(text.strip()))
    return lines


def run_tool(tool_path: str, tool: str, exercise, cells: list[dict], timeout: float,
             seed: int | None = None) -> Finding:
    """Run the exercise's small cases for ``cells`` under one compute-sanitizer tool."""
    return sanitize_notebook(tool_path, tool, [exercise.id], cells, timeout, seed)[exercise.id]


def sanitize_notebook(tool_path: str, tool: str, exercise_ids: list[str], cells: list[dict],
                      timeout: float, seed: int | None = None,
                      seconds: dict[str, float] | None = None,
                      on_event=None, mode: str = "gpu") -> dict[str, Finding]:
    """:func:`sanitize_notebooks` for one notebook (its kernel cache: the environment's)."""
    times: list[dict[str, float]] = [{}]
    (findings,) = sanitize_notebooks(tool_path, tool, [(exercise_ids, cells, None)], timeout,
                                     seed, times, on_event, mode)
    if seconds is not None:
        seconds.update(times[0])
    return findings


def sanitize_notebooks(tool_path: str, tool: str, notebooks: list, timeout: float,
                       seed: int | None = None, seconds: list[dict[str, float]] | None = None,
                       on_event=None, mode: str = "gpu") -> list[dict[str, Finding]]:
    """Run the small cases of the notebooks' exercises (each notebook as
    :data:`grader.job_units.Notebook`) under one tool, the notebooks in turn, in as few
    processes as it takes (see :mod:`grader.session`); for each notebook, one
    :class:`Finding` per exercise, from the part of the tool's report between the runner's
    markers for that exercise, and in ``seconds`` the time each took."""
    from grader.job_units import job_exercises, per_notebook
    from grader.session import exercise_seconds, run_exercises

    job = {"mode": mode, "action": "sanitize", "tool": tool, "seed": seed,
           **job_exercises(notebooks)}
    attempts = run_exercises(job, timeout, wrap=lambda n, d: (command(tool_path, tool), {}),
                             on_event=on_event)
    if seconds is not None:
        for k, times in enumerate(per_notebook(exercise_seconds(attempts), len(notebooks))):
            seconds[k].update(times)
    findings: dict[str, Finding] = {}  # by the name in the job
    for attempt in attempts:
        parts = split_by_exercise(attempt.output)
        blamed = [x for x in (attempt.crashed, attempt.timed_out) if x]
        unneeded = dict(e["unneeded"] for e in attempt.events if "unneeded" in e)
        for name in attempt.started() or blamed:
            if name in unneeded and name not in blamed:
                findings[name] = Finding(tool, 0, [], unneeded=unneeded[name])
            elif name == attempt.timed_out:
                findings[name] = Finding(tool, None, [], f"did not finish within {timeout:g} s")
            elif name in parts:
                findings[name] = parse_part(tool, parts[name])
            else:  # it ended before the exercise's tests began: the summary tells
                findings[name] = parse(tool, attempt.output, attempt.returncode)
    for name in job["exercise_ids"]:
        findings.setdefault(name, Finding(tool, None, [], "the exercise did not run"))
    return per_notebook(findings, len(notebooks))


def split_by_exercise(output: str) -> dict[str, str]:
    """The tool's output cut at the runner's begin markers: each exercise's part runs to the
    next exercise's begin (reports that come after the end marker still belong to it)."""
    from grader.runner import MARKER

    parts: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(f"{MARKER} begin "):
            current = line.split()[-1]
            parts[current] = []
        elif current and not line.startswith(MARKER):
            parts[current].append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def parse_part(tool: str, text: str) -> Finding:
    """The findings in one exercise's part of the report (no summary line of its own)."""
    lines = _first_report(text)
    starts = [m.group(1) for m in map(_FINDING.match, text.splitlines()) if m]
    errors = [t for t in starts if not t.startswith(("Warning", "Target application"))
              and not any(noise in t for noise in _NOISE)]
    return Finding(tool, len(errors), lines if errors else [])


def apply_sanitizers(result, exercise, cells: list[dict], mode: str, timeout: float,
                     seed: int | None = None) -> list[Finding]:
    """In gpu mode, run the selected tools on a graded exercise; a tool's error fails it.

    Runs for exercises whose kernels ran to the end (passed, or wrong output); adds
    one message per tool with findings, or one note when compute-sanitizer is absent.
    """
    if mode != "gpu" or result.status not in (PASSED, FAILED):
        return []
    tools = selected_tools()
    if not tools:
        return []
    tool_path = find_tool()
    if tool_path is None:
        result.messages.append(MISSING)
        return []
    findings = [run_tool(tool_path, tool, exercise, cells, timeout, seed) for tool in tools]
    apply_findings(result, findings)
    return findings


MISSING = ("compute-sanitizer: not found, so the memory, race and barrier checks were skipped "
           "(install the CUDA toolkit, or put compute-sanitizer on PATH)")


def qualifies(result) -> bool:
    """Whether the tools' findings count for this result: its kernels ran to the end."""
    return result.status in (PASSED, FAILED)


def apply_findings(result, findings: list[Finding]) -> None:
    """Add the tools' findings to a graded exercise; an error fails it. A tool that did not
    run, having nothing to check, says why."""
    ran = [f for f in findings if not f.unneeded]
    for finding in findings:
        if finding.errors != 0 or finding.unneeded:
            result.messages.append(finding.message())
    if any(f.errors for f in ran):
        result.status, result.score = FAILED, 0.0
    elif ran and all(f.errors == 0 for f in ran):
        result.messages.append(
            f"compute-sanitizer: no errors ({', '.join(f.tool for f in ran)})")
