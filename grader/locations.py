"""Source locations in a notebook's check as the student sees the cells.

IPython compiles each cell under a temporary file name (``/tmp/ipykernel_6563/698187053.py``);
a report names it ``<cell In[N]>`` instead, N being the execution count Jupyter shows left
of the cell, as the grader's reports name a notebook's cell ``<cell N>`` (its index).
"""

from __future__ import annotations

import re
import sys

# IPython's file for a cell: <tmp>/ipykernel_<pid>/<hash>.py
KERNEL_FILE = re.compile(r"(?:[^\s\"'(<>]*[/\\])?ipykernel_\d+[/\\]\d+\.py")


def cell_name(filename: str, shell=None) -> str | None:
    """``<cell In[N]>`` for a cell's file in the running IPython shell, or None."""
    shell = shell or _shell()
    compiler = getattr(shell, "compile", None)
    named = compiler.format_code_name(filename) if compiler is not None else None
    return f"<cell {named[1]}>" if named else None


def in_cell_terms(text: str, shell=None) -> str:
    """``text`` with every cell's temporary file name replaced by its ``<cell In[N]>``."""
    shell = shell or _shell()
    if shell is None or "ipykernel_" not in text:
        return text
    return KERNEL_FILE.sub(lambda m: cell_name(m.group(0), shell) or m.group(0), text)


def result_in_cell_terms(result, shell=None):
    """An :class:`~grader.results.ExerciseResult` whose messages name cells (in place)."""
    shell = shell or _shell()
    if shell is not None and hasattr(result, "messages"):
        result.messages = [in_cell_terms(m, shell) for m in result.messages]
        for case in result.cases:
            case.message = in_cell_terms(case.message, shell)
    return result


def _shell():
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython else None
