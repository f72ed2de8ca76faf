"""Performance rules on Nsight Compute metrics, declared as data beside each exercise.

A rule compares the student's kernel with the reference solution profiled in the
same run (``max_ratio`` / ``min_ratio``), or with an absolute bound
(``max_value``). Each rule records the GPU it was tuned on and explains itself,
so the student knows what the score means.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED, FAILED, NOT_ASSESSED = "passed", "failed", "not assessed"


@dataclass(frozen=True)
class MetricRule:
    metric: str
    label: str
    why: str
    tuned_on: str
    max_ratio: float | None = None
    min_ratio: float | None = None
    max_value: float | None = None

    def describe(self) -> str:
        parts = []
        if self.max_ratio is not None:
            parts.append(f"<= {self.max_ratio:g} x reference")
        if self.min_ratio is not None:
            parts.append(f">= {self.min_ratio:g} x reference")
        if self.max_value is not None:
            parts.append(f"<= {self.max_value:g}")
        return f"{self.label} ({self.metric}) {' and '.join(parts)}"

    def evaluate(self, value: float, reference: float | None) -> dict:
        """The outcome as plain data: value, reference, ratio, rule, status."""
        ratio = value / reference if reference else None
        ok = True
        if self.max_ratio is not None:
            ok &= ratio is not None and ratio <= self.max_ratio
        if self.min_ratio is not None:
            ok &= ratio is not None and ratio >= self.min_ratio
        if self.max_value is not None:
            ok &= value <= self.max_value
        return {"metric": self.metric, "label": self.label, "rule": self.describe(),
                "value": value, "reference": reference, "ratio": ratio,
                "status": PASSED if ok else FAILED, "why": self.why, "tuned_on": self.tuned_on}

    def not_assessed(self, reason: str) -> dict:
        return {"metric": self.metric, "label": self.label, "rule": self.describe(),
                "value": None, "reference": None, "ratio": None, "status": NOT_ASSESSED,
                "reason": reason, "why": self.why, "tuned_on": self.tuned_on}


def format_outcome(outcome: dict) -> str:
    """One line a student can read: value, reference, ratio, rule, verdict."""
    if outcome["status"] == NOT_ASSESSED:
        return f"{outcome['label']}: not assessed ({outcome['reason']})"
    ratio = f"{outcome['ratio']:.2f}x" if outcome["ratio"] is not None else "n/a"
    return (f"{outcome['label']}: {outcome['value']:,.4g} vs reference "
            f"{outcome['reference']:,.4g} ({ratio}); rule {outcome['rule']}: "
            f"{outcome['status']}")
