"""Metric grading on a GPU: profile the student's kernel and the reference solution
in the same run with Nsight Compute, then apply the exercise's :class:`MetricRule` s.

A notebook is profiled in one ncu run (:func:`profile_notebook`, run by the grading
pipeline's profile stage, :mod:`grader.stages.profile`): one process executes the
student's cells and the reference solution's side by side and makes each exercise's
profiling launches for both, each behind a marker kernel that separates the segments in
the report. :func:`assess` profiles one exercise alone
(``grader profile`` and ``benchmarks/metric_rules.py``).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import asdict
from pathlib import Path

from grader import exercises as catalogue
from grader import ncu, reference_profiles
from grader.metric_rules import FAILED, format_outcome
from grader.ncu import NotAssessed, read_metrics
from grader.notebook import load
from grader.runner import MARKER_KERNEL
from grader.session import exercise_seconds, run_exercises

PROFILE_TIMEOUT = 600.0  # seconds an exercise's profiling may take under ncu


def metric_names(exercises) -> list[str]:
    return sorted({rule.metric for ex in exercises for rule in ex.metric_rules})


def profiled_kernels(exercise) -> list[str]:
    return list(exercise.profile_kernels or (exercise.entry,))


def profile_cells(exercise, cells, workdir: Path, label: str,
                  timeout: float = PROFILE_TIMEOUT) -> dict[str, float]:
    """Run the exercise's profile launch for ``cells`` under ncu; return its metrics."""
    found, reasons, _ = profile_programs([exercise], [(label, None, cells)], timeout,
                                         workdir / label)
    if label not in found.get(exercise.id, {}):
        raise NotAssessed(reasons.get(exercise.id, "nothing was profiled"))
    return found[exercise.id][label]


def reference_cells(exercise) -> list[dict]:
    path = catalogue.solution_notebook(exercise.lesson)
    if path is None:
        raise NotAssessed(f"no reference solution notebook for {exercise.lesson}")
    return [asdict(c) for c in load(path).program_for(exercise.id)]


def assess(exercise, student_cells: list[dict], mode: str, keep: Path | None = None) -> dict:
    """Metric section of an exercise result: one outcome per rule."""
    rules = exercise.metric_rules
    if mode != "gpu":
        return not_assessed(exercise, "simulator mode has no hardware counters")
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        workdir = keep or Path(tmp)
        try:
            student = profile_cells(exercise, student_cells, workdir, "student")
            reference = profile_cells(exercise, reference_cells(exercise), workdir, "reference")
        except NotAssessed as exc:
            return not_assessed(exercise, str(exc))
    outcomes = [r.evaluate(student[r.metric], reference[r.metric]) for r in rules]
    return {"rules": outcomes, "student": student, "reference": reference}


def not_assessed(exercise, reason: str) -> dict:
    return {"rules": [r.not_assessed(reason) for r in exercise.metric_rules]}


def profile_notebook(exercises, student_cells: list[dict], timeout: float = PROFILE_TIMEOUT,
                     seconds: dict[str, float] | None = None,
                     on_event=None) -> dict[str, dict]:
    """Metric sections of ``exercises`` (in notebook order) from one ncu run over the
    student's cells and the reference solution's."""
    if not exercises:
        return {}
    lesson = exercises[0].lesson
    solution = catalogue.solution_notebook(lesson)
    if solution is None:
        reason = f"no reference solution notebook for {lesson}"
        return {ex.id: not_assessed(ex, reason) for ex in exercises}
    reference = [asdict(c) for c in load(solution).program_for(exercises[-1].id)]
    programs = [("student", None, student_cells), ("reference", None, reference)]
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        found, reasons, attempts = profile_programs(exercises, programs, timeout, Path(tmp),
                                                    on_event)
    if seconds is not None:
        seconds.update(exercise_seconds(attempts))
    sections = {}
    for ex in exercises:
        runs = found.get(ex.id, {})
        if {"student", "reference"} <= set(runs):
            sections[ex.id] = {"rules": [r.evaluate(runs["student"][r.metric],
                                                    runs["reference"][r.metric])
                                         for r in ex.metric_rules], **runs}
        else:
            sections[ex.id] = not_assessed(ex, reasons.get(ex.id, "nothing was profiled"))
    return sections


REPORT = "profile.ncu-rep"  # each attempt's report, in its folder of the work directory


def profile_programs(exercises, programs, timeout: float, workdir: Path, on_event=None):
    """Profile ``exercises`` (in notebook order) for each of ``programs`` (see
    :func:`grader.runner.job_programs`) in one ncu run, or one more per crash.

    Returns ``(found, reasons, attempts)``: ``found[exercise id][label]`` holds the metrics
    of the exercise's profiled launch in that program, ``reasons[exercise id]`` why one is
    missing; attempt k's report is ``workdir/k/profile.ncu-rep``."""
    metrics = metric_names(exercises)
    kernels = sorted({k for ex in exercises for k in profiled_kernels(ex)} | {MARKER_KERNEL})
    job = {"mode": "gpu", "action": "profile", "exercise_ids": [ex.id for ex in exercises],
           "programs": [list(p) for p in programs]}

    def under_ncu(number: int, folder: Path):
        report = folder / REPORT
        return ncu.command(kernels, metrics, report), {"report": report}

    found: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    try:
        attempts = run_exercises(job, timeout, wrap=under_ncu, workdir=workdir,
                                 on_event=on_event)
    except NotAssessed as exc:
        return {}, {ex.id: str(exc) for ex in exercises}, []
    for attempt in attempts:
        _read_attempt(attempt, exercises, metrics, kernels, timeout, found, reasons)
    return found, reasons, attempts


