"""Metric grading without a GPU: replay ncu reports and values recorded on one.

The evidence for each rule is a GPU run of ``benchmarks/metric_rules.py``, recorded in
``benchmarks/results/*/metric_rules-<lesson>.json`` (every value measured, with the device
and date of each exercise's run) beside the Nsight Compute reports it wrote, one per lesson,
of which ``tests/fixtures/ncu/<lesson>-<attempt>.ncu-rep`` are copies: NVIDIA H100 80GB HBM3,
2026-11-26, every lesson (benchmarks/results/h100-2026-11-26-metric-rules/). The tests below
replay those runs: they guard the rules against regressions, they are not themselves the
evidence.
"""

import json
import os
from pathlib import Path

import pytest

from grader import ncu
from grader.exercises import LESSONS, correct_variants, get, slow_variant
from grader.metric_rules import MetricRule, format_outcome, separation
from grader.profiling import (
    apply_metric_rules,
    assess,
    metric_names,
    profiled_launch,
    segment_skip,
    split_report,
    split_segments,
)
from grader.results import ExerciseResult

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
RECORDS = [json.loads(p.read_text())
           for p in sorted((ROOT / "benchmarks/results").glob("*/metric_rules-*.json"))]


def newest_records(records: list[dict]) -> dict[str, dict]:
    """Each exercise's most recent record (by the date of its own run; a run marked
    ``superseded_by`` a later one of the same day is left out)."""
    newest: dict[str, dict] = {}
    for record in records:
        for run in record["exercises"]:
            if run.get("superseded_by"):
                continue
            run = {"device": record["device"], "date": record["date"], **run}
            if run["exercise"] not in newest or run["date"] > newest[run["exercise"]]["date"]:
                newest[run["exercise"]] = run
    return newest


RECORDED = newest_records(RECORDS)
REPORTS = sorted(FIXTURES.glob("*.ncu-rep"))


def declared(exercise_id: str, kind: str) -> list:
    """The exercise's slow variant (one) or correct variants (several) as declared today."""
    if kind == "slow":
        slow = slow_variant(exercise_id)
        return [slow] if slow else []
    return list(correct_variants(exercise_id))


def test_fixtures_exist():
    assert len(REPORTS) >= len(LESSONS)
    assert RECORDS and all(r["device"].startswith("NVIDIA") for r in RECORDS)


def test_newest_record_wins_whatever_the_folder_order():
    older = {"device": "NVIDIA A", "date": "2026-11-22", "exercises": [{"exercise": "x", "v": 1}]}
    newer = {"device": "NVIDIA B", "date": "2026-11-25", "exercises": [{"exercise": "x", "v": 2}]}
    assert newest_records([newer, older])["x"]["v"] == 2
    assert newest_records([older, newer])["x"]["device"] == "NVIDIA B"


# A slow variant must be correct for its failed rules to mean "slow", not "wrong".
@pytest.mark.parametrize("exercise_id", sorted(RECORDED))
def test_slow_variant_was_correct_on_the_gpu(exercise_id):
    assert RECORDED[exercise_id]["slow_variant_correct"], exercise_id


def lesson_reports() -> list[tuple[dict, dict]]:
    """``(lesson record, report entry)`` of every report a recorded run lists (each entry:
    the report's file and the segment event of each of its segments, which says how the
    report is split: see grader.profiling.segment_skip)."""
    return [(record, entry) for record in RECORDS for entry in record.get("reports", ())
            if (FIXTURES / Path(entry["file"]).name).exists()]


def recorded_run(record: dict, exercise_id: str, label: str) -> dict:
    """The metrics recorded for one segment: the reference's, or a group's student run."""
    (run,) = [r for r in record["exercises"] if r["exercise"] == exercise_id]
    if label == "reference":
        return run["slow"]["reference"]
    if label.startswith("correct-"):
        return run["correct_variants"][int(label.split("-")[1]) - 1]["student"]
    return run[label]["student"]


