"""What ``grader batch`` writes for a class: each student's files and the class summary.

Per student (see :mod:`grader.batch` for where they go):

* ``<student>.json`` -- :func:`student_report`, the grader's JSON report plus the
  notebooks that could not be graded or were skipped;
* ``<student>.gradescope.json`` -- :func:`gradescope_results`;
* ``<student>.feedback.md`` -- :func:`feedback_markdown`, for the student: each exercise
  that did not pass, with the grader's messages verbatim.

For the class: :class:`ClassSummary` (``summary.csv``, ``summary.md``): a row per
student, a column per exercise, why each exercise failed and the reasons several
students share. A student's status is one of :data:`STATUSES`; the console and the
summary count them with :func:`describe_students`.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader import report as rep

# a student's status, in the order the counts are given
PASSED, FAILED, PARTLY, NOT_GRADED, SKIPPED, PENDING = (
    "passed", "failed", "partly graded", "not graded", "skipped", "pending")
STATUSES = (PASSED, FAILED, PARTLY, NOT_GRADED, SKIPPED, PENDING)
NO_SCORE = "—"  # the score of a student with nothing graded (never 0/0)


@dataclass
class Entry:
    """The outcome of one submission: a report, an error, or a skip; with its fingerprint."""

    file: str
    fingerprint: str
    report: dict | None = None
    error: str | None = None
    skipped: str | None = None

    @property
    def failed_ids(self) -> list[tuple[str, str]]:
        return [(e["id"], e["status"]) for e in (self.report or {}).get("exercises", [])
                if not e["passed"]]


# ---------------------------------------------------------------------------- one student


def _notebook_report(data: dict):
    from grader.grade import NotebookReport
    from grader.results import ExerciseResult

    return NotebookReport(data["path"], data["lesson"], data["mode"],
                          [ExerciseResult.from_dict(e) for e in data["exercises"]],
                          list(data.get("warnings", [])), data.get("seconds", 0.0))


def student_report(student: str, entries: list[Entry]) -> dict:
    """``<student>.json``: the grader's JSON report of the student's notebooks, plus the
    errors and the skipped notebooks, each with the fingerprint it was graded under."""
    graded = [e for e in entries if e.report is not None]
    data = rep.json_report([_notebook_report(e.report) for e in graded])
    for notebook, entry in zip(data["notebooks"], graded):
        notebook["submission"] = {"file": entry.file, "fingerprint": entry.fingerprint}
    errors = [{"file": e.file, "fingerprint": e.fingerprint, "error": e.error}
              for e in entries if e.error is not None]
    skipped = [{"file": e.file, "fingerprint": e.fingerprint, "reason": e.skipped}
               for e in entries if e.skipped is not None]
    data.update(passed=data["passed"] and bool(graded) and not errors, errors=errors,
                skipped=skipped)
    return {"schema_version": data.pop("schema_version"), "student": student, **data}


def entries_from_report(data: dict) -> list[Entry]:
    """The entries a ``<student>.json`` holds (the inverse of :func:`student_report`)."""
    entries = []
    for notebook in data.get("notebooks", []):
        sub = notebook.get("submission", {})
        report = {k: v for k, v in notebook.items() if k != "submission"}
        entries.append(Entry(sub.get("file", ""), sub.get("fingerprint", ""), report=report))
    entries += [Entry(e["file"], e["fingerprint"], error=e["error"])
                for e in data.get("errors", [])]
    entries += [Entry(e["file"], e["fingerprint"], skipped=e["reason"])
                for e in data.get("skipped", [])]
    return entries


def gradescope_results(entries: list[Entry]) -> dict:
    """Gradescope's ``results.json`` for one student (:func:`grader.report.gradescope_report`),
    with the notebooks that could not be graded or were skipped named in its output."""
    graded = [_notebook_report(e.report) for e in entries if e.report is not None]
    data = rep.gradescope_report(graded)
    problems = [f"{e.file or 'submission'}: {e.error}" for e in entries if e.error is not None]
    problems += [f"{e.file or 'submission'}: skipped ({e.skipped})" for e in entries
                 if e.skipped is not None]
    if problems:
        data["output"] = "\n".join([data["output"] if graded else "", "not graded:",
                                    *problems]).lstrip()
    data["output_format"] = "text"  # Gradescope renders the top-level output as HTML
    return data


def student_status(entries: list[Entry], pending: int) -> str:
    """One of :data:`STATUSES` for a student's entries (``pending`` still to come)."""
    if pending:
        return PENDING
    graded = [e for e in entries if e.report is not None]
    if any(e.error is not None for e in entries):
        return PARTLY if graded else NOT_GRADED
    if not graded:
        return SKIPPED if entries else NOT_GRADED
    return PASSED if all(e.report["passed"] for e in graded) else FAILED