def _read_attempt(attempt, exercises, metrics, kernels, timeout, found, reasons) -> None:
    """Split one ncu report into its segments and keep each exercise's profiled launch."""
    by_id = {ex.id: ex for ex in exercises}
    for event in attempt.events:
        if "stored" in event:  # a reference profile measured before (grader.reference_profiles)
            exercise_id, who = event["stored"]
            found.setdefault(exercise_id, {})[who] = event["metrics"]
        for key in ("skipped", "failed"):
            if key in event:
                exercise_id, who = event[key]
                reasons[exercise_id] = f"the {who}'s profiling launch failed: {event['why']}"
    for blamed in (attempt.timed_out, attempt.crashed):
        if blamed:
            reasons[blamed] = (f"ncu did not finish within {timeout:g} s" if blamed ==
                               attempt.timed_out else f"the profiled process crashed "
                               f"({attempt.how_it_ended()}): {attempt.tail(4)}")
    if attempt.crashed and not attempt.started():  # ncu may have stopped before the program
        try:
            ncu.check_output(attempt.output, attempt.extra["report"], kernels)
        except NotAssessed as exc:
            reasons[attempt.crashed] = str(exc)
    segments = [e["segment"] for e in attempt.events if "segment" in e]
    if not segments:
        return
    try:
        report = ncu.check_output(attempt.output, attempt.extra["report"], kernels)
        launches = read_metrics(report, metrics)
    except NotAssessed as exc:
        for exercise_id, *_ in segments:
            reasons.setdefault(exercise_id, str(exc))
        return
    for segment, part in zip(segments, split_segments(launches)):
        exercise_id, who = segment[:2]
        launch = profiled_launch(by_id[exercise_id], part, segment_skip(segment))
        if launch is not None:
            found.setdefault(exercise_id, {})[who] = launch
        else:
            reasons.setdefault(exercise_id, f"ncu profiled no launch of "
                                            f"{kernel_pattern(by_id[exercise_id]).pattern} "
                                            f"for the {who}")
    for event in attempt.events:
        if "store_as" in event:
            exercise_id, who, key = event["store_as"]
            launch = found.get(exercise_id, {}).get(who)
            if launch is not None:
                kept = {"kernel", *metric_names([by_id[exercise_id]])}
                reference_profiles.store(key, {k: v for k, v in launch.items() if k in kept})


def kernel_pattern(exercise) -> re.Pattern:
    """The names ncu gives the exercise's profiled kernels (numba's ``name[abi...]``)."""
    return re.compile(r"^(" + "|".join(profiled_kernels(exercise)) + r")\[")


# Reports made while the profile functions' warm-up launches were inside ncu's profiled range
# (before grader.launch.unprofiled) hold, in every segment, one warm-up launch of the
# exercise's kernels before the measured one: every exercise's profile_skip was 1 then (the
# default; none declared another). Their segment events, ``[exercise id, label]``, have no
# third field; the reports under tests/fixtures/ncu/ and the records of
# benchmarks/results/*/metric_rules-*.json up to 2026-11-26 are such reports.
WARM_UPS_PROFILED_SKIP = 1


def segment_skip(segment) -> int:
    """How many launches of the exercise's kernels come before the measured one in the
    report's segment whose event is ``segment``: ``[exercise id, label, skip]``, or
    ``[exercise id, label]`` from a report made with the warm-ups profiled."""
    return int(segment[2]) if len(segment) > 2 else WARM_UPS_PROFILED_SKIP


def profiled_launch(exercise, segment: list[dict], skip: int | None = None) -> dict | None:
    """The launch a segment measures for the exercise: its kernels' launch after ``skip``
    others (default: the exercise's ``profile_skip``), or None."""
    skip = exercise.profile_skip if skip is None else skip
    pattern = kernel_pattern(exercise)
    matching = [launch for launch in segment if pattern.match(launch["kernel"])]
    return matching[skip] if len(matching) > skip else None


def split_segments(launches: list[dict]) -> list[list[dict]]:
    """Launches grouped by the marker kernel that opens each segment."""
    segments: list[list[dict]] = []
    for launch in launches:
        if launch["kernel"].startswith(MARKER_KERNEL + "["):
            segments.append([])
        elif segments:
            segments[-1].append(launch)
    return segments


METRIC_SHARE = 0.5  # share of an exercise's points that its metric rules carry


def apply_metric_rules(result, exercise, student_cells: list[dict], mode: str) -> None:
    """Add the metric section to a checked exercise; a failed rule costs METRIC_SHARE."""
    if not exercise.metric_rules:
        return
    if not result.passed:
        apply_metrics(result, exercise, not_assessed(exercise, "the output is not correct yet"))
        return
    apply_metrics(result, exercise, assess(exercise, student_cells, mode))


def apply_metrics(result, exercise, section: dict) -> None:
    """Record a metric section in the result; a failed rule costs METRIC_SHARE."""
    result.metrics = section
    if not result.passed:
        return
    result.messages.extend(format_outcome(o) for o in section["rules"])
    if any(o["status"] == FAILED for o in section["rules"]):
        result.status = FAILED
        result.score = exercise.points * (1 - METRIC_SHARE)
