"""The test cases of lesson 01: their kinds, and the typed shape of a GEMM case."""

from __future__ import annotations

from dataclasses import dataclass

from grader.exercise import Case


@dataclass(frozen=True)
class GemmCase(Case):
    """A product of an ``m x k`` and a ``k x n`` float16 matrix; ``size`` is ``m``."""

    m: int = 16
    n: int = 8
    k: int = 16

    @classmethod
    def of(cls, m: int, n: int, k: int, kind: str) -> GemmCase:
        return cls(m, kind, m=m, n=n, k=k)

    def name(self) -> str:
        return f"n={self.size}, {self.kind}, {self.m}x{self.n}x{self.k}"


def both_modes(cases) -> dict:
    return {"sim": cases, "gpu": cases}


ADDRESS_CASES = both_modes((Case(32, "threads"), Case(64, "threads")))
PREDICT_CASES = both_modes((Case(32, "map"),))
# one warp loading distinct values: 0 .. size-1 in order (iota), then random ones
FRAGMENT_CASES = both_modes((Case(32, "iota"), Case(32, "random"), Case(32, "random")))

_TILE = (16, 8, 16)  # one mma.m16n8k16
MMA_CASES = {
    "sim": tuple(GemmCase.of(*_TILE, kind) for kind in ("integers", "identity", "normal")),
    "gpu": tuple(GemmCase.of(*_TILE, kind)
                 for kind in ("integers", "identity", "normal", "normal")),
}

GEMM_CASES = {
    "sim": (GemmCase.of(32, 32, 32, "integers"), GemmCase.of(64, 32, 64, "normal"),
            GemmCase.of(32, 64, 32, "normal")),
    "gpu": (GemmCase.of(32, 32, 32, "integers"), GemmCase.of(64, 32, 64, "normal"),
            GemmCase.of(128, 256, 512, "integers"), GemmCase.of(512, 512, 512, "normal"),
            GemmCase.of(1024, 768, 2048, "normal"), GemmCase.of(256, 256, 4096, "normal")),
}