def describe_students(statuses: Iterable[str]) -> str:
    """``"2 passed, 1 failed, 1 not graded"``: the students counted by status (the words of
    the summary's first line and of ``grader batch``'s last)."""
    statuses = list(statuses)
    counts = [(statuses.count(s), s) for s in STATUSES]
    return ", ".join(f"{n} {s}" for n, s in counts if n) or "no students"


def failure_reason(result: dict) -> str:
    """The message that says why an exercise did not pass: its failing test's message, or
    (when every test passed) the later phase that failed it: a compute-sanitizer tool,
    the simulator pass, a metric rule."""
    messages = result.get("messages") or []
    if not messages:
        return result["status"]
    failing_case = any(c.get("status") != "passed" for c in result.get("cases", []))
    if failing_case or result["status"] != "failed":
        return messages[0]
    return next((m for m in messages if _LATER_FAILURE.search(first_line(m))), messages[0])


# a compute-sanitizer finding, the simulator pass's verdict, a failed metric rule
_LATER_FAILURE = re.compile(r"\d+ error\(s\)|: (failed|error)\b")


def feedback_markdown(student: str, entries: list[Entry]) -> str:
    """``<student>.feedback.md``: the student's points per exercise, then each exercise that
    did not pass with the grader's messages as the notebook's check shows them."""
    from grader.results import ExerciseResult

    graded = [e for e in entries if e.report is not None]
    lines = [f"# Feedback for {student}", ""]
    if graded:
        score = sum(e.report["score"] for e in graded)
        max_score = sum(e.report["max_score"] for e in graded)
        mode = ", ".join(sorted({e.report["mode"] for e in graded}))
        lines += [f"Score: {score:g} of {max_score:g} points ({mode} mode).", ""]
    for entry in graded:
        results = entry.report["exercises"]
        lines += [f"## {_md(entry.file)}", "", "| exercise | result | points |",
                  "| --- | --- | --- |"]
        lines += [f"| {r['id']} | {r['status']} | {r['score']:g}/{r['max_score']:g} |"
                  for r in results]
        failed = [r for r in results if not r["passed"]]
        if not failed:
            lines += ["", "Every exercise passed."]
        for result in failed:
            lines += ["", f"### {result['id']}: {result['status']}", "",
                      _fenced(ExerciseResult.from_dict(result).summary())]
        lines.append("")
    for entry in entries:
        if entry.error is not None:
            lines += [f"## {_md(entry.file or 'submission')}: not graded", "",
                      _fenced(entry.error), ""]
        elif entry.skipped is not None:
            lines += [f"## {_md(entry.file)}: skipped", "", _md(entry.skipped), ""]
    if not entries:
        lines += ["Nothing was graded yet.", ""]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- the class


def _exercise_columns(rows: dict[str, dict[str, dict]]) -> list[str]:
    """Every exercise graded for someone, in the catalogue's (lesson, notebook) order."""
    from grader.exercises import LESSONS

    seen = {i for exercises in rows.values() for i in exercises}
    ordered = [e.id for lesson in LESSONS.values() for e in lesson if e.id in seen]
    return ordered + sorted(seen - set(ordered))


def _best_results(entries: list[Entry]) -> dict[str, dict]:
    """Each exercise's result for a student (the best one, if two notebooks grade it)."""
    best: dict[str, dict] = {}
    for entry in entries:
        for result in (entry.report or {}).get("exercises", []):
            held = best.get(result["id"])
            if held is None or (result["score"], result["passed"]) > (held["score"],
                                                                       held["passed"]):
                best[result["id"]] = result
    return best


