"""Output of NVIDIA's tools that the tests parse, read from tests/fixtures/.

``tests/fixtures/tools/<tool>-<case>.txt`` is compute-sanitizer's output for a case of
``benchmarks/capture_tool_output.py`` (lesson 02's solutions and planted bugs), and
``tests/fixtures/ncu/*.csv`` is ncu's CSV; that script writes both, under the same names, on a
GPU machine.

HAND_TYPED lists the fixtures that are not captures yet: typed by hand in the tools' layout,
with the report lines of a recorded run (benchmarks/results/h200-2026-11-22/sanitizer/demo.log,
H200) and the bank-conflict counts of benchmarks/results/h200-2026-11-22/ldmatrix/bench.log.
The swap is one step: copy the captured files over these and empty HAND_TYPED. The tests
assert only what holds for the real tool's output as well.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

HAND_TYPED = {
    "tools/racecheck-shared-barrier-removed.txt",
    "tools/memcheck-simple-tree-one-level-too-deep.txt",
    "tools/synccheck-segmented-solution.txt",
    "ncu/ldmatrix-bank-conflicts.csv",
}


def tool_output(name: str) -> str:
    """compute-sanitizer's output for ``<tool>-<case>`` (tests/fixtures/tools/NAME.txt)."""
    return (FIXTURES / "tools" / f"{name}.txt").read_text()


def ncu_csv(name: str) -> str:
    """ncu's CSV output ``name`` (tests/fixtures/ncu/NAME.csv)."""
    return (FIXTURES / "ncu" / f"{name}.csv").read_text()
