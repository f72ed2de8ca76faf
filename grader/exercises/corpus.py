"""The variants corpus: other submissions of each exercise, kept as data beside it.

Every lesson package keeps one TOML file per exercise in its ``variants/`` folder
(``grader/exercises/reduction/variants/shuffle.toml`` for ``reduction.shuffle``), with
three kinds of entry, each a change to the solution notebook's exercise cell:

``[slow]``
    one correct submission that wastes what the lesson teaches: the metric rules must
    fail it on a GPU (``benchmarks/metric_rules.py``);
``[[correct]]``
    correct submissions written differently from the reference: they must pass the
    tests and every metric rule;
``[[buggy]]``
    wrong submissions: the exercise's tests must reject them, with the diagnosis that
    ``expect`` names (``tests/test_<lesson>_exercises.py``, ``benchmarks/buggy_variants.py``).

An entry either replaces the whole cell (``cell = '''...'''``) or replaces one text
that occurs exactly once in it (``old = "..."``, ``new = "..."``). A buggy entry's
``expect`` maps a kind of rejection (a key of ``tests/solution_cells.BUG_STATUSES``:
``"wrong result"``, ``"race"``, ...) to a phrase, or a list of alternative phrases, that
the grader's message holds; several kinds mean either outcome. ``expect_sim`` and
``expect_gpu`` replace it in one mode; ``sim_only = true`` marks a bug that only the
simulator can be relied on to find (a race may give the right answer on a GPU).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROLES = ("slow", "correct", "buggy")
_KEYS = {"description", "cell", "old", "new", "expect", "expect_sim", "expect_gpu", "sim_only"}


class CorpusError(ValueError):
    """A variants file that does not follow the format above."""


@dataclass(frozen=True)
class Variant:
    """One submission of ``exercise_id`` other than the reference solution."""

    exercise_id: str
    role: str  # "slow", "correct" or "buggy"
    description: str
    new: str
    old: str | None = None  # None: ``new`` is the whole exercise cell
    expect: dict = field(default_factory=dict, compare=False)  # mode -> {kind: phrases}
    sim_only: bool = False

    @property
    def short_id(self) -> str:
        """A short id for test names: ``shuffle-a_shuffle_step_missing``."""
        name = self.exercise_id.split(".", 1)[1]
        return f"{name}-{self.description.split(' (')[0].replace(' ', '_')}"

    def apply(self, cell_source: str) -> str:
        """The exercise cell with this variant written into it."""
        if self.old is None:
            return self.new
        count = cell_source.count(self.old)
        if count != 1:
            raise CorpusError(f"{self.exercise_id} {self.role} variant {self.description!r}: "
                              f"its old text occurs {count} times in the cell, not once")
        return cell_source.replace(self.old, self.new)

    def expected(self, mode: str) -> list[tuple[str, tuple[str, ...]]]:
        """The ``(kind, phrases)`` rejections a buggy variant may show in ``mode``."""
        table = self.expect.get(mode) or self.expect.get("any") or {}
        return [(kind, (words,) if isinstance(words, str) else tuple(words))
                for kind, words in table.items()]


def variants_file(exercise_id: str) -> Path:
    package, name = exercise_id.split(".", 1)
    return HERE / package / "variants" / f"{name}.toml"


@cache
def _load(exercise_id: str) -> dict[str, tuple[Variant, ...]]:
    path = variants_file(exercise_id)
    if not path.exists():
        return {role: () for role in ROLES}
    with path.open("rb") as f:
        data = tomllib.load(f)
    unknown = set(data) - set(ROLES)
    if unknown:
        raise CorpusError(f"{path}: unknown sections {sorted(unknown)}; known: {ROLES}")
    slow = data.get("slow")
    if isinstance(slow, list):
        raise CorpusError(f"{path}: one [slow] variant per exercise, not a list")
    found = {"slow": () if slow is None else (_variant(exercise_id, "slow", slow, path),)}
    for role in ("correct", "buggy"):
        found[role] = tuple(_variant(exercise_id, role, entry, path)
                            for entry in data.get(role, ()))
    return found


def _variant(exercise_id: str, role: str, entry: dict, path: Path) -> Variant:
    where = f"{path.name} [{role}] {entry.get('description', '?')!r}"
    unknown = set(entry) - _KEYS
    if unknown:
        raise CorpusError(f"{where}: unknown keys {sorted(unknown)}")
    if not entry.get("description"):
        raise CorpusError(f"{where}: needs a description")
    if ("cell" in entry) == ("old" in entry or "new" in entry):
        raise CorpusError(f"{where}: give either cell, or old and new")
    if "cell" not in entry and not entry.get("old"):
        raise CorpusError(f"{where}: old must name the text to replace")
    expect = {mode: entry[key] for mode, key in (("any", "expect"), ("sim", "expect_sim"),
                                                   ("gpu", "expect_gpu")) if key in entry}
    if role == "buggy":
        modes = set(expect)
        if not ("any" in modes or {"sim", "gpu"} <= modes
                or (entry.get("sim_only") and "sim" in modes)):
            raise CorpusError(f"{where}: a buggy variant names the rejection it expects in "
                              "every mode it runs in (expect, or expect_sim and expect_gpu)")
        for table in expect.values():
            if not table or not all(isinstance(w, str) and w.strip() or
                                    isinstance(w, list) and w and all(p.strip() for p in w)
                                    for w in table.values()):
                raise CorpusError(f"{where}: expect maps a kind to a phrase or phrases")
    elif expect or entry.get("sim_only"):
        raise CorpusError(f"{where}: only buggy variants expect a rejection")
    return Variant(exercise_id=exercise_id, role=role, description=entry["description"],
                   new=entry.get("cell", entry.get("new")), old=entry.get("old"),
                   expect=expect, sim_only=bool(entry.get("sim_only")))


def slow_variant(exercise_id: str) -> Variant | None:
    """The exercise's slow-but-correct submission, or None."""
    found = _load(exercise_id)["slow"]
    return found[0] if found else None


def correct_variants(exercise_id: str) -> tuple[Variant, ...]:
    """The exercise's correct submissions written differently from the reference."""
    return _load(exercise_id)["correct"]


def buggy_variants(exercise_id: str) -> tuple[Variant, ...]:
    """The exercise's known-buggy submissions, which its tests must reject."""
    return _load(exercise_id)["buggy"]


def all_variants(exercise_id: str) -> tuple[Variant, ...]:
    return tuple(v for role in ROLES for v in _load(exercise_id)[role])
