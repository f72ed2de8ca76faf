"""Metric grading on a GPU: profile the student's kernel and the reference solution
in the same run with Nsight Compute, then apply the exercise's :class:`MetricRule` s.

A notebook is profiled in one ncu run (:func:`profile_notebook`, run by the grading
pipeline's profile stage, :mod:`grader.stages.profile`): one process executes the
student's cells and the reference solution's side by side and makes each exercise's
profiling launches for both, each in a segment of ncu's profiled range whose kernels it
records by name; the report is split into segments by those names
(:func:`split_report`), or, where it does not hold exactly the recorded launches, profiled
again with a marker kernel opening each segment. An exercise that fails a rule on time is
measured once more in a run of its own, which decides (:func:`measure_again`). :func:`assess`
profiles one exercise alone (``grader profile`` and ``benchmarks/metric_rules.py``).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import asdict
from pathlib import Path

from grader import exercises as catalogue
from grader import ncu, reference_profiles
from grader.metric_rules import FAILED, NOT_ASSESSED, format_outcome, is_timed
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
    (sections,) = profile_notebooks([(exercises, student_cells, None)], timeout,
                                    [seconds] if seconds is not None else None, on_event)
    return sections


Notebook = tuple[list, list[dict], str | None]  # exercises, program cells, kernel cache folder


def profile_notebooks(notebooks: list[Notebook], timeout: float = PROFILE_TIMEOUT,
                      seconds: list[dict[str, float]] | None = None,
                      on_event=None) -> list[dict[str, dict]]:
    """Metric sections of several notebooks of one lesson (each: its exercises in notebook
    order, its cells, the folder of its kernel cache or None) from one ncu run over their
    cells and the reference solution's; ``seconds``, if given, gets each notebook's time
    by exercise.

    Nsight Compute lets one process at a time profile a GPU, from its first profiled
    launch until it exits: a batch that profiles its notebooks two or three to a run pays
    that exit, and the wait for the next process, once per run. What a shared run cannot
    tell apart is measured again alone (:func:`profile_notebook`): a crash, a hang or an
    unsplit report blamed on an exercise of one notebook never costs another notebook's
    measurement.

    An exercise that fails a rule on time (a duration or a rate) is measured once more, in an
    ncu run of its own over its notebook and the reference, and that second measurement
    decides (:func:`measure_again`): a kernel's duration varies with what else runs on the
    GPU meanwhile (a batch's other workers), and a correct kernel must not lose points to one
    slow measurement. A failed count (instructions, requests) would fail again: no second run."""
    results = _profile_together(notebooks, timeout, seconds, on_event)
    for j, notebook in enumerate(notebooks):
        measure_again(notebook, results[j], timeout,
                      seconds[j] if seconds is not None else None, on_event)
    return results


MEASURED_AGAIN = ("measured again in an ncu run of its own, which decides: the first "
                  "measurement failed {failed} (a kernel's timing varies with what else runs "
                  "on the GPU)")


def failed_rules(section: dict) -> list[str]:
    """The rules a metric section fails, each as "label (ratio x the reference)"."""
    return [f"{o['label']} ({o['ratio']:.2f}x the reference)" if o.get("ratio") is not None
            else o["label"] for o in section.get("rules", ()) if o["status"] == FAILED]


def fails_on_time(section: dict) -> bool:
    """Whether a rule the section fails measures time (a duration or a rate): only such a
    measurement can change when the GPU is less busy; a count fails again."""
    return any(o["status"] == FAILED and is_timed(o["metric"]) for o in section.get("rules", ()))


def measure_again(notebook: Notebook, sections: dict[str, dict], timeout: float,
                  seconds: dict[str, float] | None, on_event=None) -> None:
    """Profile the exercises of ``sections`` that failed a rule on time (:func:`fails_on_time`)
    once more, in one run of their own, and put the new sections in their place with a note
    of the first one's failures (a second run that measured nothing leaves the first
    sections)."""
    exercises, cells, kernels = notebook
    failed = {ex.id: failed_rules(sections[ex.id]) for ex in exercises
              if ex.id in sections and fails_on_time(sections[ex.id])}
    if not failed:
        return
    again_seconds: dict[str, float] = {}
    (again,) = _profile_together([([ex for ex in exercises if ex.id in failed], cells,
                                   kernels)], timeout, [again_seconds], on_event)
    for exercise_id, first in failed.items():
        section = again.get(exercise_id, {})
        if any(o["status"] != NOT_ASSESSED for o in section.get("rules", ())):
            note = MEASURED_AGAIN.format(failed=", ".join(first))
            section["note"] = "; ".join(filter(None, (section.get("note"), note)))
            sections[exercise_id] = section
    if seconds is not None:
        for exercise_id, taken in again_seconds.items():
            seconds[exercise_id] = seconds.get(exercise_id, 0.0) + taken


def _profile_together(notebooks: list[Notebook], timeout: float,
                      seconds: list[dict[str, float]] | None,
                      on_event=None) -> list[dict[str, dict]]:
    """:func:`profile_notebooks`' one shared ncu run, with the alone runs for what it could
    not tell apart, before any failed rule is measured again."""
    order = {ex.id: ex for exercises, _, _ in notebooks for ex in exercises}
    if not order:
        return [{} for _ in notebooks]
    lesson = next(iter(order.values())).lesson
    single = len(notebooks) == 1  # in its notebook's order, else in the lesson's
    exercises = (list(notebooks[0][0]) if single else
                 [ex for ex in catalogue.LESSONS[lesson] if ex.id in order])
    solution = catalogue.solution_notebook(lesson)
    if solution is None:
        reason = f"no reference solution notebook for {lesson}"
        return [{ex.id: not_assessed(ex, reason) for ex in exs} for exs, _, _ in notebooks]
    reference = [asdict(c) for c in load(solution).program_for(exercises[-1].id)]
    labels = ["student"] if single else [f"student {j}" for j in range(len(notebooks))]
    programs = [(label, None if single else [ex.id for ex in exs], cells, kernels)
                for label, (exs, cells, kernels) in zip(labels, notebooks)]
    programs.append(("reference", None, reference, "" if not single else None))
    with tempfile.TemporaryDirectory(prefix="grader-ncu-") as tmp:
        found, reasons, attempts = profile_programs(exercises, programs, timeout, Path(tmp),
                                                    on_event)
    own = {(e[key][0], e[key][1]): f"the student's profiling launch failed: {e['why']}"
           for a in attempts for e in a.events for key in ("skipped", "failed")
           if key in e}  # what a program did to itself
    again = marked_exercises(attempts)
    shared_seconds = exercise_seconds(attempts)
    results = []
    for j, (label, (exs, cells, kernels)) in enumerate(zip(labels, notebooks)):
        sections, alone = {}, []
        for ex in exs:
            runs = found.get(ex.id, {})
            if {label, "reference"} <= set(runs):
                mine = {"student": runs[label], "reference": runs["reference"]}
                sections[ex.id] = {"rules": [r.evaluate(mine["student"][r.metric],
                                                        mine["reference"][r.metric])
                                             for r in ex.metric_rules], **mine}
                if ex.id in again:
                    sections[ex.id]["note"] = PROFILED_AGAIN
            elif not single and (ex.id, label) not in own and "reference" in runs:
                alone.append(ex)  # the shared run failed it: measured alone
            else:
                why = own.get((ex.id, label)) if not single else None
                sections[ex.id] = not_assessed(ex, why or reasons.get(ex.id,
                                                                      "nothing was profiled"))
        mine_seconds = {ex.id: shared_seconds.get(ex.id, 0.0) / len(notebooks) for ex in exs}
        if alone:
            alone_seconds: dict[str, float] = {}
            sections.update(_profile_together([(alone, cells, kernels)], timeout,
                                              [alone_seconds], on_event)[0])
            for exercise_id, taken in alone_seconds.items():
                mine_seconds[exercise_id] += taken
        if seconds is not None:
            seconds[j].update(mine_seconds if not single else shared_seconds)
        results.append({ex.id: sections[ex.id] for ex in exs})
    return results


PROFILED_AGAIN = ("profiled in a second ncu run, with marker kernels: the first run's report "
                  "did not hold the launches recorded in it (same metrics, more time)")


def marked_exercises(attempts) -> set[str]:
    """The exercises measured in a marked run (:func:`profile_programs`' fallback): their
    segment events have three fields, a named segment's four."""
    return {event["segment"][0] for attempt in attempts for event in attempt.events
            if len(event.get("segment", ())) == 3}


REPORT = "profile.ncu-rep"  # each attempt's report, in its folder of the work directory


def ncu_kernels(exercises, markers: bool = False) -> list[str]:
    """The kernels of ncu's filter in a run over ``exercises``: their profiled kernels, and
    the marker kernel where it opens the segments."""
    kernels = {k for ex in exercises for k in profiled_kernels(ex)}
    return sorted(kernels | {MARKER_KERNEL} if markers else kernels)


def profile_programs(exercises, programs, timeout: float, workdir: Path, on_event=None):
    """Profile ``exercises`` (in notebook order) for each of ``programs`` (see
    :func:`grader.runner.job_programs`) in one ncu run, or one more per crash.

    The report is split by the kernels the profiled process recorded launching in each
    segment (:func:`split_report`). The exercises of a report that does not hold exactly
    those launches are profiled again, in a run whose segments each open with the marker
    kernel (one more ncu run, or one per crash).

    Returns ``(found, reasons, attempts)``: ``found[exercise id][label]`` holds the metrics
    of the exercise's profiled launch in that program, ``reasons[exercise id]`` why one is
    missing; attempt k's report is ``workdir/k/profile.ncu-rep`` (the marked run's attempts
    come after the first run's)."""
    found: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    attempts, unsplit = _profile_run(exercises, programs, timeout, workdir, on_event, found,
                                     reasons)
    again = [ex for ex in exercises if ex.id in unsplit]
    if again:
        why = {ex.id: reasons.pop(ex.id) for ex in again if ex.id in reasons}
        for ex in again:
            found.pop(ex.id, None)
        marked, _ = _profile_run(again, programs, timeout, workdir, on_event, found, reasons,
                                 first=len(attempts))
        attempts += marked
        for exercise_id, reason in why.items():  # the marked run measured nothing: why
            if exercise_id not in found:
                reasons.setdefault(exercise_id, reason)
    return found, reasons, attempts


MARKED_RUN = "marked"  # the folder of the marked run's jobs and events in the work directory


def _profile_run(exercises, programs, timeout: float, workdir: Path, on_event, found: dict,
                 reasons: dict, first: int | None = None) -> tuple[list, set[str]]:
    """One ncu run (one more per crash) over ``exercises``, read into ``found`` and
    ``reasons``; with ``first`` (the number of its first report) the segments open with the
    marker kernel. Returns its attempts and the exercises whose launches the report did not
    tell apart."""
    markers = first is not None
    metrics = metric_names(exercises)
    kernels = ncu_kernels(exercises, markers)
    job = {"mode": "gpu", "action": "profile", "exercise_ids": [ex.id for ex in exercises],
           "programs": [list(p) for p in programs], "kernels": kernels, "markers": markers}

    def under_ncu(number: int, folder: Path):
        report = workdir / str(first + number) / REPORT if markers else folder / REPORT
        report.parent.mkdir(parents=True, exist_ok=True)
        return ncu.command(kernels, metrics, report), {"report": report}

    try:
        attempts = run_exercises(job, timeout, wrap=under_ncu, on_event=on_event,
                                 workdir=workdir / MARKED_RUN if markers else workdir)
    except NotAssessed as exc:
        reasons.update({ex.id: str(exc) for ex in exercises})
        return [], set()
    unsplit: set[str] = set()
    for attempt in attempts:
        unsplit |= _read_attempt(attempt, exercises, metrics, kernels, timeout, found, reasons)
    return attempts, unsplit


def _read_attempt(attempt, exercises, metrics, kernels, timeout, found,
                  reasons) -> set[str]:
    """Split one ncu report into its segments and keep each exercise's profiled launch.
    Returns the exercises whose segments the report does not tell apart (it does not hold
    the launches recorded in them; see :func:`split_report`), the blamed one excepted."""
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
        return set()
    try:
        report = ncu.check_output(attempt.output, attempt.extra["report"], kernels)
        launches = read_metrics(report, metrics)
    except NotAssessed as exc:
        for exercise_id, *_ in segments:
            reasons.setdefault(exercise_id, str(exc))
        return set()
    blamed = {attempt.crashed, attempt.timed_out} - {None}
    try:
        parts = split_report(launches, segments, complete=not blamed)
    except UnsplitReport as exc:
        unsplit = {exercise_id for exercise_id, *_ in segments} - blamed
        for exercise_id in unsplit:
            reasons.setdefault(exercise_id, str(exc))
        return unsplit
    for segment, part in zip(segments, parts):
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
    return set()


def kernel_pattern(exercise) -> re.Pattern:
    """The names ncu gives the exercise's profiled kernels (numba's ``name[abi...]``)."""
    return re.compile(ncu.kernel_pattern(*profiled_kernels(exercise)))


# A report's segment events (kept with the report in benchmarks/results/*/metric_rules-*.json)
# say how it is read, by their length:
# * ``[exercise id, label]``: each segment opens with the marker kernel, and holds one warm-up
#   launch of the exercise's kernels before the measured one (the warm-ups were inside ncu's
#   profiled range then, before grader.profiled_range.unprofiled: every exercise's
#   profile_skip was 1, the default; none declared another). The reports under
#   tests/fixtures/ncu/ and the records of benchmarks/results/*/metric_rules-*.json up to
#   2026-11-26 are such reports.
# * ``[exercise id, label, skip]``: each segment opens with the marker kernel; ``skip``
#   launches of the exercise's kernels come before the measured one (the marked run).
# * ``[exercise id, label, skip, kernels]``: no marker; ``kernels`` are the names of the
#   kernels ncu profiled in the segment, as the profiled process recorded launching them.
WARM_UPS_PROFILED_SKIP = 1


def segment_skip(segment) -> int:
    """How many launches of the exercise's kernels come before the measured one in the
    report's segment whose event is ``segment`` (see above)."""
    return int(segment[2]) if len(segment) > 2 else WARM_UPS_PROFILED_SKIP


def segment_kernels(segment) -> list[str] | None:
    """The names of the kernels ncu profiled in the segment whose event is ``segment``, in
    launch order; None for a segment that opens with the marker kernel (see above)."""
    return list(segment[3]) if len(segment) > 3 else None


class UnsplitReport(NotAssessed):
    """ncu's report does not hold the launches recorded in its segments."""


def split_report(launches: list[dict], segments: list, complete: bool = True
                 ) -> list[list[dict]]:
    """A report's launches (in launch order) grouped by segment, one group per segment event
    (in order) where its events name the kernels launched (:func:`segment_kernels`), else by
    the marker kernel (:func:`split_segments`).

    The report's kernels must be exactly the named ones: a launch the process did not record
    (another launch path) or one ncu did not profile would shift every later segment, so a
    report that differs is not split (:class:`UnsplitReport`). Where the process died in a
    segment (``complete`` False; that segment has no event) the report may hold more after
    the named ones: the launches of the segment it died in."""
    named = [segment_kernels(segment) for segment in segments]
    if all(names is None for names in named):
        return split_segments(launches)
    if any(names is None for names in named):
        raise UnsplitReport("the report's segment events mix marked and named segments")
    expected = [name for names in named for name in names]
    got = [launch["kernel"].split("[", 1)[0] for launch in launches]
    if got != expected and (complete or got[:len(expected)] != expected):
        raise UnsplitReport(f"ncu's report does not hold the launches recorded in its "
                            f"segments: {_difference(got, expected)}")
    parts, start = [], 0
    for names in named:
        parts.append(launches[start:start + len(names)])
        start += len(names)
    return parts


def _difference(got: list[str], expected: list[str]) -> str:
    k = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b),
             min(len(got), len(expected)))
    found = got[k] if k < len(got) else "nothing"
    recorded = expected[k] if k < len(expected) else "nothing"
    return (f"{len(got)} launches profiled, {len(expected)} recorded; launch {k + 1} is "
            f"{found} in the report, {recorded} in the record")


def profiled_launch(exercise, segment: list[dict], skip: int | None = None) -> dict | None:
    """The launch a segment measures for the exercise: its kernels' launch after ``skip``
    others (default: the exercise's ``profile_skip``), or None."""
    skip = exercise.profile_skip if skip is None else skip
    pattern = kernel_pattern(exercise)
    matching = [launch for launch in segment if pattern.match(launch["kernel"])]
    return matching[skip] if len(matching) > skip else None


def split_segments(launches: list[dict]) -> list[list[dict]]:
    """Launches grouped by the marker kernel that opens each segment (a marked report)."""
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
    if section.get("note"):  # e.g. PROFILED_AGAIN: the instructor sees why grading was slower
        result.messages.append(section["note"])
    if any(o["status"] == FAILED for o in section["rules"]):
        result.status = FAILED
        result.score = exercise.points * (1 - METRIC_SHARE)
