"""The exercises of a grading process's job (:mod:`grader.runner`), over one notebook or more.

A job names the exercises its process works through, in order. A job over one notebook
names them by their ids and carries the notebook's cells (and the folder of its kernel
cache, :mod:`grader.kernel_cache`). A job over several notebooks -- a ``grader batch``
task's compute-sanitizer tools and simulator pass, one process per tool for the task's
notebooks -- names each exercise by a unit key, ``<k>:<exercise id>`` for the k-th
notebook, and carries each notebook's cells and kernel cache. The job's events, the
tools' markers and the results of :mod:`grader.session` use the same names.
"""

from __future__ import annotations

Notebook = tuple[list[str], list[dict], str | None]  # exercise ids in order, cells, kernel cache


def unit_key(k: int, exercise_id: str) -> str:
    """The name of notebook ``k``'s exercise in a job over several notebooks."""
    return f"{k}:{exercise_id}"


def split_unit(name: str) -> tuple[int, str]:
    """(notebook index, exercise id) of a name in a job: a unit key, or an exercise id
    (notebook 0 of a job over one notebook)."""
    k, sep, exercise_id = name.partition(":")
    return (int(k), exercise_id) if sep else (0, name)


def job_exercises(notebooks: list[Notebook]) -> dict:
    """The fields of a check or sanitize job that name its exercises and their notebooks: for
    one notebook ``exercise_ids``, ``cells`` and ``kernel_cache``; for several, unit keys in
    ``exercise_ids`` (each notebook's in its order, the notebooks in turn) and
    ``notebooks``, each notebook's ``cells`` and ``kernel_cache``. ``kernel_cache`` is ""
    where the notebook has no cache of its own. (A profile job names its programs
    otherwise: :func:`grader.runner.job_programs`.)"""
    if len(notebooks) == 1:
        order, cells, kernels = notebooks[0]
        return {"exercise_ids": list(order), "cells": cells, "kernel_cache": kernels or ""}
    return {"exercise_ids": [unit_key(k, i) for k, (order, _, _) in enumerate(notebooks)
                             for i in order],
            "notebooks": [{"cells": cells, "kernel_cache": kernels or ""}
                          for _, cells, kernels in notebooks]}


def notebook_of(job: dict, k: int) -> tuple[list[dict], str | None]:
    """The cells and kernel cache folder (None: the environment's) of the job's notebook
    ``k``."""
    notebook = job["notebooks"][k] if "notebooks" in job else job
    return notebook.get("cells", []), notebook.get("kernel_cache") or None


def per_notebook(named: dict, count: int) -> list[dict]:
    """Values named as in a job (see :func:`split_unit`) as one dict per notebook, by
    exercise id."""
    split: list[dict] = [{} for _ in range(count)]
    for name, value in named.items():
        k, exercise_id = split_unit(name)
        split[k][exercise_id] = value
    return split
