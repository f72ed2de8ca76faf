"""benchmarks/batch_throughput.py's measurements: CPU time by grading phase, GPU readings,
the comparison of worker counts (its GPU runs are recorded in benchmarks/results/)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import batch_throughput  # noqa: E402
from usage_sampling import GpuSampler, ProcessSampler, children_cpu_seconds  # noqa: E402

# burn CPU, then idle a second before exiting: a sampler that a loaded machine delays still
# sees each process's whole CPU time before it ends
BURN = ("import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: "
        "pass\ntime.sleep(1)")


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def exercise(exercise_id: str, passed: bool, rule_status: str) -> dict:
    return {"id": exercise_id, "passed": passed,
            "metrics": {"rules": [{"label": "duration", "status": rule_status}]}}


def test_a_verdict_is_wrong_where_a_passed_exercise_s_metric_rules_were_not_measured():
    """A profile stage that measured nothing passes every exercise: in gpu mode with metrics
    the verdict counts that as wrong, for a clean copy and for a planted bug's copy."""
    bug = {"exercise": "x.b", "bug": "wrong index"}
    clean = {"notebooks": [{"exercises": [exercise("x.a", True, "passed"),
                                          exercise("x.b", True, "passed")]}]}
    unmeasured = {"notebooks": [{"exercises": [exercise("x.a", True, "not assessed"),
                                               exercise("x.b", True, "passed")]}]}
    planted = {"notebooks": [{"exercises": [exercise("x.a", True, "not assessed"),
                                            exercise("x.b", False, "not assessed")]}]}
    assert batch_throughput.verdict(clean, None, metrics=True)["ok"]
    row = batch_throughput.verdict(unmeasured, None, metrics=True)
    assert not row["ok"] and row["unmeasured"] == ["x.a"]
    assert batch_throughput.verdict(unmeasured, None, metrics=False)["ok"]  # sim mode
    assert not batch_throughput.verdict(planted, bug, metrics=True)["ok"]
    assert batch_throughput.verdict(planted, bug, metrics=False)["ok"]


def test_cpu_time_is_filed_under_the_phase_it_works_for(tmp_path):
    """A grading process (grader.runner in its command line) is the check, or in gpu mode
    with WORKBOOK_MODE=sim the simulator pass; a compute-sanitizer's child is that tool,
    although it is a grading runner too (the runner a tool starts is the tool's work)."""
    runner = BURN.format(seconds=0.6) + "  # grader.runner"
    # a stand-in named compute-sanitizer (argv[0], as the real binary shows it) whose python
    # child burns CPU: called as compute-sanitizer --tool TOOL --print-limit 20 CODE
    sanitizer = executable(tmp_path / "sanitizer", f"""#!/bin/bash
exec -a compute-sanitizer /bin/bash -c '"$0" -c "$1"; exit $?' {sys.executable} "$5" --tool "$2"
""")
    before = children_cpu_seconds()
    with ProcessSampler("gpu", interval=0.05) as sampler:
        procs = [
            subprocess.Popen([sys.executable, "-c", runner],
                             env=dict(os.environ, WORKBOOK_MODE="gpu")),
            subprocess.Popen([sys.executable, "-c", runner],
                             env=dict(os.environ, WORKBOOK_MODE="sim")),
            subprocess.Popen([str(sanitizer), "--tool", "racecheck", "--print-limit", "20",
                              runner], env=dict(os.environ, WORKBOOK_MODE="gpu")),
        ]
        for proc in procs:
            assert proc.wait(timeout=60) == 0
        time.sleep(0.1)
    spent = children_cpu_seconds() - before
    phases = sampler.by_phase()
    assert set(phases) == {"check", "simulator", "racecheck"}, phases
    assert [phases[name]["processes"] for name in ("check", "simulator", "racecheck")] == [
        1, 1, 2]  # the stand-in compute-sanitizer and its python child
    for name in ("check", "simulator", "racecheck"):
        assert 0.4 <= phases[name]["cpu_seconds"] <= 0.75, phases  # 0.6 s burnt
    sampled = sum(p["cpu_seconds"] for p in phases.values())
    assert 0.8 * spent <= sampled <= spent + 0.01  # the exact total bounds the samples


def test_processes_running_before_the_sampler_are_left_out():
    """A descendant already running when sampling starts (a compile worker, another test's
    child) works for something else."""
    earlier = subprocess.Popen([sys.executable, "-c", BURN.format(seconds=1.0)])
    try:
        time.sleep(0.2)
        with ProcessSampler("gpu", interval=0.05) as sampler:
            later = subprocess.Popen([sys.executable, "-c",
                                      BURN.format(seconds=0.3) + "  # grader.runner"],
                                     env=dict(os.environ, WORKBOOK_MODE="gpu"))
            assert later.wait(timeout=60) == 0
            time.sleep(0.1)
        assert set(sampler.by_phase()) == {"check"}, sampler.by_phase()
    finally:
        earlier.wait(timeout=60)