def _points(columns: list[str], best: dict[str, dict[str, dict]]) -> dict[str, float]:
    """Each column's points, as the results report them (the catalogue's ``points``)."""
    points = {}
    for exercise_id in columns:
        points[exercise_id] = max(r[exercise_id]["max_score"] for r in best.values()
                                  if exercise_id in r)
    return points


@dataclass
class ClassSummary:
    """The summary tables: one row per student, one column per exercise. A student's total
    is out of every column's points: an exercise graded for others but not for them
    (a notebook missing or not graded) counts as 0."""

    mode: str
    students: list[str]
    entries: dict[str, list[Entry]]
    pending: dict[str, int]

    def rows(self) -> tuple[list[str], list[dict]]:
        best = {s: _best_results(self.entries.get(s, [])) for s in self.students}
        columns = _exercise_columns(best)
        points = _points(columns, best)
        rows = []
        for student in self.students:
            entries = self.entries.get(student, [])
            results = best[student]
            rows.append({
                "student": student,
                "status": student_status(entries, self.pending.get(student, 0)),
                "graded": any(e.report is not None for e in entries),
                "score": sum(r["score"] for r in results.values()),
                "max_score": sum(points.values()),
                "results": results,
                "errors": [e for e in entries if e.error is not None],
                "skipped": [e for e in entries if e.skipped is not None],
            })
        return columns, rows

    def csv(self) -> str:
        """A row per student: status, score (empty when nothing is graded), errors, then
        score and status per exercise."""
        columns, rows = self.rows()
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["student", "status", "score", "max_score", "errors"]
                        + [c for i in columns for c in (i, f"{i} status")])
        for row in rows:
            cells = []
            for exercise_id in columns:
                result = row["results"].get(exercise_id)
                cells += ([f"{result['score']:g}", result["status"]] if result else ["", ""])
            score = ([f"{row['score']:g}", f"{row['max_score']:g}"] if row["graded"]
                     else ["", ""])
            writer.writerow([row["student"], row["status"], *score,
                             "; ".join(f"{e.file or 'submission'}: {first_line(e.error)}"
                                       for e in row["errors"]), *cells])
        return buffer.getvalue()

    def markdown(self) -> str:
        """The table, why each exercise failed (who, and the :func:`headline` of the reason),
        the reasons several students share, what could not be graded, who is pending."""
        columns, rows = self.rows()
        points = _points(columns, {r["student"]: r["results"] for r in rows})
        lines = ["# Class results", "",
                 f"{len(rows)} students ({self.mode} mode): "
                 f"{describe_students(r['status'] for r in rows)}.", ""]
        if columns:
            lines += ["Points: " + ", ".join(f"{i} {p:g}" for i, p in points.items())
                      + f" (total {sum(points.values()):g}).", ""]
        lines += ["| " + " | ".join(["student", "status", "score", *columns]) + " |",
                  "|" + " --- |" * (3 + len(columns))]
        for row in rows:
            cells = []
            for exercise_id in columns:
                result = row["results"].get(exercise_id)
                if result is None:
                    cells.append("")
                elif result["passed"]:
                    cells.append(f"{result['score']:g}/{result['max_score']:g}")
                else:
                    cells.append(f"**{result['score']:g}/{result['max_score']:g} "
                                 f"{result['status']}**")
            score = (f"{row['score']:g}/{row['max_score']:g}" if row["graded"] else NO_SCORE)
            lines.append("| " + " | ".join([_md(row["student"]), row["status"], score, *cells])
                         + " |")
        lines += self._why(columns, rows) + self._common(columns, rows)
        errors = [(r["student"], e) for r in rows for e in r["errors"]]
        if errors:
            lines += ["", "## Not graded", ""]
            lines += [f"- {_md(student)}, {_md(e.file or 'submission')}: "
                      f"{_code(first_line(e.error))}" for student, e in errors]
        skipped = [(r["student"], e) for r in rows for e in r["skipped"]]
        if skipped:
            lines += ["", "## Skipped", ""]
            lines += [f"- {_md(student)}, {_md(e.file)}: {_md(e.skipped)}"
                      for student, e in skipped]
        pending = [r["student"] for r in rows if r["status"] == PENDING]
        if pending:
            lines += ["", "## Pending", "", ", ".join(_md(s) for s in pending)]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _why(columns: list[str], rows: list[dict]) -> list[str]:
        lines = ["", "## Why exercises failed", ""]
        failures = False
        for exercise_id in columns:
            graded = [r for r in rows if exercise_id in r["results"]]
            failed = [r for r in graded if not r["results"][exercise_id]["passed"]]
            if not failed:
                continue
            failures = True
            lines += [f"### {exercise_id}: {len(failed)} of {len(graded)} failed", ""]
            for row in failed:
                result = row["results"][exercise_id]
                lines.append(f"- {_md(row['student'])} ({result['status']}, "
                             f"{result['score']:g}/{result['max_score']:g}): "
                             f"{_code(headline(failure_reason(result)))}")
            lines.append("")
        if not failures:
            lines += ["Nobody failed an exercise.", ""]
        return lines[:-1]

    @staticmethod
    def _common(columns: list[str], rows: list[dict]) -> list[str]:
        """Failure reasons that two or more students share (the reason's headline, numbers
        and seeds aside: the same bug fails the same test with other values)."""
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for exercise_id in columns:
            for row in rows:
                result = row["results"].get(exercise_id)
                if result is None or result["passed"]:
                    continue
                reason = headline(failure_reason(result), limit=None)
                groups.setdefault((exercise_id, _shape(reason)), []).append(
                    (row["student"], headline(reason)))
        shared = sorted(((k, v) for k, v in groups.items() if len(v) > 1),
                        key=lambda item: (-len(item[1]), columns.index(item[0][0])))
        lines = ["", "## Common failure reasons", ""]
        if not shared:
            return lines + ["No failure reason is shared by two or more students."]
        for (exercise_id, _), members in shared:
            names = ", ".join(_md(student) for student, _ in members)
            lines.append(f"- **{exercise_id}**, {len(members)} students ({names}): "
                         f"{_code(members[0][1])}")
        return lines


