"""``grader batch --profile-workers N`` in gpu mode with metrics on the local cluster:
stages and profiles as separate tasks, so that no stage worker waits for ncu.

Nsight Compute lets one process at a time profile a GPU (a lock file in ``$TMPDIR``, held
from a process's first profiled launch until it exits), and it does not serve the waiting
processes in order. When each worker profiled its own notebooks, six workers reached the
profile stage within seconds of each other, five of them waited up to a minute with their
cores idle, and a batch ended in a tail of profiles (measured on an H100 machine,
2026-11-26, ``benchmarks/results/h100-2026-11-26-batch-process-ends``).

Here a stage worker (:func:`stage_submission`) runs a notebook's check, compute-sanitizer
tools and simulator pass and returns it staged, its kernel cache kept; the client queues
it (:class:`ProfileQueue`), and a profile worker (:func:`profile_staged`; N per GPU,
:mod:`grader.batch_cluster`) profiles the queued notebooks in one ncu run, up to
:data:`grader.batch.PROFILE_GROUP_MAX` of them, then removes their caches. A notebook with
nothing to profile (an error, a skip) is done after its stages.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

PROFILE = "profile"  # the profile workers' resource (grader.batch_cluster.ROLE_ENV)
STAGE = "stage"


def stage_submission(item: tuple[str, str, bytes], options: dict) -> dict:
    """A notebook's stages on a stage worker: ``{"staged": ...}`` (a
    :class:`grader.grade.Staged`, its kernel cache kept for the profile), or its outcome
    (``{"error": ...}``, ``{"skipped": ...}``); with the worker's address."""
    from grader.batch import _stage, _worker_address

    with tempfile.TemporaryDirectory(prefix="grader-batch-") as tmp:
        (outcome,), staged = _stage([item], options, Path(tmp))
    if staged:
        outcome = {"staged": staged[0][1]}
    return {**outcome, "worker": _worker_address()}


def profile_staged(staged: list, shown_as: list[str]) -> list[dict]:
    """Profile staged notebooks (one ncu run per lesson) and finish their reports, on a
    profile worker: ``{"report": ...}`` or ``{"error": ...}`` for each; their kernel caches
    are removed afterwards."""
    from grader.batch import _profile_and_report, _remove, _worker_address

    try:
        outcomes = _profile_and_report(list(enumerate(staged)),
                                       [("", name, b"") for name in shown_as])
    finally:
        for notebook in staged:
            _remove(notebook.kernels)
    worker = _worker_address()
    return [{**outcome, "worker": worker} for outcome in outcomes]


class ProfileQueue:
    """The staged notebooks waiting for a profile worker, in the order their stages ended,
    and the profile workers free: :meth:`ready` hands out groups of at most ``most``
    notebooks, one per free worker (a group is what waited meanwhile: one notebook while
    the workers keep up, more when they fall behind)."""

    def __init__(self, workers: int, most: int):
        self.free, self.most = workers, most
        self.waiting: list = []

    def add(self, notebook) -> None:
        self.waiting.append(notebook)

    def ready(self) -> list[list]:
        groups = []
        while self.free and self.waiting:
            groups.append(self.waiting[:self.most])
            del self.waiting[:self.most]
            self.free -= 1
        return groups

    def done(self) -> None:
        """A profile worker finished its group."""
        self.free += 1


def cluster_roles(client) -> dict[str, int]:
    """How many workers of the cluster hold each resource (``stage``, ``profile``); a
    cluster that names none (``--scheduler``) has no entries."""
    counts: dict[str, int] = {}
    for worker in client.scheduler_info(n_workers=-1)["workers"].values():
        for name in worker.get("resources", {}):
            counts[name] = counts.get(name, 0) + 1
    return counts
