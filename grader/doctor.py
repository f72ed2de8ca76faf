"""``grader doctor``: what this machine offers the workbook.

Reports the GPU, driver and compute capability, numba and numba-cuda versions,
whether Nsight Compute (ncu) is installed and allowed to read counters, and the
mode (simulator or GPU) lessons and the grader will use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import metadata

MODE_VARIABLE = "WORKBOOK_MODE"  # read by workbook.mode; popped here so importing it cannot fail


NCU_PATHS = ("/usr/local/cuda/bin/ncu",)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpu_lines() -> list[str]:
    """Name, compute capability and driver of each GPU (needs the CUDA driver)."""
    from workbook.mode import gpu_count

    count = gpu_count()
    if count == 0:
        return ["GPU: none found (no CUDA driver or no device)"]
    from cuda.bindings import driver

    lines = []
    driver.cuInit(0)
    _, version = driver.cuDriverGetVersion()
    lines.append(f"CUDA driver API version: {version // 1000}.{version % 1000 // 10}")
    for ordinal in range(count):
        _, dev = driver.cuDeviceGet(ordinal)
        _, name = driver.cuDeviceGetName(64, dev)
        attr = driver.CUdevice_attribute
        _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                               dev)
        _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                               dev)
        _, sms = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
        label = name.split(b"\0")[0].decode()
        lines.append(f"GPU {ordinal}: {label}, compute capability {major}.{minor}, {sms} SMs")
    return lines


def ncu_status() -> str:
    """Whether ncu exists and can read performance counters."""
    ncu = shutil.which("ncu") or next((p for p in NCU_PATHS if os.path.exists(p)), None)
    if not ncu:
        return "ncu: not found (metric grading will report 'not assessed')"
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ncu: {ncu} does not run ({exc})"
    version = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown version"
    from workbook.mode import gpu_count

    if gpu_count() == 0:
        return f"ncu: {ncu} ({version}); no GPU to profile"
    return f"ncu: {ncu} ({version})"


def report() -> list[str]:
    requested = os.environ.pop(MODE_VARIABLE, "auto")
    from workbook.mode import ModeError, resolve

    lines = [
        f"numba {_version('numba')}, numba-cuda {_version('numba-cuda')}, "
        f"numpy {_version('numpy')}",
        *gpu_lines(),
        ncu_status(),
    ]
    try:
        mode = resolve(requested)
        how = "auto-detected" if requested == "auto" else f"{MODE_VARIABLE}={requested}"
        lines.append(f"mode: {mode} ({how}; set {MODE_VARIABLE}=sim or gpu to override)")
    except ModeError as exc:
        lines.append(f"mode: unavailable: {exc}")
    return lines


def main() -> int:
    for line in report():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
