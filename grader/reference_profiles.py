"""The reference solution's profile, measured once per GPU model and reused.

Every notebook's metric rules compare the student's kernel with the reference solution's,
and both used to be profiled for every notebook. ``grader batch`` points
``WORKBOOK_REFERENCE_PROFILES`` at a folder shared by its workers: the first ncu run that
profiles an exercise's reference there stores its metrics, and later runs on the same GPU
model read them instead of profiling the reference again (``0`` turns it off). The key
covers everything the measurement depends on: the exercise, its metrics, profiled kernels
and warm-up launches (how many, and how they are made: :data:`grader.profiled_range.WARM_UPS`),
how the report's segments are told apart (:data:`grader.profiled_range.RECORDED_SEGMENTS`, or a
marker kernel opening each), the reference program's source, the GPU (name and compute
capability) and numba-cuda's version; anything else changed is a new key. Without the
variable nothing is cached (``grader check`` profiles both in the same run).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from grader.profiled_range import RECORDED_SEGMENTS, WARM_UPS

CACHE_ENV = "WORKBOOK_REFERENCE_PROFILES"


def cache_dir() -> Path | None:
    """The folder of cached reference profiles, or None when caching is off."""
    value = os.environ.get(CACHE_ENV, "")
    return Path(value) if value not in ("", "0") else None


def gpu_identity() -> str:
    """This process's GPU: name and compute capability (the device numba uses)."""
    from numba import cuda

    from workbook.bench import device_name

    major, minor = cuda.get_current_device().compute_capability
    return f"{device_name()} cc{major}.{minor}"


def profile_key(exercise, metrics: list[str], cells: list[dict], gpu: str,
                segments: str = RECORDED_SEGMENTS) -> str:
    """The cache key of ``exercise``'s reference profile taken from ``cells`` on ``gpu``, in
    a run whose report's ``segments`` are told apart as it says
    (:mod:`grader.profiled_range`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        numba_cuda = version("numba-cuda")
    except PackageNotFoundError:
        numba_cuda = "unknown"
    described = {
        "exercise": exercise.id, "metrics": sorted(metrics), "gpu": gpu,
        "kernels": list(exercise.profile_kernels or (exercise.entry,)),
        "skip": exercise.profile_skip, "warm-ups": WARM_UPS, "segments": segments,
        "numba-cuda": numba_cuda,
        "program": [[c.get("role"), c.get("exercise_id"), c["source"]] for c in cells],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def load(key: str) -> dict[str, float] | None:
    """The metrics stored under ``key``, or None."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        return json.loads((folder / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def store(key: str, metrics: dict) -> None:
    """Store ``metrics`` under ``key`` (written whole, then renamed: readers never see half
    a file)."""
    folder = cache_dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{key}.{os.getpid()}.tmp"
    partial.write_text(json.dumps(metrics))
    partial.replace(folder / f"{key}.json")