_SEED = re.compile(r"\s*\[seed \d+\]")
_NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")


def _shape(reason: str) -> str:
    """A reason with its seed dropped and every number written N (for grouping)."""
    return _NUMBER.sub("N", _SEED.sub("", reason))


def headline(message: str, limit: int | None = 200) -> str:
    """What a message says before its details: its lines up to the first that is indented
    (a source line, a report), parenthesised (a derivation) or the seed's rerun note, on one
    line, cut to ``limit`` characters. "expected 8, got 2." and the diagnosis on the next
    line ("It equals the sum of the first 6 elements only.") stay together."""
    lines = []
    for line in message.splitlines():
        if lines and (line[:1].isspace() or line.startswith(("(", "seed "))):
            break
        if line.strip():
            lines.append(line.strip())
    return first_line(" ".join(lines), limit)


def first_line(text: str | None, limit: int | None = 200) -> str:
    """The first line of ``text`` that is not blank, cut to ``limit`` characters."""
    line = next((s for s in (text or "").splitlines() if s.strip()), "")
    return line if limit is None or len(line) <= limit else line[: limit - 3] + "..."


def _md(text: str) -> str:
    """Plain text for a markdown table cell or heading."""
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    """``text`` as an inline code span, verbatim (brackets, angle brackets, underscores)."""
    ticks = max((len(run) for run in re.findall(r"`+", text)), default=0) + 1
    pad = " " if text.startswith("`") or text.endswith("`") or ticks > 1 else ""
    return f"{'`' * ticks}{pad}{text}{pad}{'`' * ticks}"


def _fenced(text: str) -> str:
    """``text`` as a fenced code block, verbatim (the fence outgrows any run of backticks)."""
    ticks = max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{'`' * ticks}text\n{text}\n{'`' * ticks}"


# ---------------------------------------------------------------------------- files


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