def test_gpu_readings_from_nvidia_smi(tmp_path, monkeypatch):
    """nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits
    prints one line per GPU ("0, 37, 1234"); with -lms it repeats them."""
    executable(tmp_path / "nvidia-smi", """#!/bin/sh
case "$*" in
  *-lms*) while true; do echo "0, 40, 2000"; echo "1, 0, 600"; sleep 0.05; done ;;
  *) echo "0, 0, 500"; echo "1, 0, 500" ;;
esac
""")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nvidia-smi it is
    with GpuSampler(interval=0.05) as gpus:
        assert len(gpus.pids) == 1  # the sampling process, left out of CPU accounts
        time.sleep(0.5)
    summary = gpus.summary()
    assert summary["measured"] and summary["source"] == "nvidia-smi"
    first, second = summary["gpus"]["0"], summary["gpus"]["1"]
    assert first["mean_utilisation_pct"] == 40 and first["max_memory_used_mib"] == 2000
    assert first["memory_used_before_mib"] == 500 and first["samples"] >= 3
    assert second["mean_utilisation_pct"] == 0 and second["max_memory_used_mib"] == 600


def test_no_gpu_readings_say_why(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with GpuSampler() as gpus:
        pass
    assert gpus.summary() == {"measured": False, "reason": "no GPU readings: neither pynvml "
                                                           "nor nvidia-smi is available"}
    assert batch_throughput.gpu_line(gpus.summary()).startswith("GPU: not measured (no GPU")


def test_cpu_section_per_exercise():
    phases = {"check": {"cpu_seconds": 30.0, "processes": 4, "max_rss_mib": 300.0,
                        "names": ["python"]},
              "worker": {"cpu_seconds": 6.0, "processes": 2, "max_rss_mib": 200.0,
                         "names": ["python"]}}
    cpu = batch_throughput.cpu_section(phases, total=40.0, client=2.0, exercises=12)
    assert cpu["per_exercise"] == 3.33 and cpu["sampled_share"] == 0.9
    assert cpu["by_phase"]["check"]["per_exercise"] == 2.5
    assert cpu["client_per_exercise"] == 0.17
    line = batch_throughput.cpu_line(cpu)
    assert line.startswith("CPU: 3.33 core-seconds per exercise")
    assert "(check 2.5, worker 0.5; sampled 90% of it), 0.17 in the client" in line


@pytest.mark.sim_only
def test_compare_settings_in_rounds_in_the_simulator(tmp_path):
    """One class, graded by the default cluster and by one worker, twice each, the settings
    in turn; each run's record and the comparison (medians, every round) are written, every
    verdict right."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "batch_throughput.py"), "--out", str(out),
         "--copies", "2", "--buggy", "1", "--mode", "sim", "--lessons", "02_reduction",
         "-e", "reduction.simple", "--compare", "default", "workers=1", "--rounds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    runs = {(label, k): json.loads((out / label / f"round-{k}" / "batch_throughput.json")
                                   .read_text())
            for label in ("default", "workers-1") for k in (1, 2)}
    for (label, _), record in runs.items():
        assert record["workers_option"] == (None if label == "default" else 1)
        assert record["workers"] == (record["default_workers"] if label == "default" else 1)
        assert record["exercises"] == 2 and all(r["ok"] for r in record["students"].values())
        assert record["cpu"]["by_phase"]["check"]["cpu_seconds"] > 0
        assert record["cpu"]["total_seconds"] >= record["cpu"]["sampled_seconds"] > 0
        assert record["gpu"]["measured"] is False
    compared = json.loads((out / "compare.json").read_text())
    assert list(compared) == ["default", "workers=1"] and all(len(v) == 2
                                                               for v in compared.values())
    table = (out / "compare.md").read_text()
    assert "2 rounds (the settings in turn)" in table
    rates = [runs["workers-1", k]["exercises_per_minute"] for k in (1, 2)]
    row = next(line for line in table.splitlines() if line.startswith("| workers=1 |"))
    assert f"| {(rates[0] + rates[1]) / 2:.1f} | {rates[0]:.1f}, {rates[1]:.1f} |" in row
    assert table.count("all right") == 2


def test_settings_and_their_errors(monkeypatch, capsys):
    assert batch_throughput.parse_setting("default") == {"workers": None, "profile_workers": 0}
    assert batch_throughput.parse_setting("profile-workers=2,workers=6") == {
        "workers": 6, "profile_workers": 2}
    for bad in ("workers", "workers=x", "threads=2", "workers=2;profile-workers=1"):
        with pytest.raises(ValueError, match="workers=N and profile-workers=N"):
            batch_throughput.parse_setting(bad)
    script = [str(ROOT / "benchmarks" / "batch_throughput.py"), "--out", "x"]
    # the first from the command line (exit status 2), the others through main() in this
    # process (a new interpreter importing the script took about 4 s for each)
    done = subprocess.run([sys.executable, *script, "--rounds", "2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "repeats the settings of --compare" in done.stderr, \
        done.stderr
    for extra, says in ((["--compare", "default", "--workers", "2"], "leave out --workers"),
                        (["--compare", "default", "--compare-workers", "2"], "use one"),
                        (["--compare", "nope"], "workers=N and profile-workers=N")):
        monkeypatch.setattr(sys, "argv", script + extra)
        with pytest.raises(SystemExit) as stopped:
            batch_throughput.main()
        stderr = capsys.readouterr().err
        assert stopped.value.code == 2 and says in stderr, stderr
