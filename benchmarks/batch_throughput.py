"""Throughput of ``grader batch``: a class of solution copies, some with planted bugs.

    python benchmarks/batch_throughput.py --out OUT_DIR [--copies 20] [--buggy 5]
        [--workers N] [--profile-workers N]
        [--compare SETTING [SETTING ...] [--rounds K] | --compare-workers N [N ...]]
        [--mode auto|sim|gpu]
        [--lessons 02_reduction ...] [-e EXERCISE_ID ...] [--no-metrics]
        [--no-sanitizers] [--timeout S]

Builds a class in a temporary folder: COPIES students, each handing in the solution
notebook of every lesson in LESSONS (one folder per student, as nbgrader's
``submitted/<student>/`` holds them); in BUGGY of them one exercise carries a bug the
test suite plants (the buggy variants of grader/exercises/<lesson>/variants/, applied
as ``benchmarks/buggy_variants.py`` applies them). Grades the class with
:func:`grader.batch.grade_class` on the local cluster (sized by
:mod:`grader.batch_cluster` from this machine, or ``--workers``), the way ``grader batch``
does, and records in OUT_DIR/batch_throughput.json and .md: wall time (cluster start
included), exercises per minute, workers (and the default for this machine), device,
CPU-seconds per exercise by grading phase (:mod:`usage_sampling`; the exact total from
the operating system beside the sampled phases), GPU utilisation and memory (NVML or
nvidia-smi, where present), and each student's verdict (clean copies must pass
everything, a planted bug must fail its exercise). Exit code 1 if a verdict is wrong.
The graded reports stay in OUT_DIR/grades/.

``--workers N`` and ``--profile-workers N`` (profile workers per GPU) are those of
``grader batch``. ``--compare default workers=4 profile-workers=2,workers=6`` grades the
same class once per setting (``default``, or a comma-separated list of ``workers=N`` and
``profile-workers=N``): each run in OUT_DIR/<setting>/ (``=`` written ``-``, ``,`` ``_``:
OUT_DIR/workers-4/), written as it finishes, and the comparison in OUT_DIR/compare.json
and .md. With ``--rounds K`` every setting runs K times, the settings taken in turn in
each round (the machine's speed drifts: on an H100 machine the same code graded 117-140
exercises a minute over five calls, later runs of a call often faster, so settings run once
each are not comparable), each run in OUT_DIR/<setting>/round-<k>/, and the comparison gives each
setting's median and every round. ``--compare-workers 4 8`` is ``--compare default
workers=4 workers=8``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import buggy_variants  # noqa: E402  (beside this script: the planted bugs)

from grader.exercises import LESSONS as CATALOGUE  # noqa: E402

LESSONS = tuple(CATALOGUE)


def build_class(folder: Path, lessons: list[str], copies: int, buggy: int, mode: str,
                exercises: list[str]) -> dict[str, dict | None]:
    """``folder/student<k>/<lesson>.ipynb`` for each copy; returns each student's planted
    bug (None for a clean copy). Bugs go to evenly spaced students, cycling through the
    variants of the chosen lessons (in gpu mode, those the GPU's own checks catch)."""
    bugs = [v for v in buggy_variants.variants(False) if v["lesson"] in lessons
            and (not exercises or v["exercise"] in exercises)
            and not (mode == "gpu" and "sim_only" in v["marks"])]
    if buggy and not bugs:
        raise SystemExit("no planted bug applies to the chosen lessons and exercises")
    chosen = [round(i * copies / buggy) for i in range(buggy)] if buggy else []
    students: dict[str, dict | None] = {}
    scratch = folder.parent / "planting"
    scratch.mkdir()
    for k in range(copies):
        student = f"student{k:02d}"
        (folder / student).mkdir(parents=True)
        bug = bugs[chosen.index(k) * len(bugs) // buggy] if k in chosen else None
        for lesson in lessons:
            target = folder / student / f"{lesson}.ipynb"
            if bug and bug["lesson"] == lesson:
                shutil.move(buggy_variants.planted_notebook(bug, scratch), target)
            else:
                shutil.copy(next((ROOT / "solutions" / lesson).glob("*.ipynb")), target)
        students[student] = bug
    return students


def _report(path: Path) -> dict:
    """A student's report; an empty one where the run was interrupted before it."""
    if path.exists():
        return json.loads(path.read_text())
    return {"score": 0, "max_score": 0, "errors": [{"error": "not graded (interrupted)"}]}


def verdict(report: dict, bug: dict | None, metrics: bool = False) -> dict:
    """A student's row: right when a clean copy passes everything and a planted bug fails its
    exercise; with ``metrics`` (gpu mode), also only when every metric rule of a passed
    exercise was assessed (a profile stage that measured nothing passes every exercise)."""
    exercises = [e for nb in report.get("notebooks", []) for e in nb["exercises"]]
    failed = sorted(e["id"] for e in exercises if not e["passed"])
    unmeasured = sorted(e["id"] for e in exercises if metrics and e["passed"]
                        and any(r["status"] == "not assessed"
                                for r in (e.get("metrics") or {}).get("rules", [])))
    row = {"score": report.get("score"), "max_score": report.get("max_score"),
           "failed": failed, "errors": [e["error"][:200] for e in report.get("errors", [])],
           "unmeasured": unmeasured}
    if bug is None:
        row.update(planted=None, ok=not failed and not row["errors"] and not unmeasured)
    else:
        row.update(planted=f"{bug['exercise']}: {bug['bug']}",
                   ok=bug["exercise"] in failed and not unmeasured,
                   also_failed=[i for i in failed if i != bug["exercise"]])
    return row


def device(mode: str) -> dict:
    if mode != "gpu":
        return {"name": "CUDA simulator", "gpus": 0}
    from workbook.bench import device_name
    from workbook.mode import gpu_count

    return {"name": device_name(), "gpus": gpu_count()}


PHASES = ("check", "memcheck", "racecheck", "synccheck", "simulator", "profile", "worker",
          "other")


def cpu_section(by_phase: dict, total: float, client: float, exercises: int) -> dict:
    """CPU seconds in all and per exercise: the exact total of the batch's processes, the
    sampled split by phase (its sum falls short of the total by what sampling missed),
    and this process (the Dask client and scheduler)."""
    per = (lambda seconds: round(seconds / exercises, 2)) if exercises else (lambda _: None)
    sampled = sum(p["cpu_seconds"] for p in by_phase.values())
    return {"total_seconds": round(total, 2), "per_exercise": per(total),
            "sampled_seconds": round(sampled, 2),
            "sampled_share": round(sampled / total, 3) if total else None,
            "client_seconds": round(client, 2), "client_per_exercise": per(client),
            "by_phase": {name: {**entry, "per_exercise": per(entry["cpu_seconds"])}
                         for name, entry in by_phase.items()}}


def cpu_line(cpu: dict) -> str:
    phases = sorted(cpu["by_phase"].items(), key=lambda item: PHASES.index(item[0])
                    if item[0] in PHASES else len(PHASES))
    split = ", ".join(f"{name} {entry['per_exercise']}" for name, entry in phases)
    return (f"CPU: {cpu['per_exercise']} core-seconds per exercise in the batch's processes "
            f"({split}; sampled {cpu['sampled_share']:.0%} of it), {cpu['client_per_exercise']}"
            f" in the client" if cpu["per_exercise"] is not None else "CPU: no exercise graded")


def gpu_line(gpu: dict) -> str:
    if not gpu.get("measured"):
        return f"GPU: not measured ({gpu.get('reason', 'no samples')})"
    return "GPU: " + "; ".join(
        f"GPU {i} busy {g['mean_utilisation_pct']}% on average (peak {g['max_utilisation_pct']}"
        f"%), memory used up to {g['max_memory_used_mib']:.0f} MiB (before: "
        f"{g['memory_used_before_mib']:.0f} MiB)" for i, g in gpu["gpus"].items())


def table(record: dict) -> str:
    lines = [f"{record['device']['name']} ({record['device']['gpus']} GPUs), "
             f"{record['date']}, {record['mode']} mode, {record['workers']} workers "
             f"(default here: {record['default_workers']}; {record['machine']['cores']} cores):"
             f" {record['exercises']} exercises in {record['notebooks']} notebooks graded in "
             f"{record['wall_seconds']:.1f} s = **{record['exercises_per_minute']:.1f} "
             f"exercises/min** ({record['notebooks_per_minute']:.2f} notebooks/min)", "",
             cpu_line(record["cpu"]), "", gpu_line(record["gpu"]), "",
             "| student | planted bug | score | failed | verdict |",
             "| --- | --- | --- | --- | --- |"]
    for name, row in record["students"].items():
        unmeasured = [f"{i} (metric rules not assessed)" for i in row.get("unmeasured", [])]
        failures = ", ".join(row["failed"] + row["errors"] + unmeasured)
        lines.append(f"| {name} | {row['planted'] or ''} | {row['score']:g}/"
                     f"{row['max_score']:g} | {failures} | "
                     f"{'ok' if row['ok'] else '**WRONG**'} |")
    return "\n".join(lines) + "\n"


def measure(submitted: Path, out: Path, bugs: dict, mode: str, options,
            workers: int | None, profile_workers: int = 0) -> dict:
    """Grade the class in ``submitted`` into ``out/grades`` and record the run in ``out``."""
    from rich.console import Console
    from usage_sampling import (
        GpuSampler,
        ProcessSampler,
        children_cpu_seconds,
        self_cpu_seconds,
    )

    from grader.batch import grade_class
    from grader.batch_cluster import Machine, default_workers

    out.mkdir(parents=True, exist_ok=True)
    grades = out / "grades"
    shutil.rmtree(grades, ignore_errors=True)  # a fresh measurement: nothing to reuse
    machine = Machine.detect(mode)
    with GpuSampler() as gpus, ProcessSampler(mode, ignore=gpus.pids) as processes:
        children, client = children_cpu_seconds(), self_cpu_seconds()
        start = time.monotonic()
        result = grade_class(submitted, grades, mode=mode, exercises=options.exercise,
                             metrics=not options.no_metrics,
                             sanitizers=not options.no_sanitizers, timeout=options.timeout,
                             workers=workers, profile_workers=profile_workers,
                             console=Console())
        wall = time.monotonic() - start
        children = children_cpu_seconds() - children  # the cluster is closed: all reaped
        client = self_cpu_seconds() - client
    measured = mode == "gpu" and not options.no_metrics
    students = {s: verdict(_report(grades / f"{s}.json"), bug, measured)
                for s, bug in bugs.items()}
    record = {
        "date": datetime.date.today().isoformat(), "host": platform.node(),
        "device": device(mode), "mode": mode, "workers": result.workers,
        "workers_option": workers, "profile_workers": profile_workers,
        "default_workers": sum(default_workers(mode, machine)),
        "machine": {"cores": machine.cores, "memory_gib": round(machine.memory / 2**30, 1),
                    "gpus": [{"visible_as": name, "memory_gib": round(size / 2**30, 1)}
                             for name, size in machine.gpus]},
        "copies": options.copies, "buggy": options.buggy, "lessons": options.lessons,
        "exercise_filter": options.exercise, "metrics": not options.no_metrics,
        "sanitizers": not options.no_sanitizers, "timeout": options.timeout,
        "notebooks": result.submissions, "exercises": result.exercises,
        "wall_seconds": round(wall, 2), "batch_seconds": result.seconds,
        "exercises_per_minute": round(result.exercises / wall * 60, 2),
        "notebooks_per_minute": round(len(result.graded) / wall * 60, 3),
        "cpu": cpu_section(processes.by_phase(), children, client, result.exercises),
        "gpu": gpus.summary(),
        "not_graded": result.errors, "interrupted": result.interrupted,
        "students": students,
    }
    (out / "batch_throughput.json").write_text(json.dumps(record, indent=1) + "\n")
    text = table(record)
    (out / "batch_throughput.md").write_text(text)
    print(text, flush=True)
    return record


def parse_setting(text: str) -> dict[str, int | None]:
    """``default``, ``workers=6``, ``profile-workers=2,workers=6``, ... as keyword
    arguments of :func:`measure`."""
    setting: dict[str, int | None] = {"workers": None, "profile_workers": 0}
    if text == "default":
        return setting
    for part in text.split(","):
        key, _, value = part.partition("=")
        name = key.strip().replace("-", "_")
        if name not in setting or not value.strip().isdigit():
            raise ValueError(f"{text!r}: a setting is 'default' or a comma-separated list of "
                             "workers=N and profile-workers=N")
        setting[name] = int(value)
    return setting


def comparison(runs: dict[str, list[dict]]) -> str:
    """The settings side by side: each one's median exercises/min over its rounds, every
    round, its share of the best median, CPU-seconds per exercise, GPU busy, verdicts."""
    medians = {label: statistics.median(r["exercises_per_minute"] for r in records)
               for label, records in runs.items()}
    best = max(medians.values())
    lines = ["| setting | workers | profile workers | exercises/min (median) | each round | "
             "of the best | CPU-s per exercise | GPU busy (mean %) | verdicts |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, records in runs.items():
        last = records[-1]
        busy = ", ".join(f"{g['mean_utilisation_pct']}" for g in last["gpu"].get("gpus", {})
                         .values()) or "n/a"
        wrong = sorted({s for r in records for s, row in r["students"].items() if not row["ok"]})
        rounds = ", ".join(f"{r['exercises_per_minute']:.1f}" for r in records)
        cpu = statistics.median(r["cpu"]["per_exercise"] for r in records)
        lines.append(f"| {label} | {last['workers']} | {last['profile_workers']} | "
                     f"{medians[label]:.1f} | {rounds} | {medians[label] / best:.0%} | "
                     f"{cpu:g} | {busy} | "
                     f"{'all right' if not wrong else 'WRONG: ' + ', '.join(wrong)} |")
    first = next(iter(runs.values()))[0]
    rounds = max(len(records) for records in runs.values())
    head = (f"{first['device']['name']} ({first['device']['gpus']} GPUs, "
            f"{first['machine']['cores']} cores), {first['date']}, {first['mode']} mode, "
            f"{first['notebooks']} notebooks ({', '.join(first['lessons'])}), the same class "
            f"each run, {rounds} round{'s' if rounds > 1 else ''} (the settings in turn)")
    return head + "\n\n" + "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--buggy", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--compare", nargs="+", default=None, metavar="SETTING",
                        help="one run per setting: default, workers=N, profile-workers=N, "
                        "or both comma-separated")
    parser.add_argument("--rounds", type=int, default=1, metavar="K",
                        help="with --compare: every setting K times, the settings in turn")
    parser.add_argument("--compare-workers", type=int, nargs="+", default=None, metavar="N",
                        help="--compare default workers=N ...")
    parser.add_argument("--profile-workers", type=int, default=0, metavar="N",
                        help="profile workers per GPU (grader batch --profile-workers)")
    parser.add_argument("--mode", default="auto", choices=("auto", "sim", "gpu"))
    parser.add_argument("--lessons", nargs="+", default=list(LESSONS), choices=LESSONS)
    parser.add_argument("-e", "--exercise", action="append", default=[])
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--no-sanitizers", action="store_true")
    parser.add_argument("--timeout", type=float, default=None)
    options = parser.parse_args()
    if not 0 <= options.buggy <= options.copies:
        parser.error("--buggy must be between 0 and --copies")
    if options.compare_workers:
        if options.compare:
            parser.error("--compare-workers N is --compare default workers=N: use one")
        options.compare = ["default", *(f"workers={n}" for n in options.compare_workers)]
    if options.compare and (options.workers or options.profile_workers):
        parser.error("--compare names each run's workers: leave out --workers and "
                     "--profile-workers")
    if options.rounds < 1 or (options.rounds > 1 and not options.compare):
        parser.error("--rounds K (at least 1) repeats the settings of --compare")
    try:
        settings = ({label: parse_setting(label) for label in options.compare}
                    if options.compare else
                    {"": {"workers": options.workers, "profile_workers": options.profile_workers}})
    except ValueError as exc:
        parser.error(str(exc))

    from workbook.mode import resolve

    mode = resolve(options.mode)
    options.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {label or "run": [] for label in settings}
    with tempfile.TemporaryDirectory(prefix="batch-throughput-") as tmp:
        submitted = Path(tmp) / "submitted"
        bugs = build_class(submitted, options.lessons, options.copies, options.buggy, mode,
                           options.exercise)
        interrupted = False
        for k in range(1, options.rounds + 1):
            for label, setting in settings.items():
                folder = (options.out / label.replace("=", "-").replace(",", "_")
                          / (f"round-{k}" if options.rounds > 1 else ""))
                record = measure(submitted, folder, bugs, mode, options, **setting)
                runs[label or "run"].append(record)
                if interrupted := record["interrupted"]:
                    break
            if interrupted:
                break
    if options.compare:
        text = comparison(runs)
        (options.out / "compare.json").write_text(json.dumps(
            {label: [{k: r[k] for k in ("workers", "workers_option", "profile_workers",
                                        "default_workers", "exercises_per_minute",
                                        "wall_seconds", "cpu", "gpu")} for r in records]
             for label, records in runs.items()}, indent=1) + "\n")
        (options.out / "compare.md").write_text(text)
        print(text)
    records = {f"{label} round {k}": r for label, rs in runs.items()
               for k, r in enumerate(rs, 1)}
    wrong = [f"{label}: {s}" for label, r in records.items()
             for s, row in r["students"].items() if not row["ok"]]
    if wrong:
        print(f"wrong verdicts: {', '.join(wrong)}")
    return 1 if wrong or any(r["interrupted"] for r in records.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
