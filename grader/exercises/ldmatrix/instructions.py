"""The instructions each kernel of lesson 01 must issue: counted by the simulator as it runs,
found in the compiled SASS on a GPU."""

from __future__ import annotations

import math

from grader.exercise import Mismatch

# The instructions of the lesson: SASS opcode -> the PTX instruction, the name under which
# the simulator's emulation counts it (workbook.sim.foreign.stats())
INSTRUCTIONS = {"LDSM": "ldmatrix", "STSM": "stmatrix", "HMMA": "mma"}
SCALAR_LOADS = ("fragments assembled from ordinary shared-memory loads hold the same values but "
                "skip the instruction this exercise is about")

_sass_checked: set[int] = set()


def _name(kernel) -> str:
    return getattr(getattr(kernel, "py_func", kernel), "__name__", "the kernel")


def emulated_stats() -> dict[str, dict[str, int]]:
    """The simulator's counts for the launch just made (see :func:`launches.launch`)."""
    from workbook.sim import foreign

    return foreign.stats()


def expect_instructions(kernel, mode: str, why: str, executed: dict | None = None,
                        **minimum: int) -> None:
    """``kernel`` issues at least ``minimum[op]`` instructions of each SASS opcode ``op``
    (a key of :data:`INSTRUCTIONS`). In the simulator: warp-wide executions in the launch
    just made, as the emulation counted them, at least ``executed[op]`` where given (for a
    kernel whose instructions sit in loops). On a GPU: instructions in the compiled SASS
    (skipped where no disassembler is installed). ``why`` says what the reference issues."""
    if mode == "sim":
        stats = emulated_stats()
        minimum = {**minimum, **(executed or {})}
        got = {op: stats.get(INSTRUCTIONS[op], {}).get("instructions", 0) for op in minimum}
        found = "issued {n} {instruction} instruction{s} (counted by the simulator as it ran)"
    else:
        if id(kernel) in _sass_checked:
            return
        from workbook import ptx

        text = ptx.sass(kernel)
        if text is None:
            return
        got = ptx.count_sass(text, tuple(minimum))
        found = "has {n} {op} ({instruction}) instruction{s} in its compiled SASS"
    for op, least in minimum.items():
        if got[op] < least:
            what = found.format(n=got[op], op=op, instruction=INSTRUCTIONS[op],
                                s="" if got[op] == 1 else "s")
            raise Mismatch(f"{_name(kernel)} {what}, expected at least {least}: {why}")
    if mode != "sim":
        _sass_checked.add(id(kernel))


MMA_USES = ("the reference loads A's fragments with one ldmatrix .x4 and B's with one ldmatrix "
            f".x2.trans, then issues one mma.m16n8k16; {SCALAR_LOADS}")

# A GEMM's ldmatrix and mma counts, as shares of the reference's, which issues per warp and
# 16-wide step of k one ldmatrix .x4 (A), two .x2.trans (B) and two mma.m16n8k16: 3
# ldmatrix per 2 mma. Loading B with one .x4 issues 2 (0.67 of it), two warps computing
# 32x16 tiles 0.5; B's fragments from scalar loads 1 (0.33), both none. Every tensor-core
# GEMM issues M*N*K/2048 mma. The simulator and the GPU's metric rules hold a kernel to the
# same shares.
LDSM_SHARE = 0.4
HMMA_SHARE = 0.75


def gemm_instructions(m: int, n: int, k: int) -> tuple[dict, str]:
    """The least ldmatrix and mma a correct ``m x n x k`` GEMM issues (for
    :func:`expect_instructions`), and why."""
    mmas = m * n * k // 2048
    ldsm = 3 * mmas // 2
    least = {"LDSM": max(1, math.ceil(LDSM_SHARE * ldsm)),
             "HMMA": max(1, math.ceil(HMMA_SHARE * mmas))}
    why = (f"the reference issues {ldsm} ldmatrix and {mmas} mma.m16n8k16 for this {m}x{n}x{k} "
           f"product (per warp and 16-wide step of k, one ldmatrix .x4 for A's fragments, two "
           f".x2.trans for B's, two mma), and a kernel must issue at least "
           f"{LDSM_SHARE:.0%} and {HMMA_SHARE:.0%} of them, as on a GPU; {SCALAR_LOADS} (as "
           f"the lesson's gemm_scalar_kernel does, to show what ldmatrix saves)")
    return least, why
