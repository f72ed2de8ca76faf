"""Write the lesson-02 solution notebook with the slow-but-correct variants of the named
exercises planted (grader/exercises/reduction/variants/*.toml, role "slow")."""
import sys
from pathlib import Path

import nbformat

from grader.exercises.corpus import slow_variant

out, ids = Path(sys.argv[1]), sys.argv[2:]
nb = nbformat.read("solutions/02_reduction/reduction.ipynb", as_version=4)
for cell in nb.cells:
    meta = cell.get("metadata", {}).get("workbook", {})
    if meta.get("role") == "exercise" and meta.get("exercise_id") in ids:
        cell.source = slow_variant(meta["exercise_id"]).apply(cell.source)
        print("planted the slow variant of", meta["exercise_id"])
nbformat.write(nb, out)
