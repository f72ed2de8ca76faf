"""Grade every known-buggy variant of the tests through the whole grader (run on a GPU).

    python benchmarks/buggy_variants.py OUT_DIR [--mode gpu] [--jobs 4] [--sim-only-marked]

The buggy variants of the corpus (grader/exercises/<lesson>/variants/*.toml) plant bugs in
the solution notebooks; tests/test_<lesson>_exercises.py checks that the exercise's own
tests reject them in the mode the suite runs in. This script grades each planted bug as a
student's notebook, with every phase ``grader check`` runs in that mode (in gpu mode: the
check on the GPU, compute-sanitizer, the simulator pass; metric rules are skipped), and
records which phase rejected it. Writes OUT_DIR/buggy_variants.json and a markdown table;
exit code 1 if a variant passed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHASES = ("memcheck", "racecheck", "synccheck")


def variants(sim_only_marked: bool) -> list[dict]:
    """Every buggy variant of the corpus (grader.exercises.corpus): lesson, exercise id,
    description, the variant itself, and ``sim_only`` as a mark."""
    from grader.exercises import LESSONS, buggy_variants

    return [{"lesson": lesson, "exercise": ex.id, "bug": v.description, "variant": v,
             "marks": ["sim_only"] if v.sim_only else []}
            for lesson, exercises in LESSONS.items() for ex in exercises
            for v in buggy_variants(ex.id) if v.sim_only or not sim_only_marked]


def planted_notebook(variant: dict, folder: Path) -> Path:
    """The solution notebook with the bug planted in the exercise's cell."""
    source = next((ROOT / "solutions" / variant["lesson"]).glob("*.ipynb"))
    nb = nbformat.read(source, as_version=4)
    (cell,) = [c for c in nb.cells if c.get("metadata", {}).get("workbook", {}).get(
        "exercise_id") == variant["exercise"] and c.metadata["workbook"].get("role") ==
        "exercise"]
    cell.source = variant["variant"].apply(cell.source)
    path = folder / f"{variant['exercise']}-{abs(hash(variant['bug']))}.ipynb"
    nbformat.write(nb, path)
    return path


def rejected_by(result) -> list[str]:
    """The phases whose findings fail the exercise, read from its messages."""
    phases = []
    if any(not c.passed for c in result.cases) or result.status in ("error", "timeout"):
        phases.append("check")
    for message in result.messages:
        for tool in PHASES:
            if message.startswith(f"compute-sanitizer {tool}:") and "error(s)" in message:
                phases.append(tool)
        if message.startswith("simulator (small cases, sanitizer on): ") and (
                "failed:" in message or "error:" in message):
            phases.append("simulator")
    return phases


def grade_variant(variant: dict, mode: str, folder: Path) -> dict:
    from grader.grade import grade_notebook
    from grader.notebook import load

    path = planted_notebook(variant, folder)
    report = grade_notebook(load(path), mode, timeout=120, exercises=[variant["exercise"]],
                            metrics=False)
    (result,) = report.exercises
    return {**{k: variant[k] for k in ("exercise", "bug", "marks")}, "status": result.status,
            "rejected": not result.passed, "rejected_by": rejected_by(result),
            "seconds": report.seconds, "first_message": (result.messages or [""])[0][:300]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", default="gpu")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--sim-only-marked", action="store_true",
                        help="only the variants the suite marks sim_only")
    parser.add_argument("--limit", type=int, default=None, help="grade the first N only")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    from workbook.bench import device_name

    todo = variants(options.sim_only_marked)[:options.limit]
    record = {"device": device_name() if options.mode == "gpu" else "simulator",
              "date": datetime.date.today().isoformat(), "mode": options.mode, "variants": []}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(options.jobs) as pool:
        futures = {pool.submit(grade_variant, v, options.mode, Path(tmp)): v for v in todo}
        for future in as_completed(futures):
            try:
                row = future.result()
            except Exception as exc:  # noqa: BLE001  (recorded, the others go on)
                v = futures[future]
                row = {"exercise": v["exercise"], "bug": v["bug"], "marks": v["marks"],
                       "status": "harness error", "rejected": False, "rejected_by": [],
                       "first_message": f"{type(exc).__name__}: {exc}"[:300]}
            record["variants"].append(row)
            print(f"{'ok  ' if row['rejected'] else 'MISS'} {row['exercise']:26s} "
                  f"{row['bug'][:50]:50s} {','.join(row['rejected_by'])}", flush=True)
            (options.out / "buggy_variants.json").write_text(json.dumps(record, indent=1))
    rows = sorted(record["variants"], key=lambda r: (r["exercise"], r["bug"]))
    missed = [r for r in rows if not r["rejected"]]
    lines = [f"{record['device']}, {record['date']}, {options.mode} mode: "
             f"{len(rows) - len(missed)} of {len(rows)} variants rejected", "",
             "| exercise | planted bug | suite marks | rejected by |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['exercise']} | {r['bug']} | {', '.join(r['marks'])} | "
              f"{', '.join(r['rejected_by']) or '**passed**'} |" for r in rows]
    (options.out / "buggy_variants.md").write_text("\n".join(lines) + "\n")
    print(lines[0])
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
