"""compute-sanitizer catching bugs planted in lesson 02's solutions (run on a GPU machine).

Each case takes an exercise from ``solutions/02_reduction``, optionally plants a
bug in its cell, and runs the grader's compute-sanitizer step on it (the same
step ``grader check --mode gpu`` runs after grading: :mod:`grader.sanitizer`).
The unmodified solutions must come out clean, the planted bugs must not::

    python benchmarks/sanitizer_demo.py                   # all cases, all tools
    python benchmarks/sanitizer_demo.py --json results/sanitizer.json

Exit code 0 when every case came out as expected, 1 otherwise, 2 without a GPU
or without compute-sanitizer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("WORKBOOK_MODE", "gpu")

from grader import sanitizer  # noqa: E402
from grader.notebook import load  # noqa: E402

# (name, exercise, tool, text in the solution cell, replacement, expected outcome):
# "clean" (no error), "error" (the tool must report one), or "report" (shown, not judged:
# since Volta, threads that exited count as arrived at a barrier, and synccheck may or may
# not flag the early return that the simulator's synccheck reports).
CASES = [
    ("shared: solution", "reduction.shared", "racecheck", "", "", "clean"),
    ("shared: barrier removed", "reduction.shared", "racecheck",
     "        cuda.syncthreads()\n", "", "error"),
    ("shared: no bounds check in the tree", "reduction.shared", "racecheck",
     "        if t < stride:\n            partial[t] += partial[t + stride]",
     "        partial[t] += partial[t + stride]", "error"),
    ("simple: solution", "reduction.simple", "memcheck", "", "", "clean"),
    ("simple: tree one level too deep", "reduction.simple", "memcheck",
     "while stride <= cuda.blockDim.x:", "while stride <= 2 * cuda.blockDim.x:", "error"),
    ("segmented: solution", "reduction.segmented", "synccheck", "", "", "clean"),
    ("segmented: early return past the end", "reduction.segmented", "synccheck",
     "    value = float32(0.0)\n    if i < n:\n        value = input[i]\n",
     "    if i >= n:\n        return\n    value = input[i]\n", "report"),
    ("simple: barrier inside the branch", "reduction.simple", "synccheck",
     "            input[i] += input[i + stride]\n        cuda.syncthreads()",
     "            input[i] += input[i + stride]\n            cuda.syncthreads()", "report"),
]


def cells_for(exercise_id: str, old: str, new: str) -> list[dict]:
    notebook = load(next((ROOT / "solutions" / "02_reduction").glob("*.ipynb")))
    cells = []
    for cell in notebook.program_for(exercise_id):
        entry = asdict(cell)
        if cell.exercise_id == exercise_id and old:
            assert cell.source.count(old) == 1, f"{exercise_id}: {old!r} does not match once"
            entry["source"] = cell.source.replace(old, new)
        cells.append(entry)
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the findings to this file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per tool run")
    parser.add_argument("--all-tools", action="store_true",
                        help="run every tool on every case, not only the case's tool")
    args = parser.parse_args()

    tool_path = sanitizer.find_tool()
    if tool_path is None:
        print("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")
        return 2
    try:
        import workbook  # noqa: F401  (gpu mode: before numba.cuda)
    except RuntimeError as exc:
        print(f"no GPU: this script needs one ({exc})")
        return 2
    from numba import cuda

    from grader.exercises import get
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else device
    print(f"compute-sanitizer: {tool_path}; GPU: {device}")
    records, as_expected = [], True
    for name, exercise_id, tool, old, new, expected in CASES:
        exercise = get(exercise_id)
        cells = cells_for(exercise_id, old, new)
        for each in sanitizer.TOOLS if args.all_tools else (tool,):
            start = time.monotonic()
            finding = sanitizer.run_tool(tool_path, each, exercise, cells, args.timeout)
            seconds = time.monotonic() - start
            expect = expected if each == tool else ("clean" if not old else "report")
            ok = {"clean": finding.errors == 0, "error": bool(finding.errors),
                  "report": finding.errors is not None}[expect]
            as_expected &= ok
            verdict = "ok" if ok else "UNEXPECTED"
            print(f"\n[{verdict}] {name} -- {each}, expected {expect} ({seconds:.1f} s)")
            print("  " + finding.message().replace("\n", "\n  "))
            records.append({"case": name, "exercise": exercise_id, "tool": each,
                            "expected": expect, "errors": finding.errors,
                            "report": finding.lines, "note": finding.note,
                            "seconds": round(seconds, 1), "as_expected": ok})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"tool": tool_path, "cases": records}, indent=2) + "\n")
    print(f"\n{'every case as expected' if as_expected else 'some cases NOT as expected'}")
    return 0 if as_expected else 1


if __name__ == "__main__":
    sys.exit(main())
