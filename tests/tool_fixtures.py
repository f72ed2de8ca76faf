"""Output of NVIDIA's tools that the tests parse, read from tests/fixtures/.

``tests/fixtures/tools/<tool>-<case>.txt`` is compute-sanitizer's output for a case of
``benchmarks/capture_tool_output.py`` (lesson 02's solutions and planted bugs), and
``tests/fixtures/ncu/*.csv`` is ncu's CSV; that script writes both, under the same names, on a
GPU machine.

The fixtures were captured on an NVIDIA H200 on 2026-11-25 (compute-sanitizer and Nsight
Compute 2025.3.1; the run's manifest is in benchmarks/results/h200-2026-11-25-tool-captures/).
HAND_TYPED lists fixtures typed by hand in a tool's layout, waiting for a capture: none now.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

HAND_TYPED: set[str] = set()  # every fixture is a capture (H200, 2026-11-25)


def tool_output(name: str) -> str:
    """compute-sanitizer's output for ``<tool>-<case>`` (tests/fixtures/tools/NAME.txt)."""
    return (FIXTURES / "tools" / f"{name}.txt").read_text()


def ncu_csv(name: str) -> str:
    """ncu's CSV output ``name`` (tests/fixtures/ncu/NAME.csv)."""
    return (FIXTURES / "ncu" / f"{name}.csv").read_text()
