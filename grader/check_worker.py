"""The process that runs a notebook's checks: ``python -m grader.check_worker EVENTS FD PID``.

Started by :mod:`grader.contained` before it is needed, so that Python, numba and the
CUDA context are ready when a check comes. It reads jobs (pickled dicts) from the pipe
``FD`` one at a time, and reports in EVENTS (JSON lines, :class:`grader.runner.Events`):

* ``ready``  -- imports done, CUDA context made;
* ``case``   -- the check starts its next test case (the parent's clock of progress);
* ``need``   -- the tests read a name that was not sent; the parent answers on the pipe;
* ``result`` -- the check's :class:`~grader.results.ExerciseResult`.

What the student's code prints goes to this process's stdout and stderr, which the parent
shows in the cell. The process ends, deleting the folder of EVENTS, when the pipe closes
or when its parent ``PID`` is gone (a kernel that never ends keeps it from reading the
pipe: a thread watches).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, MutableMapping

from grader.exercise import describe_exception
from grader.runner import Events, error_result
from grader.shipping import ShippingError, loads

PARENT_POLL_SECONDS = 1.0
KEPT = 8  # objects of the last checks kept, with their compiled kernels


class RemoteNamespace(MutableMapping):
    """The notebook's namespace as the tests see it here.

    ``store`` holds what was sent (the exercise's names) and is also the global namespace
    of the functions that came with them: a name the tests replace is replaced for the
    student's code too, as in the notebook. A name that was not sent is fetched from the
    parent when the tests read it, for this check only.
    """

    def __init__(self, store: dict, fetch: Callable[[str], tuple[bool, object]],
                 absent: frozenset[str] = frozenset()):
        self.store, self.fetch, self.absent = store, fetch, absent
        self.fetched: dict[str, object] = {}

    def __getitem__(self, name: str):
        if name in self.store:
            return self.store[name]
        if name not in self.fetched:
            present, value = (False, None) if name in self.absent else self.fetch(name)
            if not present:
                raise KeyError(name)
            self.fetched[name] = value
        return self.fetched[name]

    def __contains__(self, name) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __setitem__(self, name: str, value) -> None:
        self.store[name] = value

    def __delitem__(self, name: str) -> None:
        del self.store[name]

    def __iter__(self):
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)


class Worker:
    """The job loop: one check at a time, objects of recent checks kept by their bytes."""

    def __init__(self, channel, events: Events, mode: str):
        self.channel, self.events, self.mode = channel, events, mode
        self.kept: OrderedDict[str, tuple[dict, dict]] = OrderedDict()

    def serve(self) -> None:
        while True:
            try:
                job = pickle.load(self.channel)
            except EOFError:
                return
            result = self.check(job)
            self.events.emit(job=job["job"], result=result.to_dict())

    def objects(self, data: bytes) -> tuple[dict, dict]:
        """The names sent and their shared globals; the same bytes give the same objects
        (kernels already compiled by an earlier check of unchanged code)."""
        key = hashlib.sha256(data).hexdigest()
        if key not in self.kept:
            objects, store = loads(data)
            store.update(objects)
            self.kept[key] = objects, store
            while len(self.kept) > KEPT:
                self.kept.popitem(last=False)
        self.kept.move_to_end(key)
        return self.kept[key]

    def check(self, job: dict):
        from grader.exercise import check_exercise
        from grader.exercises import get

        exercise = get(job["exercise"])
        follow_the_notebook(job)
        try:
            _, store = self.objects(job["objects"])
        except Exception as exc:  # noqa: BLE001  (the student's objects may fail to rebuild)
            return error_result(exercise, "the notebook's objects could not be rebuilt in the "
                                f"checking process:\n{describe_exception(exc)}", self.mode)
        namespace = RemoteNamespace(store, lambda name: self.fetch(job["job"], name),
                                    frozenset(job.get("absent", ())))
        def on_case(k: int, n: int, case) -> None:  # the parent's sign of progress
            self.events.emit(job=job["job"], case=k - 1)

        try:
            return check_exercise(exercise, namespace, self.mode, seed=job.get("seed"),
                                  on_case=on_case)
        except Exception as exc:  # noqa: BLE001  (reported as the check's error, not a crash)
            return error_result(exercise, describe_exception(exc), self.mode)

    def fetch(self, job_id: int, name: str) -> tuple[bool, object]:
        """Ask the parent for ``name``: (whether the notebook defines it, its value)."""
        self.events.emit(job=job_id, need=name)
        answer = pickle.load(self.channel)
        if "error" in answer:
            raise ShippingError(answer["error"])
        if "objects" not in answer:
            return False, None
        objects, _ = loads(answer["objects"])
        return True, objects[name]


def follow_the_notebook(job: dict) -> None:
    """The notebook's settings, folder and import path as they are now (they may have
    changed since this process started): relative paths and imports resolve as there."""
    for name, value in job.get("environ", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if os.path.isdir(job.get("cwd") or ""):
        os.chdir(job["cwd"])
    sys.path.extend(p for p in job.get("path", ()) if p not in sys.path)


def exit_with_parent(parent: int, folder: str) -> None:
    """End this process once ``parent`` is gone, even while a kernel keeps the main thread
    in a CUDA driver call (the call releases the GIL); its ``folder`` (events, output),
    which the parent would have deleted, goes too."""
    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, name="check-worker-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    events_path, fd, parent = argv[0], int(argv[1]), int(argv[2])
    folder = os.path.dirname(os.path.abspath(events_path))
    exit_with_parent(parent, folder)
    import workbook  # chooses the mode (WORKBOOK_MODE) before numba.cuda is imported

    # isort: split
    import grader.exercises  # noqa: F401  (every lesson's tests, before the first check)

    if workbook.MODE == "gpu":
        from numba import cuda

        cuda.current_context()  # the CUDA context, now rather than in the first check
    events = Events(events_path)
    events.emit(ready=os.getpid(), mode=workbook.MODE, at=time.monotonic())
    with os.fdopen(fd, "rb") as channel:
        Worker(channel, events, workbook.MODE).serve()
    shutil.rmtree(folder, ignore_errors=True)  # the pipe closed: the parent is gone
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