def test_every_lesson_s_report_is_replayed():
    replayed = {get(segment[0]).lesson for _, entry in lesson_reports()
                for segment in entry["segments"]}
    assert replayed == set(LESSONS)


@pytest.mark.parametrize("record,entry", lesson_reports(),
                         ids=lambda value: value["file"] if "file" in value else "")
def test_reader_matches_the_values_recorded_in_the_same_run(record, entry):
    """Each segment of the report, split as its events say (at the markers, or by the kernels
    recorded) and read as the grader reads it, gives the values the run recorded for that
    exercise and group."""
    report = FIXTURES / Path(entry["file"]).name
    exercises = [get(e) for e in dict.fromkeys(segment[0] for segment in entry["segments"])]
    launches = ncu.read_metrics(report, metric_names(exercises))
    segments = split_report(launches, entry["segments"])
    assert len(segments) == len(entry["segments"])
    for segment, part in zip(entry["segments"], segments):
        exercise_id, label = segment[:2]
        exercise = get(exercise_id)
        launch = profiled_launch(exercise, part, segment_skip(segment))
        assert launch is not None, (exercise_id, label)
        expected = recorded_run(record, exercise_id, label)
        for metric in {rule.metric for rule in exercise.metric_rules}:
            assert launch[metric] == pytest.approx(expected[metric]), (exercise_id, label, metric)


def test_reports_made_with_the_warm_ups_profiled_are_read_with_their_skip():
    """The recorded reports (2026-11-26) were made with each warm-up launch inside the
    profiled range: their segment events have no skip, and read with today's skip (the first
    launch in the segment) they would give the warm-up's values, not the ones recorded."""
    differ = total = 0
    for record, entry in lesson_reports():
        assert all(len(segment) == 2 for segment in entry["segments"]), entry["file"]
        report = FIXTURES / Path(entry["file"]).name
        exercises = [get(e) for e in dict.fromkeys(s[0] for s in entry["segments"])]
        parts = split_segments(ncu.read_metrics(report, metric_names(exercises)))
        for (exercise_id, label), part in zip(entry["segments"], parts):
            exercise = get(exercise_id)
            assert exercise.profile_skip == 0
            first = profiled_launch(exercise, part)
            expected = recorded_run(record, exercise_id, label)
            differ += any(first[m] != pytest.approx(expected[m])
                          for m in metric_names([exercise]))
            total += 1
    assert differ > total // 2, (differ, total)  # 108 of 122 segments


