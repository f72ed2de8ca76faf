"""Execute a lesson notebook top to bottom and save it with its outputs.

    python benchmarks/run_notebook.py solutions/02_reduction/reduction.ipynb OUT.ipynb

Used to record a lesson run on a GPU machine; the source notebook is not modified.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(source: str, target: str) -> int:
    nb = nbformat.read(source, as_version=4)
    start = time.monotonic()
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(source).parent)}}).execute()
    nbformat.write(nb, target)
    print(f"executed {source} in {time.monotonic() - start:.0f} s -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
