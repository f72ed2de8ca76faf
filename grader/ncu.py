"""Run Nsight Compute (ncu) on a command and read metrics with its Python reader.

ncu names numba kernels ``name[abi:v1,...]``, so kernels are matched with
``--kernel-name regex:^name\\[``. Reports are read with ``ncu_report`` (Nsight
Compute's ``extras/python``, or the ``ncu-report`` package from PyPI), never by
scraping text. Whatever prevents an assessment -- no ncu, no permission to read
GPU counters, nothing profiled -- raises :class:`NotAssessed` with the reason.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from pathlib import Path

NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu",)
NCU_PYTHON_GLOB = "/opt/nvidia/nsight-compute/*/extras/python"


class NotAssessed(RuntimeError):
    """Metrics could not be measured; the message says why (never a failure)."""


def find_ncu() -> str | None:
    return shutil.which("ncu") or next((p for p in NCU_FALLBACKS if os.path.exists(p)), None)


def kernel_pattern(*names: str) -> str:
    """The regular expression of ncu's --kernel-name filter for numba kernels called
    ``names``: ncu names a numba kernel ``name[abi:...]``."""
    return "^(" + "|".join(names) + r")\["


def kernel_regex(*names: str) -> str:
    """ncu's --kernel-name filter for numba kernels called ``names``."""
    return "regex:" + kernel_pattern(*names)


def profiled_names(launched: list[str], kernels: list[str] | None) -> list[str]:
    """The names in ``launched`` (kernels' Python names, in launch order) of the kernels that
    ncu's filter for ``kernels`` profiles: those whose ``name[`` its expression matches (all
    of them without a filter)."""
    if kernels is None:
        return list(launched)
    pattern = re.compile(kernel_pattern(*kernels))
    return [name for name in launched if pattern.match(name + "[")]


def command(kernels: list[str], metrics: list[str], report: Path) -> list[str]:
    """The ncu command prefix: profile, between ``cuda.profile_start()`` and
    ``cuda.profile_stop()`` only, the launches of the kernels called ``kernels``."""
    ncu = find_ncu()
    if ncu is None:
        raise NotAssessed("Nsight Compute (ncu) is not installed or not on PATH")
    args = [ncu, "--metrics", ",".join(metrics), "--kernel-name", kernel_regex(*kernels),
            "--profile-from-start", "off", "--export", str(report), "--force-overwrite"]
    return args


def check_output(output: str, report: Path, kernels: list[str]) -> Path:
    """The report ncu wrote, or NotAssessed saying why there is none."""
    if "ERR_NVGPUCTRPERM" in output:
        raise NotAssessed("no permission to read GPU performance counters (ERR_NVGPUCTRPERM); "
                          "see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    path = report if report.suffix == ".ncu-rep" else report.with_suffix(".ncu-rep")
    if not path.exists() or "No kernels were profiled" in output:
        tail = "\n".join(output.strip().splitlines()[-6:])
        raise NotAssessed(f"ncu profiled no kernel matching {kernels}: {tail}")
    return path


def _import_reader():
    try:
        import ncu_report
    except ImportError:
        for folder in sorted(glob.glob(NCU_PYTHON_GLOB)):
            sys.path.append(folder)
        try:
            import ncu_report
        except ImportError:
            raise NotAssessed("the ncu_report reader is not installed "
                              "(pip install ncu-report)") from None
    return ncu_report


READ_TIMEOUT_S = 120


def read_metrics(report: Path, metrics: list[str]) -> list[dict[str, float]]:
    """One ``{metric: value}`` dict per profiled kernel launch, in launch order.

    The report is read in a child process: Nsight Compute's reader is a native library
    that has crashed (a segmentation fault, on an H100 machine with ncu 2025.3.1's
    ``extras/python``) in a process that had loaded numba's compiler and a CUDA context,
    and a crash must cost this report's metrics, not the grader."""
    import json
    import subprocess

    root = str(Path(__file__).resolve().parents[1])
    from grader.session import ONE_THREAD_LIBRARIES

    env = dict(os.environ, **ONE_THREAD_LIBRARIES, PYTHONPATH=os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    code = ("import json, sys; from pathlib import Path; from grader.ncu import _read_here; "
            "print(json.dumps(_read_here(Path(sys.argv[1]), sys.argv[2:])))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(report), *metrics], env=env,
                              capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise NotAssessed(f"reading {report.name} took over {READ_TIMEOUT_S} s") from None
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    marker = "grader.ncu.NotAssessed: "
    reason = next((line.split(marker, 1)[1] for line in done.stderr.splitlines()
                   if marker in line), None)
    if reason is None:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[-300:]
        reason = f"reading {report.name} failed (exit code {done.returncode}): {tail}"
    raise NotAssessed(reason)


def _read_here(report: Path, metrics: list[str]) -> list[dict[str, float]]:
    """:func:`read_metrics` in this process."""
    ncu_report = _import_reader()
    context = ncu_report.load_report(str(report))
    launches = []
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            values = {}
            for name in metrics:
                metric = action.metric_by_name(name)
                if metric is None:
                    raise NotAssessed(f"metric {name} is missing from {report.name}")
                values[name] = metric.as_double()
            values["kernel"] = action.name()
            launches.append(values)
    if not launches:
        raise NotAssessed(f"{report.name} holds no kernel launch")
    return launches
