"""Result records produced by checking exercises; plain data, rendered elsewhere."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED, NOT_IMPLEMENTED, ERROR, TIMEOUT = (
    "passed",
    "failed",
    "not implemented",
    "error",
    "timeout",
)


@dataclass
class CaseResult:
    """One randomized or edge-case test of an exercise."""

    name: str
    status: str
    message: str = ""
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED


@dataclass(repr=False)
class ExerciseResult:
    """Outcome of one exercise: what the grader reports and the notebook shows."""

    id: str
    title: str
    status: str
    score: float
    max_score: float
    messages: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    mode: str = ""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per grading phase

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def add_time(self, phase: str, seconds: float) -> None:
        """Count ``seconds`` of ``phase`` (check, profile, a sanitizer tool) towards it."""
        self.timings[phase] = round(self.timings.get(phase, 0.0) + seconds, 3)
        self.seconds = round(sum(self.timings.values()), 3)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExerciseResult:
        d = dict(d)
        d.pop("passed", None)
        d["cases"] = [CaseResult(**c) for c in d.get("cases", [])]
        return cls(**d)

    def summary(self) -> str:
        """A short human-readable text: status line, then the messages."""
        points = f"{self.score:g}/{self.max_score:g}"
        head = f"[{self.status.upper()}] {self.id} - {self.title} ({points})"
        lines = [line for m in self.messages for line in m.splitlines() or [""]]
        return "\n".join([head, *("  " + line for line in lines)])

    def _repr_html_(self) -> str:
        import html

        colour = "#1a7f37" if self.passed else "#cf222e"
        items = "".join(f"<li><pre style='margin:0'>{html.escape(m)}</pre></li>"
                        for m in self.messages)
        return (
            f"<div style='border-left:4px solid {colour};padding-left:8px'>"
            f"<b style='color:{colour}'>{html.escape(self.status.upper())}</b> "
            f"<code>{html.escape(self.id)}</code> {html.escape(self.title)} "
            f"({self.score:g}/{self.max_score:g})<ul>{items}</ul></div>"
        )

    def __repr__(self) -> str:
        return self.summary()


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 element``, ``2 elements``; ``plural_form`` for irregular nouns."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"
