"""benchmarks/capture_tool_output.py without a GPU: what it would run, and a run with stand-ins
for compute-sanitizer and ncu."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tool_fixtures import FIXTURES, HAND_TYPED

from grader import sanitizer

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "capture_tool_output.py"


def _capture(out: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, WORKBOOK_MODE="sim")
    for name in ("CUDA_HOME", "CUDA_PATH"):
        env.pop(name, None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_dry_run_plans_the_grader_s_commands(tmp_path):
    done = _capture(tmp_path / "out", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["dry_run"] and manifest["commit"]
    captures = {c["file"]: c for c in manifest["captures"]}
    tools = [c for c in captures.values() if c["file"].startswith("tools/")]
    assert {c["tool"] for c in tools} == {*sanitizer.TOOLS, "initcheck"}
    for capture in tools:  # compute-sanitizer as the grader runs it, over the grader's runner
        prefix = sanitizer.command(capture["command"][0], capture["tool"])
        assert capture["command"][:len(prefix)] == prefix
        assert capture["command"][len(prefix):len(prefix) + 3] == [sys.executable, "-m",
                                                                   "grader.runner"]
    for report in sorted((FIXTURES / "ncu").glob("*.ncu-rep")):
        name = report.name.removesuffix(".ncu-rep")
        assert captures[f"ncu/{name}.csv"]["command"][1:] == ["--import", str(report),
                                                              "--page", "raw", "--csv"]
    live = captures["ncu/ldmatrix-bank-conflicts.csv"]["command"]
    assert live[1:4] == ["--csv", "--page", "raw"] and live[-1] == "--profile-target"
    # every fixture still typed by hand is one the script writes under the same name
    assert HAND_TYPED <= set(captures), HAND_TYPED - set(captures)
    assert not any((tmp_path / "out" / f).exists() for f in captures)  # nothing ran


def _stand_in(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_run_writes_each_tool_s_output_and_the_manifest(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    _stand_in(tools, "compute-sanitizer",
              'echo "========= COMPUTE-SANITIZER"\necho "tool $2"\n'
              'echo "========= ERROR SUMMARY: 0 errors"\n')
    _stand_in(tools, "ncu", 'echo "\\"ID\\",\\"args\\""\necho "\\"0\\",\\"$*\\""\n'
                            'echo "ncu says" >&2\n')
    out = tmp_path / "out"
    report = FIXTURES / "ncu" / "02_reduction-0.ncu-rep"
    extra = tmp_path / "extra.ncu-rep"
    extra.write_bytes(report.read_bytes())
    done = _capture(out, str(extra), path=f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["device"] and not manifest["dry_run"]  # nvidia-smi's answer, or its absence
    for capture in manifest["captures"]:
        text = (out / capture["file"]).read_text()
        if capture["file"].startswith("tools/"):
            assert text.splitlines()[1] == f"tool {capture['tool']}", capture
            assert capture["returncode"] == [0] and capture["timed_out"] is False
        else:
            assert text.splitlines()[1] == '"0","' + " ".join(capture["command"][1:]) + '"'
            assert (out / f"{capture['file']}.stderr.txt").read_text() == "ncu says\n"
    assert (out / "ncu" / "extra.csv").exists()
    assert (out / "ncu" / "02_reduction-0.csv").exists()