# ncu's own reading of each report, captured on the GPU machine that recorded it
# (``ncu --import REPORT --page raw --csv``, Nsight Compute 2025.3.1, NVIDIA H100, 2026-11-26):
# the header row, the units row, then one row per profiled launch.
CSV_SCALE = {"": 1.0, "inst": 1.0, "sector": 1.0, "request": 1.0, "byte": 1.0, "cycle": 1.0,
             "%": 1.0, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
CAPTURED = [p for p in REPORTS if p.with_suffix(".csv").exists()]


def ncu_csv(path: Path) -> list[tuple[str, dict[str, float]]]:
    """The kernel name and every metric of each launch in ncu's raw CSV, in ns / counts."""
    import csv

    with path.open(newline="") as f:
        header, units, *launches = list(csv.reader(f))
    found = []
    for values in launches:
        metrics = {}
        for name, unit, value in zip(header, units, values):
            if unit in CSV_SCALE and "__" in name:
                try:
                    metrics[name] = float(value.replace(",", "")) * CSV_SCALE[unit]
                except ValueError:
                    continue
        found.append((values[header.index("Kernel Name")], metrics))
    return found


def short_name(kernel: str) -> str:
    """A kernel's own name: the CSV prints ``make_warp_softmax::warp_softmax_kernel(...)``
    for the reader's ``warp_softmax_kernel[abi...]``."""
    return kernel.split("[")[0].split("(")[0].split("::")[-1]


def test_every_report_has_ncu_s_own_reading_beside_it():
    assert CAPTURED == REPORTS, sorted({p.name for p in REPORTS} - {p.name for p in CAPTURED})


@pytest.mark.parametrize("report", CAPTURED, ids=lambda p: p.stem)
def test_reader_agrees_with_ncu_s_own_reading_of_the_report(report):
    metrics = metric_names(LESSONS[report.stem.rsplit("-", 1)[0]])  # <lesson>-<attempt>
    launches = ncu.read_metrics(report, metrics)
    captured = ncu_csv(report.with_suffix(".csv"))
    assert len(launches) == len(captured) > 0
    for launch, (kernel, values) in zip(launches, captured):
        assert short_name(launch["kernel"]) == short_name(kernel)
        assert set(metrics) <= set(values), set(metrics) - set(values)
        for metric in metrics:
            # the CSV prints 6 decimals in its own unit (e.g. 5.408000 us)
            assert launch[metric] == pytest.approx(values[metric], rel=1e-5, abs=1e-3), metric


def test_csv_reading_converts_units(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('"ID","Kernel Name","gpu__time_duration.sum","smsp__inst_executed.sum"\n'
                    '"","","us","inst"\n"0","k[abc]","5.408000","9,093"\n')
    assert ncu_csv(path) == [("k[abc]", {"gpu__time_duration.sum": 5408.0,
                                          "smsp__inst_executed.sum": 9093.0})]


@pytest.mark.parametrize("exercise_id", sorted(RECORDED))
def test_regression_guard_todays_bounds_on_the_recorded_solution_and_slow_variant(exercise_id):
    """Today's bounds against the ratios recorded on a GPU (which they were set from): the
    solution passes every rule and the slow variant fails at least one."""
    record = RECORDED[exercise_id]
    slow_outcomes = []
    for rule in get(exercise_id).metric_rules:
        solution = rule.evaluate(record["solution"]["student"][rule.metric],
                                 record["solution"]["reference"][rule.metric])
        assert solution["status"] == "passed", format_outcome(solution)
        slow_outcomes.append(rule.evaluate(record["slow"]["student"][rule.metric],
                                           record["slow"]["reference"][rule.metric]))
    assert any(o["status"] == "failed" for o in slow_outcomes), [
        format_outcome(o) for o in slow_outcomes]


CORRECT_RUNS = [(exercise_id, run) for exercise_id, record in sorted(RECORDED.items())
                for run in record.get("correct_variants", [])]


def test_correct_variants_were_recorded_on_a_gpu():
    """Every lesson whose record holds correct variants contributes cases below."""
    lessons = {get(e).lesson for e, _ in CORRECT_RUNS}
    assert {"01_ldmatrix", "02_reduction", "03_softmax", "05_ccl"} <= lessons, lessons


# Correct-but-different solutions profiled on a GPU: today's rules must let every one that is
# still declared correct pass, and fail every one since declared slow.
@pytest.mark.parametrize("exercise_id,run", CORRECT_RUNS,
                         ids=[f"{e}-{r['description'][:40]}" for e, r in CORRECT_RUNS])
def test_regression_guard_todays_bounds_on_the_recorded_correct_variants(exercise_id, run):
    assert run["correct"], run["description"]
    outcomes = [rule.evaluate(run["student"][rule.metric], run["reference"][rule.metric])
                for rule in get(exercise_id).metric_rules]
    now_slow = [v.description for v in declared(exercise_id, "slow")]
    now_correct = [v.description for v in declared(exercise_id, "correct")]
    assert run["description"] in now_slow + now_correct, (
        f"{run['description']!r} was profiled as a correct variant and is declared neither "
        f"correct nor slow today")
    if run["description"] in now_slow:
        assert any(o["status"] == "failed" for o in outcomes), run["description"]
    else:
        for outcome in outcomes:
            assert outcome["status"] == "passed", (
                f"{run['description']}: {format_outcome(outcome)}")


def headroom_of(exercise_id: str) -> list[tuple[str, float]]:
    """Per ratio bound: how far it clears the worst correct run recorded (solution included),
    as ``grader.metric_rules.separation`` measures it against the recorded slow variant."""
    record = RECORDED[exercise_id]
    slow = {v.description for v in declared(exercise_id, "slow")}
    runs = [record["solution"], *(r for r in record.get("correct_variants", [])
                                  if r["description"] not in slow)]
    found = []
    for rule in get(exercise_id).metric_rules:
        ratios = [r["student"][rule.metric] / r["reference"][rule.metric] for r in runs
                  if r["reference"].get(rule.metric)]
        slow_ratio = (record["slow"]["student"][rule.metric]
                      / (record["slow"]["reference"][rule.metric] or float("nan")))
        found += [(f"{e['label']} {e['bound']}", e["headroom"])
                  for e in (separation(rule, ratios, slow_ratio) if ratios else [])]
    return found


HEADROOM = 1.15  # a bound clears the worst correct run by 15 %: other GPUs and noise


@pytest.mark.parametrize("exercise_id", sorted(e for e, r in RECORDED.items()
                                               if r.get("correct_variants")))
def test_bounds_keep_headroom_from_the_recorded_correct_runs(exercise_id):
    tight = [(bound, round(h, 3)) for bound, h in headroom_of(exercise_id) if h < HEADROOM]
    assert not tight, tight


def test_separation_measures_both_groups_against_each_bound():
    upper = MetricRule("m", "duration", "why", "gpu", max_ratio=1.25)
    (entry,) = separation(upper, [1.0, 1.31], slow=2.03)
    assert entry["bound"] == "<= 1.25"
    assert entry["headroom"] == pytest.approx(1.25 / 1.31)  # below 1: a correct one fails
    assert entry["slow_margin"] == pytest.approx(2.03 / 1.25)
    assert entry["suggested"] == pytest.approx((1.31 * 2.03) ** 0.5)
    lower = MetricRule("m", "DRAM", "why", "gpu", min_ratio=0.8)
    (entry,) = separation(lower, [0.98, 0.76], slow=0.58)
    assert entry["headroom"] == pytest.approx(0.76 / 0.8)
    assert entry["slow_margin"] == pytest.approx(0.8 / 0.58)
    both = MetricRule("m", "x", "why", "gpu", max_ratio=2.0, min_ratio=0.5)
    assert len(separation(both, [1.0], slow=3.0)) == 2
    (overlap,) = separation(upper, [1.0, 2.5], slow=2.03)  # no bound separates the groups
    assert overlap["suggested"] is None


def _metric_rules_benchmark():
    import importlib.util

    path = ROOT / "benchmarks" / "metric_rules.py"
    spec = importlib.util.spec_from_file_location("metric_rules_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_validates_both_groups_and_writes_the_table(tmp_path, monkeypatch):
    """benchmarks/metric_rules.py without a GPU: a stand-in profiler gives each run a
    duration and DRAM share; a correct variant over the bound is reported as a problem."""
    bench = _metric_rules_benchmark()
    exercise = get("reduction.shuffle")
    duration = {"reference": 100.0, "solution": 101.0, "slow": 203.0, "correct-1": 131.0}
    profiled = []

    def profile_programs(exercises, programs, timeout, work):
        profiled.append([(label, only) for label, only, _ in programs])
        found = {ex.id: {label: {
            "gpu__time_duration.sum": duration.get(label, 110.0),
            "dram__throughput.avg.pct_of_peak_sustained_elapsed":
                9000 / duration.get(label, 110)} for label, _, _ in programs}
            for ex in exercises}
        return found, {}, []

    monkeypatch.setattr(bench, "profile_programs", profile_programs)
    monkeypatch.setattr(bench, "graded_correct", lambda ex, cells: (True, []))
    problems = bench.validate_lesson(exercise.lesson, tmp_path, {exercise.id})
    correct = len(correct_variants(exercise.id))
    assert profiled == [[("reference", None), ("solution", None), ("slow", exercise.id),
                         *((f"correct-{k}", exercise.id) for k in range(1, correct + 1))]]
    record = json.loads((tmp_path / "metric_rules-02_reduction.json").read_text())
    assert set(record["seconds"]) == {"grading", "profiling"}
    (result,) = record["exercises"]
    assert [r["description"] for r in result["correct_variants"]] == [
        v.description for v in correct_variants(exercise.id)]
    assert result["slow"]["rules"][0]["status"] == "failed"
    table = (tmp_path / "metric_rules-02_reduction.md").read_text()
    assert "| reduction.shuffle | duration |" in table and "| 2.03 |" in table
    by_rule = {e["label"]: e for e in result["separation"]}
    worst = max(duration["correct-1"], 110.0) / duration["reference"]
    assert by_rule["duration"]["worst_correct"] == pytest.approx(worst)
    over = worst > exercise.metric_rules[0].max_ratio
    assert any("correct-1" in p for p in problems) == over, problems
    assert not any("slow" in p or "solution" in p for p in problems), problems


def test_every_exercise_with_rules_was_validated_on_a_gpu():
    with_rules = {e.id for exs in LESSONS.values() for e in exs if e.metric_rules}
    assert with_rules <= set(RECORDED), with_rules - set(RECORDED)


def test_rule_bounds():
    rule = MetricRule("m", "thing", "why", "gpu", max_ratio=1.2, max_value=10)
    assert rule.evaluate(6, 5)["status"] == "passed"
    assert rule.evaluate(7, 5)["status"] == "failed"     # ratio 1.4
    assert rule.evaluate(11, 10)["status"] == "failed"   # absolute bound
    assert rule.evaluate(3, 0)["status"] == "failed"     # no reference to compare with
    low = MetricRule("m", "thing", "why", "gpu", min_ratio=0.8)
    assert low.evaluate(79, 100)["status"] == "failed"
    assert "not assessed (no GPU)" in format_outcome(low.not_assessed("no GPU"))


def test_simulator_mode_reports_not_assessed():
    exercise = get("reduction.shuffle")
    metrics = assess(exercise, [], "sim")
    assert {o["status"] for o in metrics["rules"]} == {"not assessed"}
    assert "simulator" in metrics["rules"][0]["reason"]


def test_wrong_output_is_not_profiled():
    exercise = get("reduction.shuffle")
    result = ExerciseResult(exercise.id, exercise.title, "failed", 0, 1)
    apply_metric_rules(result, exercise, [], "gpu")
    assert result.status == "failed" and result.score == 0
    assert all(o["status"] == "not assessed" for o in result.metrics["rules"])


def test_failed_rule_costs_half_the_points(monkeypatch):
    exercise = get("reduction.convergent")
    record = RECORDED[exercise.id]["slow"]
    monkeypatch.setattr("grader.profiling.assess", lambda *a, **k: record)
    result = ExerciseResult(exercise.id, exercise.title, "passed", 1.0, 1.0)
    apply_metric_rules(result, exercise, [], "gpu")
    assert result.status == "failed" and result.score == 0.5
    assert any("instructions executed" in m and "failed" in m for m in result.messages)


def reasons(exercise_id: str) -> set[str]:
    """Why the rules of the exercise were not assessed, when profiling it on a "GPU"."""
    metrics = assess(get(exercise_id), [], "gpu")
    assert all(o["status"] == "not assessed" for o in metrics["rules"]), metrics
    return {o["reason"] for o in metrics["rules"]}


def test_missing_ncu_is_not_assessed(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    assert any("not installed" in r for r in reasons("reduction.convergent"))


def fake_ncu(tmp_path, text: str) -> str:
    path = tmp_path / "ncu"
    path.write_text(f"#!/bin/sh\necho '{text}'\nexit 1\n")
    os.chmod(path, 0o755)
    return str(path)


def test_counter_permission_error_is_not_assessed(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu, "find_ncu",
                        lambda: fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - no access"))
    assert any("ERR_NVGPUCTRPERM" in r for r in reasons("reduction.convergent"))


def test_nothing_profiled_is_not_assessed(monkeypatch, tmp_path):
    message = "==WARNING== No kernels were profiled."
    monkeypatch.setattr(ncu, "find_ncu", lambda: fake_ncu(tmp_path, message))
    assert any("profiled no kernel" in r for r in reasons("reduction.convergent"))


def test_kernel_regex_matches_numba_names():
    import re

    pattern = ncu.kernel_regex("shared_sum_kernel").removeprefix("regex:")
    assert re.match(pattern, "shared_sum_kernel[abi:v1,cw51cXTLSUwv1sCUt9Uw1VEw0NRRQPKzLTg4gaG]")
    assert not re.match(pattern, "shared_sum_kernel_v2[abi:v1]")


@pytest.mark.gpu
@pytest.mark.gpu_alone
@pytest.mark.skipif(ncu.find_ncu() is None, reason="Nsight Compute (ncu) is not installed")
def test_metric_grading_on_the_gpu():
    """The reference solution, profiled for real, passes every rule: "not assessed" (nothing
    measured) is a failure here."""
    from dataclasses import asdict

    from grader.exercises import solution_notebook
    from grader.notebook import load

    exercise = get("reduction.convergent")
    cells = [asdict(c) for c in load(solution_notebook(exercise.lesson)).program_for(exercise.id)]
    metrics = assess(exercise, cells, "gpu")
    assert [o["status"] for o in metrics["rules"]] == ["passed"] * len(exercise.metric_rules), (
        [format_outcome(o) for o in metrics["rules"]])


def test_a_report_without_a_metric_is_not_assessed_with_the_reason():
    with pytest.raises(ncu.NotAssessed, match=r"metric no__such_metric\.sum is missing"):
        ncu.read_metrics(REPORTS[0], ["no__such_metric.sum"])


def test_a_reader_that_fails_costs_the_metrics_not_the_grader(tmp_path):
    broken = tmp_path / "broken.ncu-rep"
    broken.write_bytes(b"not a report")
    with pytest.raises(ncu.NotAssessed, match="broken.ncu-rep"):
        ncu.read_metrics(broken, ["gpu__time_duration.sum"])


def test_a_reader_that_crashes_costs_the_metrics_not_the_grader(tmp_path, monkeypatch):
    """Nsight Compute's native reader has died with a segmentation fault: here a stand-in
    ``ncu_report`` does the same (a NULL read), and the grader goes on."""
    (tmp_path / "ncu_report.py").write_text(
        "import ctypes\n\ndef load_report(path):\n    return ctypes.string_at(0)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(ncu.NotAssessed, match=r"reading .* failed \(exit code -11\)"):
        ncu.read_metrics(REPORTS[0], ["gpu__time_duration.sum"])


# Every exercise says, with rules or in words, how its speed is graded: one without rules
# gives the reason (CPU-only, a pure index mapping...), one with rules gives none; and
# grader.explain_rules shows it.
@pytest.mark.parametrize("exercise", [e for lesson in sorted(LESSONS) for e in LESSONS[lesson]],
                         ids=lambda e: e.id)
def test_every_exercise_has_metric_rules_or_a_reason_for_none(exercise, capsys):
    from grader import explain_rules

    assert bool(exercise.metric_rules) != bool(exercise.no_metric_rule.strip()), (
        exercise.id, exercise.no_metric_rule)
    explain_rules(exercise.lesson)
    shown = capsys.readouterr().out
    assert (exercise.no_metric_rule or exercise.metric_rules[0].why) in shown
