"""The reference solution profiled once per GPU model (grader.reference_profiles): the key,
the store, a profile run that reads a stored reference instead of profiling it, and the
batch's shared folder."""

import json
from pathlib import Path

from grader import reference_profiles, runner
from grader.exercises import get
from grader.profiling import _read_attempt
from grader.runner import MARKER_KERNEL
from grader.session import Attempt

EXERCISE = get("reduction.shared")
METRICS = sorted({rule.metric for rule in EXERCISE.metric_rules})


def cells(tag: str) -> list[dict]:
    return [{"index": 0, "role": "setup", "exercise_id": None, "source": f"tag = {tag!r}"},
            {"index": 1, "role": "exercise", "exercise_id": "reduction.shared",
             "source": "shared_sum_kernel = max"}]


def test_the_key_changes_with_what_the_measurement_depends_on():
    key = reference_profiles.profile_key(EXERCISE, METRICS, cells("a"), "GPU cc9.0")
    assert key == reference_profiles.profile_key(EXERCISE, METRICS, cells("a"), "GPU cc9.0")
    assert key != reference_profiles.profile_key(EXERCISE, METRICS, cells("b"), "GPU cc9.0")
    assert key != reference_profiles.profile_key(EXERCISE, METRICS, cells("a"), "GPU cc8.0")
    assert key != reference_profiles.profile_key(EXERCISE, METRICS[:1], cells("a"), "GPU cc9.0")
    assert key != reference_profiles.profile_key(get("reduction.convergent"), METRICS,
                                                 cells("a"), "GPU cc9.0")


def test_nothing_is_stored_or_read_without_the_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(reference_profiles.CACHE_ENV, raising=False)
    reference_profiles.store("k", {"m": 1.0})
    assert reference_profiles.load("k") is None and not list(tmp_path.iterdir())
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path / "profiles"))
    assert reference_profiles.load("k") is None
    reference_profiles.store("k", {"m": 1.0})
    assert reference_profiles.load("k") == {"m": 1.0}
    assert [p.name for p in (tmp_path / "profiles").iterdir()] == ["k.json"]


def profile(tmp_path, monkeypatch, name: str) -> tuple[list, list[dict]]:
    """One profile job of the student and the reference (profiling launches recorded)."""
    monkeypatch.setattr(reference_profiles, "gpu_identity", lambda: "GPU cc9.0")
    profiled = []
    monkeypatch.setattr(runner, "_warm_up", lambda ex, namespace: None)
    monkeypatch.setattr(runner, "_profiled_segment",
                        lambda ex, namespace: profiled.append(namespace["tag"]))
    job = {"mode": "sim", "action": "profile", "exercise_ids": [EXERCISE.id],
           "cells": cells("student"), "reference_cells": cells("reference")}
    events = runner.Events(str(tmp_path / f"{name}.jsonl"))
    runner.profile_job(job, events)
    events.file.close()
    lines = (tmp_path / f"{name}.jsonl").read_text().splitlines()
    return profiled, [json.loads(line) for line in lines]


def test_a_stored_reference_is_not_profiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path / "profiles"))
    profiled, events = profile(tmp_path, monkeypatch, "first")
    assert profiled == ["student", "reference"]
    (store_as,) = [e["store_as"] for e in events if "store_as" in e]
    assert store_as[:2] == [EXERCISE.id, "reference"]
    reference_profiles.store(store_as[2], {METRICS[0]: 3.0})
    profiled, events = profile(tmp_path, monkeypatch, "second")
    assert profiled == ["student"]
    assert [e for e in events if "stored" in e] == [
        {"stored": [EXERCISE.id, "reference"], "metrics": {METRICS[0]: 3.0}}]


def test_without_the_folder_both_are_profiled_and_nothing_is_offered(tmp_path, monkeypatch):
    monkeypatch.delenv(reference_profiles.CACHE_ENV, raising=False)
    profiled, events = profile(tmp_path, monkeypatch, "plain")
    assert profiled == ["student", "reference"]
    assert not [e for e in events if "store_as" in e or "stored" in e]


def launch(name, **metrics):
    return {"kernel": f"{name}[abi:v1,xyz]", **metrics}


def test_the_parent_stores_what_ncu_measured_and_uses_what_was_stored(tmp_path, monkeypatch):
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path))
    kernel = EXERCISE.entry
    values = dict.fromkeys(METRICS, 5.0)
    attempt = Attempt(events=[{"segment": [EXERCISE.id, "student"]},
                              {"store_as": [EXERCISE.id, "reference", "key1"]},
                              {"segment": [EXERCISE.id, "reference"]}],
                      output="", returncode=0, extra={"report": Path("x.ncu-rep")})
    launches = [launch(MARKER_KERNEL), launch(kernel), launch(kernel, **values),
                launch(MARKER_KERNEL), launch(kernel), launch(kernel, **values, other=1.0)]
    monkeypatch.setattr("grader.profiling.ncu.check_output", lambda output, report, k: report)
    monkeypatch.setattr("grader.profiling.read_metrics", lambda report, metrics: launches)
    found, reasons = {}, {}
    _read_attempt(attempt, [EXERCISE], METRICS, [kernel], 60, found, reasons)
    assert found[EXERCISE.id]["reference"]["other"] == 1.0 and not reasons
    stored = reference_profiles.load("key1")
    assert stored == {"kernel": launches[-1]["kernel"], **values}  # the exercise's metrics
    later = Attempt(events=[{"stored": [EXERCISE.id, "reference"], "metrics": stored},
                            {"segment": [EXERCISE.id, "student"]}],
                    output="", returncode=0, extra={"report": Path("x.ncu-rep")})
    launches = launches[:3]
    found = {}
    _read_attempt(later, [EXERCISE], METRICS, [kernel], 60, found, reasons)
    assert found[EXERCISE.id]["reference"] == stored and "student" in found[EXERCISE.id]


def test_a_batch_s_workers_share_one_folder(tmp_path, monkeypatch):
    from grader.batch import shared_reference_profiles

    monkeypatch.delenv(reference_profiles.CACHE_ENV, raising=False)
    envs = shared_reference_profiles([{"A": "1"}, {"A": "2"}], tmp_path / "out")
    assert {e[reference_profiles.CACHE_ENV] for e in envs} == {
        str((tmp_path / "out").resolve() / ".reference-profiles")}
    assert [e["A"] for e in envs] == ["1", "2"]
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path / "mine"))
    (env,) = shared_reference_profiles([{}], tmp_path / "out")
    assert env[reference_profiles.CACHE_ENV] == str(tmp_path / "mine")


def test_a_broken_file_is_not_read_and_0_turns_caching_off(tmp_path, monkeypatch):
    monkeypatch.setenv(reference_profiles.CACHE_ENV, str(tmp_path))
    (tmp_path / "a.json").write_text("{not json")
    assert reference_profiles.load("a") is None
    monkeypatch.setenv(reference_profiles.CACHE_ENV, "0")
    assert reference_profiles.cache_dir() is None
