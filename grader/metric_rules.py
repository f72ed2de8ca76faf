"""Performance rules on Nsight Compute metrics, declared as data beside each exercise.

A rule compares the student's kernel with the reference solution profiled in the
same run (``max_ratio`` / ``min_ratio``), or with an absolute bound
(``max_value``). Each rule records the GPU it was tuned on and explains itself,
so the student knows what the score means.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED, FAILED, NOT_ASSESSED = "passed", "failed", "not assessed"

# Words of Nsight Compute's metric names that measure time: a duration, cycles, or a rate
# over the elapsed time. Such a value varies with what else runs on the GPU meanwhile; a
# count (instructions, requests, sectors, bank conflicts) does not.
TIMED_WORDS = ("duration", "cycles", "elapsed", "throughput", "per_second", "pct_of_peak")


def is_timed(metric: str) -> bool:
    """Whether ``metric`` measures time (see :data:`TIMED_WORDS`)."""
    return any(word in metric for word in TIMED_WORDS)


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


def separation(rule: MetricRule, correct: list[float], slow: float) -> list[dict]:
    """How a rule's ratio bounds sit between two groups measured against the same reference:
    ``correct`` (ratios of correct solutions, the reference's own included), which must pass,
    and ``slow`` (a slow variant's ratio), which must fail.

    One entry per ratio bound: ``headroom`` is the factor by which the worst correct ratio
    clears the bound and ``slow_margin`` the factor by which the slow ratio misses it (both
    above 1 when the bound separates the groups); ``suggested`` is the geometric mean of the
    two ratios, the bound with equal margins on both sides, or None if no bound separates them.
    """
    entries = []
    for bound, upper in ((rule.max_ratio, True), (rule.min_ratio, False)):
        if bound is None:
            continue
        worst = max(correct) if upper else min(correct)
        headroom = bound / worst if upper else worst / bound
        slow_margin = slow / bound if upper else bound / slow
        separable = worst < slow if upper else worst > slow
        entries.append({"metric": rule.metric, "label": rule.label,
                        "bound": f"{'<=' if upper else '>='} {bound:g}", "worst_correct": worst,
                        "slow": slow, "headroom": headroom, "slow_margin": slow_margin,
                        "suggested": (worst * slow) ** 0.5 if separable else None})
    return entries
