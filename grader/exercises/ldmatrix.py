"""Lesson 01 (ldmatrix / stmatrix / mma through inline PTX): launches, references and tests.

Every exercise that has CUDA C first compiles it with NVRTC and assembles it
with ptxas on the CPU (:mod:`workbook.ptx`), checks numba's foreign-function
ABI and that the function contains the intended instruction (``ldmatrix .x1``
without ``.trans``, ``cvta.to.shared`` before it, ...). Then the kernels run:
on the GPU, or in the simulator where the PTX itself is executed
(:mod:`workbook.sim.foreign`). Each kernel must issue the instruction its exercise
is about (:func:`expect_instructions`): the simulator counts the ``ldmatrix``,
``stmatrix`` and ``mma`` it executes, and on a GPU the compiled SASS must contain
``LDSM``, ``STSM``, ``HMMA`` where a disassembler is installed; fragments assembled
from ordinary shared-memory loads give the same numbers without the instruction. On
a GPU with Nsight Compute the metric rules of ``mma`` and ``gemm`` count the
instructions executed as well.

Input matrices hold distinct values, so that a wrong fragment can be traced to
the element it came from. float16 results are compared with a float64 numpy
reference within ``(K + K/16 + 1) * 2^-23 * (|A| @ |B|)``: one float32 unit of
truncation per product and per accumulation (tensor cores truncate); small-integer
inputs must come out exact.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from grader import launch as L
from grader.exercise import Case, Exercise, Mismatch, with_metric_rules
from grader.metric_rules import MetricRule
from grader.release import C_STUB
from workbook import fragments as F

LESSON = "01_ldmatrix"
SHARED_BYTES = 228 * 1024  # shared memory of one SM on H100/H200


# --- CUDA C ---------------------------------------------------------------------------------

def c_source(ns, name: str) -> str:
    """The CUDA C string ``ns[name]``; NotImplementedError while it is still the stub."""
    source = ns.get(name)
    if not isinstance(source, str):
        raise Mismatch(f"{name} must be a string holding CUDA C (it is {type(source).__name__})")
    if C_STUB in source:
        raise NotImplementedError(f"{name}: the CUDA C function is still a stub (return -1)")
    return source


def check_c(ns, name: str, function: str, nargs: int, requires) -> None:
    """Compile and assemble ``ns[name]`` for sm_90; check ``function``'s ABI and instructions."""
    from workbook import ptx

    source = c_source(ns, name)
    try:
        ptx.check_foreign_function(source, function, nargs, requires)
    except ptx.CompileError as exc:
        raise Mismatch(f"{name} does not compile: {exc}") from None
    except ptx.ForeignFunctionError as exc:
        raise Mismatch(f"{name}: {exc}") from None


CVTA = ("cvta", ("to", "shared"), ())


def _ldmatrix(num: str, trans: bool):
    lacks = () if trans else ("trans",)
    has = ("sync", "aligned", "m8n8", num, *(("trans",) if trans else ()), "shared", "b16")
    return [("ldmatrix", has, lacks), CVTA]


C_CHECKS = {
    "ADDRESS_CU": ("shared_address", 1, [CVTA]),
    "LDMATRIX_X1_CU": ("ldmatrix_x1", 1, _ldmatrix("x1", False)),
    "LDMATRIX_X4_CU": ("ldmatrix_x4", 1, _ldmatrix("x4", False)),
    "LDMATRIX_X2_TRANS_CU": ("ldmatrix_x2_trans", 1, _ldmatrix("x2", True)),
    "STMATRIX_CU": ("stmatrix_x4", 5, [("stmatrix", ("sync", "aligned", "m8n8", "x4", "shared",
                                                      "b16"), ("trans",)), CVTA]),
    "MMA_CU": ("mma_m16n8k16", 10, [("mma", ("sync", "aligned", "m16n8k16", "row", "col", "f32",
                                               "f16"), ())]),
}


def check_sources(ns, *names: str) -> None:
    for name in names:
        function, nargs, requires = C_CHECKS[name]
        check_c(ns, name, function, nargs, requires)


# The instructions of the lesson: SASS opcode -> the PTX instruction, the name under which
# the simulator's emulation counts it (workbook.sim.foreign.stats())
INSTRUCTIONS = {"LDSM": "ldmatrix", "STSM": "stmatrix", "HMMA": "mma"}
SCALAR_LOADS = ("fragments assembled from ordinary shared-memory loads hold the same values but "
                "skip the instruction this exercise is about")

_sass_checked: set[int] = set()


def _name(kernel) -> str:
    return getattr(getattr(kernel, "py_func", kernel), "__name__", "the kernel")


def emulated_stats() -> dict[str, dict[str, int]]:
    """The simulator's counts for the launch just made (see :func:`_launch`)."""
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


# --- inputs ---------------------------------------------------------------------------------

# The halves of the simulator sanitizer's poison word 0x7FADBEEF: it takes shared memory
# still holding them for never written, and the emulated stmatrix writes it does not see.
POISON_HALVES = (0xBEEF, 0x7FAD)
_VALUES = np.setdiff1d(np.arange(1 << 16), POISON_HALVES)


def distinct_matrix(rng, shape) -> np.ndarray:
    """uint16 matrix of distinct values: 0 .. size-1 in order (rng None), or random ones."""
    size = int(np.prod(shape))
    if rng is None:
        return np.arange(size, dtype=np.uint16).reshape(shape)
    values = rng.choice(_VALUES, size=size, replace=False)
    return values.astype(np.uint16).reshape(shape)


def _matrix_inputs(shape):
    def make(rng, case):
        return {"m": distinct_matrix(None if case.kind == "iota" else rng, shape)}

    return make


def _device(array):
    return L.cuda().to_device(np.ascontiguousarray(array))


def _zeros(shape, dtype, fill=0):
    return L.cuda().to_device(np.full(shape, fill, dtype=dtype))


def _launch(kernel, grid, block, *args):
    """Launch and wait. In the simulator the emulation's counts start again from zero, so that
    :func:`expect_instructions` and :func:`emulated_stats` see this launch's."""
    if L.cuda().config.ENABLE_CUDASIM:
        from workbook.sim import foreign

        foreign.reset_stats()
    kernel[grid, block](*args)
    L.cuda().synchronize()


# --- comparing fragments --------------------------------------------------------------------

def _hex(v) -> str:
    return f"{int(v):#010x}"


def expect_registers(got, want, what: str, trans_want=None, source=None) -> None:
    """Compare registers (32, n); explain the common mistakes."""
    got = np.asarray(got, np.uint32).reshape(want.shape)
    if np.array_equal(got, want):
        return
    n = want.shape[1]
    hints = []
    if not got.any():
        hints.append("Every register is 0: nothing was stored (in GPU mode a foreign function "
                     "that returns a nonzero status ends the thread silently).")
    if trans_want is not None and np.array_equal(got, trans_want):
        hints.append("These are the transposed fragments: the layout of the other variant "
                     "(with or without .trans).")
    lo, hi = F.unpack(got)
    if np.isin(np.concatenate([lo, hi]), POISON_HALVES).any():
        hints.append("Some registers hold 0xBEEF / 0x7FAD, the simulator's fill for shared "
                     "memory nobody wrote: was every element of the tile copied before the "
                     "ldmatrix, with a cuda.syncthreads() in between?")
    if np.array_equal(F.pack(hi, lo), want):
        hints.append("The low and high 16-bit halves are swapped: the element with the smaller "
                     "column goes into the low half.")
    if n > 1 and not hints:
        moved = [(i, j) for i in range(n) for j in range(n)
                 if i != j and np.array_equal(got[:, i], want[:, j])]
        if moved:
            i, j = moved[0]
            hints.append(f"Register {i} holds what register {j} should: check the order of the "
                         "outputs in the asm statement and which lanes address which matrix "
                         "(matrix i gets its row addresses from lanes 8i .. 8i+7).")
    if source is not None and not hints:
        hints.extend(_trace_rows(got, want, source))
    bad = np.argwhere(got != want)
    lane, reg = (int(x) for x in bad[0])
    first = (f"{what}: {len(bad)} of {want.size} registers differ; first at lane {lane}, "
             f"register {reg}: expected {_hex(want[lane, reg])}, got {_hex(got[lane, reg])}.")
    raise Mismatch(" ".join([first, *hints]))


def _trace_rows(got, want, source) -> list[str]:
    """Locate the elements a wrong register holds in the (distinct-valued) source matrix."""
    where = {int(v): divmod(i, source.shape[1]) for i, v in enumerate(source.reshape(-1))}
    lo_g, _ = F.unpack(got)
    lo_w, _ = F.unpack(want)
    for lane in range(32):
        for reg in range(want.shape[1]):
            g, w = int(lo_g[lane, reg]), int(lo_w[lane, reg])
            if g != w and g in where and w in where:
                (gr, gc), (wr, wc) = where[g], where[w]
                return [f"Lane {lane} register {reg} should start with element ({wr}, {wc}) of "
                        f"the matrix but starts with ({gr}, {gc}): the row address that feeds "
                        f"it is wrong (lane 8i + r must point at row r of matrix i)."]
    return []


# --- exercise 1: shared-space addresses -----------------------------------------------------

def _run_address(ns, inputs, mode):
    check_sources(ns, "ADDRESS_CU")
    n = inputs["threads"]
    out = _zeros(n, np.uint32, 0xFFFFFFFF)
    _launch(ns["shared_address_kernel"], 1, n, out)
    return out.copy_to_host()


def _verify_address(got, expected, inputs, mode):
    got = got.astype(np.int64)
    steps = got - got[0]
    want = 2 * np.arange(got.size)
    if not np.array_equal(steps, want):
        t = int(np.nonzero(steps != want)[0][0])
        raise Mismatch(f"thread {t}'s address is {steps[t]} bytes after thread 0's, expected "
                       f"{want[t]} (tile[t] is 2 bytes after tile[t - 1]): does thread t pass "
                       "tile[t:].ctypes?")
    if got[0] % 16:
        raise Mismatch(f"tile[0] is at shared address {int(got[0]):#x}, not 16-byte aligned: "
                       "declare the tile with alignment=16")
    if got.max() >= SHARED_BYTES:
        raise Mismatch(f"address {int(got.max()):#x} is beyond the {SHARED_BYTES // 1024} KiB of "
                       "shared memory: that is (part of) a generic address; convert it with "
                       "__cvta_generic_to_shared")


# --- exercise 2: the predicted map ----------------------------------------------------------

def _run_predict(ns, inputs, mode):
    return np.asarray(ns["x1_fragment_map"]())


def _verify_predict(got, expected, inputs, mode):
    if got.shape != (32, 2, 2):
        raise Mismatch(f"x1_fragment_map() has shape {got.shape}, expected (32, 2, 2)")
    if np.array_equal(got, expected):
        return
    if np.array_equal(got, F.x1_coords(trans=True)):
        raise Mismatch("that is the .trans layout (rows and columns swapped): without .trans "
                       "lane l holds row l // 4")
    if np.array_equal(got[:, ::-1], expected):
        raise Mismatch("low and high halves are swapped: the low half holds the smaller column")
    lane, half = (int(x) for x in np.argwhere((got != expected).any(axis=2))[0])
    raise Mismatch(f"lane {lane}, half {half}: expected {tuple(expected[lane, half])}, got "
                   f"{tuple(got[lane, half])}")


# --- exercises 3-5: ldmatrix ----------------------------------------------------------------

def _run_ldmatrix(kernel: str, source: str, regs: int, instruction: str):
    def run(ns, inputs, mode):
        check_sources(ns, source)
        out = _zeros((32, regs), np.uint32)
        _launch(ns[kernel], 1, 32, _device(inputs["m"]), out)
        expect_instructions(ns[kernel], mode, f"the reference loads the registers with one "
                            f"{instruction} per warp; {SCALAR_LOADS}", LDSM=1)
        return out.copy_to_host()

    return run


def _verify_x1(got, expected, inputs, mode):
    m = inputs["m"]
    expect_registers(got.reshape(32, 1), expected, "ldmatrix .x1 fragments",
                     F.ldmatrix([m], trans=True), m)


def _verify_x4(got, expected, inputs, mode):
    m = inputs["m"]
    blocks = [m[:8, :8], m[8:, :8], m[:8, 8:], m[8:, 8:]]
    expect_registers(got, expected, "ldmatrix .x4 fragments (mma A operand)",
                     F.ldmatrix(blocks, trans=True), m)


def _verify_trans(got, expected, inputs, mode):
    m = inputs["m"]
    expect_registers(got, expected, "ldmatrix .x2.trans fragments (mma B operand)",
                     F.ldmatrix([m[:8], m[8:]], trans=False), m)


# --- exercise 6: stmatrix -------------------------------------------------------------------

def _make_stmatrix(rng, case):
    a = distinct_matrix(None if case.kind == "iota" else rng, (16, 16))
    return {"m": a, "frags": F.a_fragments(a)}


def _run_stmatrix(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "STMATRIX_CU")
    stored = _zeros((16, 16), np.uint16)
    _launch(ns["stmatrix_x4_kernel"], 1, 32, _device(inputs["frags"]), stored)
    expect_instructions(ns["stmatrix_x4_kernel"], mode, "the reference stores the fragments "
                        "with one stmatrix .x4 per warp; registers written to shared memory "
                        "element by element give the same tile without it", STSM=1)
    round_trip = _zeros((16, 16), np.uint16)
    _launch(ns["roundtrip_kernel"], 1, 32, _device(inputs["m"]), round_trip)
    expect_instructions(ns["roundtrip_kernel"], mode, "the round trip is one ldmatrix .x4 "
                        "and one stmatrix .x4 per warp; a copy through ordinary loads and "
                        "stores gives the same tile without them", LDSM=1, STSM=1)
    return stored.copy_to_host(), round_trip.copy_to_host()


def _verify_stmatrix(got, expected, inputs, mode):
    stored, round_trip = got
    m = inputs["m"]
    if not np.array_equal(stored, m):
        if np.array_equal(stored, m.T):
            raise Mismatch("stmatrix_x4_kernel stored the transpose of the matrix whose "
                           "fragments it was given (.trans, or rows/columns swapped)")
        r, c = (int(x) for x in np.argwhere(stored != m)[0])
        raise Mismatch(f"stmatrix_x4_kernel: element ({r}, {c}) is {int(stored[r, c])}, expected "
                       f"{int(m[r, c])} (the matrix whose A fragments were stored); "
                       f"{int((stored != m).sum())} of 256 elements differ")
    if not np.array_equal(round_trip, m):
        r, c = (int(x) for x in np.argwhere(round_trip != m)[0])
        raise Mismatch(f"roundtrip_kernel: ldmatrix then stmatrix with the same addresses must "
                       f"give the input back; element ({r}, {c}) is {int(round_trip[r, c])}, "
                       f"expected {int(m[r, c])}")


# --- exercises 7-8: mma and GEMM ------------------------------------------------------------

def gemm_tolerance(a, b) -> tuple[np.ndarray, str]:
    """Per-element tolerance of a float16 GEMM with float32 tensor-core accumulation."""
    k = a.shape[1]
    gamma = (k + k // 16 + 1) * 2.0**-23
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    why = (f"tolerance gamma * (|A| @ |B|) with gamma = (K + K/16 + 1) * 2^-23 = {gamma:.3g} "
           f"(K = {k}): one float32 unit of truncation per product and per accumulation")
    return gamma * bound, why


def _fp16_matrix(rng, shape, kind):
    if kind == "integers":
        return rng.integers(-4, 5, size=shape).astype(np.float16)
    if kind == "identity":
        return np.eye(*shape, dtype=np.float16)
    return rng.standard_normal(shape).astype(np.float16)


def _make_gemm(rng, case):
    m, n, k = (int(x) for x in case.note.split("x"))
    kind_a = "identity" if case.kind == "identity" else case.kind
    a = _fp16_matrix(rng, (m, k), kind_a)
    b = _fp16_matrix(rng, (k, n), "normal" if case.kind == "identity" else case.kind)
    return {"a": a, "b": b}


def _gemm_reference(inputs):
    return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)


def expect_gemm(got, expected, inputs, what: str) -> None:
    a, b = inputs["a"], inputs["b"]
    got = np.asarray(got, np.float64)
    if not np.all(np.isfinite(got)):
        r, c = (int(x) for x in np.argwhere(~np.isfinite(got))[0])
        raise Mismatch(f"{what}: C[{r}, {c}] is {got[r, c]}: an element never written, or "
                       "fragments read from the wrong place")
    exact = np.all(np.abs(a.astype(np.float64)) == np.round(np.abs(a.astype(np.float64)))) and \
        np.all(np.abs(b.astype(np.float64)) == np.round(np.abs(b.astype(np.float64))))
    tol, why = gemm_tolerance(a, b)
    if exact:
        tol, why = np.zeros_like(tol), "small-integer inputs: the result must be exact"
    bad = np.abs(got - expected) > tol
    if not bad.any():
        return
    r, c = (int(x) for x in np.argwhere(bad)[0])
    hints = []
    if a.shape[0] == a.shape[1]:
        transposed = a.astype(np.float64).T @ b.astype(np.float64)
        if np.all(np.abs(got - transposed) <= tol + 1e-6):
            hints.append("That is A^T @ B: A's fragments are transposed.")
    if not got.any():
        hints.append("C is all zeros: nothing was written.")
    if b.shape[1] == 8 and a.shape == (16, 16) and not hints:
        rows = np.nonzero(bad.any(axis=1))[0]
        hints.append(f"Wrong rows: {rows.tolist()}; a0/a1 hold rows g and g + 8, a2/a3 the same "
                     "rows at columns + 8; c0, c1 go to row g and c2, c3 to row g + 8.")
    raise Mismatch(f"{what}: {int(bad.sum())} of {bad.size} elements are off; first C[{r}, {c}] "
                   f"= {got[r, c]:.6g}, expected {expected[r, c]:.6g} (|diff| "
                   f"{abs(got[r, c] - expected[r, c]):.3g} > {tol[r, c]:.3g}; {why}). "
                   + " ".join(hints))


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
COUNTED = "any GPU: a count compared with the reference's count in the same run"


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


def _run_mma(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "LDMATRIX_X2_TRANS_CU", "MMA_CU")
    c = _zeros((16, 8), np.float32, np.nan)
    _launch(ns["mma_tile_kernel"], 1, 32, _device(inputs["a"].view(np.uint16)),
            _device(inputs["b"].view(np.uint16)), c)
    expect_instructions(ns["mma_tile_kernel"], mode, MMA_USES, LDSM=2, HMMA=1)
    return c.copy_to_host()


def _verify_mma(got, expected, inputs, mode):
    expect_gemm(got, expected, inputs, "mma_tile_kernel")


def _run_gemm(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU", "LDMATRIX_X2_TRANS_CU", "MMA_CU")
    a, b = inputs["a"], inputs["b"]
    tile = int(ns.get("TILE", 32))
    m, n = a.shape[0], b.shape[1]
    c = _zeros((m, n), np.float32, np.nan)
    _launch(ns["gemm_kernel"], (n // tile, m // tile), 128, _device(a.view(np.uint16)),
            _device(b.view(np.uint16)), c)
    least, why = gemm_instructions(m, n, a.shape[1])
    expect_instructions(ns["gemm_kernel"], mode, why, executed=least, LDSM=1, HMMA=1)
    return c.copy_to_host()


def _verify_gemm(got, expected, inputs, mode):
    expect_gemm(got, expected, inputs, "gemm_kernel")


def _gemm_cases():
    def cases(shapes):
        return tuple(Case(int(s.split("x")[0]), kind, note=s) for s, kind in shapes)

    return {
        "sim": cases((("32x32x32", "integers"), ("64x32x64", "normal"), ("32x64x32", "normal"))),
        "gpu": cases((("32x32x32", "integers"), ("64x32x64", "normal"),
                      ("128x256x512", "integers"), ("512x512x512", "normal"),
                      ("1024x768x2048", "normal"), ("256x256x4096", "normal"))),
    }


# --- exercise 9: swizzle --------------------------------------------------------------------

def _run_swizzle(ns, inputs, mode):
    check_sources(ns, "LDMATRIX_X4_CU")
    out = _zeros((4, 32, 4), np.uint32)
    conflicts = None
    _launch(ns["swizzled_fragments_kernel"], 1, 32, _device(inputs["m"]), out)
    if mode == "sim":
        conflicts = emulated_stats().get("ldmatrix", {}).get("conflicts", 0)
    expect_instructions(ns["swizzled_fragments_kernel"], mode, "the reference loads each of "
                        "the four column slices with one ldmatrix .x4; the bank conflicts to "
                        f"remove are ldmatrix's, and {SCALAR_LOADS}", LDSM=1)
    return out.copy_to_host(), conflicts


def _reference_slices(inputs):
    m = inputs["m"]
    return np.stack([F.a_fragments(m[:, 16 * s:16 * s + 16]) for s in range(4)])


def _verify_swizzle(got, expected, inputs, mode):
    out, conflicts = got
    m = inputs["m"]
    for s in range(4):
        expect_registers(out[s], expected[s], f"column slice {s} (columns {16 * s}..{16 * s + 15})",
                         source=m)
    if conflicts:
        raise Mismatch(
            f"the fragments are right, but the ldmatrix instructions needed {conflicts} extra "
            "shared-memory wavefronts (bank conflicts): the 8 rows of each matrix must sit in "
            "8 different 16-byte bank groups; store chunk c of row r at chunk c ^ (r % 8) and "
            "load through the same swizzle")


# --- the catalogue --------------------------------------------------------------------------

def _ldm_cases():
    cases = (Case(32, "iota"), Case(32, "random"), Case(32, "random"))
    return {"sim": cases, "gpu": cases}


@cache
def _predict_reference():
    return F.x1_coords(trans=False)


def _exercise(id_, title, entry, make, run, reference, verify, cases, needs=(), points=1.0):
    return Exercise(id=f"ldmatrix.{id_}", lesson=LESSON, title=title, entry=entry,
                    make_inputs=make, run=run, reference=reference, verify=verify, cases=cases,
                    needs=needs, points=points)


EXERCISES = (
    _exercise("address", "foreign-function ABI: a shared-space address from C",
              "shared_address_kernel", lambda rng, case: {"threads": case.size}, _run_address,
              lambda inputs: None, _verify_address,
              {"sim": (Case(32, "threads"), Case(64, "threads")),
               "gpu": (Case(32, "threads"), Case(64, "threads"))},
              needs=("ADDRESS_CU",), points=1),
    _exercise("predict", "predict the ldmatrix .x1 fragment map (numpy)", "x1_fragment_map",
              lambda rng, case: {}, _run_predict, lambda inputs: _predict_reference(),
              _verify_predict, {"sim": (Case(32, "map"),), "gpu": (Case(32, "map"),)}, points=1),
    _exercise("x1", "ldmatrix .x1: one 8x8 matrix", "ldmatrix_x1_kernel", _matrix_inputs((8, 8)),
              _run_ldmatrix("ldmatrix_x1_kernel", "LDMATRIX_X1_CU", 1, "ldmatrix .x1"),
              lambda inputs: F.ldmatrix([inputs["m"]]), _verify_x1, _ldm_cases(),
              needs=("LDMATRIX_X1_CU",), points=1),
    _exercise("x4", "ldmatrix .x4: an mma A fragment", "ldmatrix_x4_kernel",
              _matrix_inputs((16, 16)),
              _run_ldmatrix("ldmatrix_x4_kernel", "LDMATRIX_X4_CU", 4, "ldmatrix .x4"),
              lambda inputs: F.a_fragments(inputs["m"]), _verify_x4, _ldm_cases(),
              needs=("LDMATRIX_X4_CU",), points=1),
    _exercise("trans", "ldmatrix .x2.trans: an mma B fragment", "ldmatrix_x2_trans_kernel",
              _matrix_inputs((16, 8)),
              _run_ldmatrix("ldmatrix_x2_trans_kernel", "LDMATRIX_X2_TRANS_CU", 2,
                            "ldmatrix .x2.trans"),
              lambda inputs: F.b_fragments(inputs["m"]), _verify_trans, _ldm_cases(),
              needs=("LDMATRIX_X2_TRANS_CU",), points=1),
    _exercise("stmatrix", "stmatrix .x4, and an ldmatrix -> stmatrix round trip",
              "stmatrix_x4_kernel", _make_stmatrix, _run_stmatrix, lambda inputs: None,
              _verify_stmatrix, _ldm_cases(), needs=("STMATRIX_CU", "roundtrip_kernel"), points=2),
    _exercise("mma", "one mma.m16n8k16 tile from ldmatrix fragments", "mma_tile_kernel",
              _make_gemm, _run_mma, _gemm_reference, _verify_mma,
              {"sim": (Case(16, "integers", note="16x8x16"), Case(16, "identity", note="16x8x16"),
                       Case(16, "normal", note="16x8x16")),
               "gpu": (Case(16, "integers", note="16x8x16"), Case(16, "identity", note="16x8x16"),
                       Case(16, "normal", note="16x8x16"), Case(16, "normal", note="16x8x16"))},
              needs=("MMA_CU",), points=2),
    _exercise("gemm", "GEMM from ldmatrix fragments and mma tiles", "gemm_kernel", _make_gemm,
              _run_gemm, _gemm_reference, _verify_gemm, _gemm_cases(), points=2),
    _exercise("swizzle", "XOR-swizzled tile: ldmatrix without bank conflicts",
              "swizzled_fragments_kernel", _matrix_inputs((16, 64)), _run_swizzle,
              _reference_slices, _verify_swizzle, _ldm_cases(), needs=("swizzle",), points=1),
)


# --- metric rules (GPU only) ------------------------------------------------------------------
# swizzle: the swizzle must remove every bank conflict. gemm: the ldmatrix and mma instructions
# executed, counted by Nsight Compute against the reference's count in the same run (the
# simulator holds a kernel to the same shares, see _run_gemm; the SASS check only sees
# whether the instructions are there at all, and only where a disassembler is installed).

def _profile_swizzle(ns):
    """One block loading a 16 x 64 tile: the first launch compiles, the second is profiled."""
    m = distinct_matrix(np.random.default_rng(0), (16, 64))
    for _ in range(2):
        _launch(ns["swizzled_fragments_kernel"], 1, 32, _device(m), _zeros((4, 32, 4), np.uint32))


GEMM_PROFILE = (512, 512, 512)  # M, N, K: 256 blocks of 4 warps, 16 tiles of K each


def _profile_gemm(ns):
    """A GEMM_PROFILE product: the first launch compiles, the second is profiled."""
    rng = np.random.default_rng(0)
    m, n, k = GEMM_PROFILE
    tile = int(ns.get("TILE", 32))
    a, b = (_device(rng.standard_normal(s).astype(np.float16).view(np.uint16))
            for s in ((m, k), (k, n)))
    for _ in range(2):
        _launch(ns["gemm_kernel"], (n // tile, m // tile), 128, a, b,
                _zeros((m, n), np.float32))


METRICS = {
    "gemm": dict(
        rules=(MetricRule(
            "sm__inst_executed_op_ldsm.sum", "ldmatrix instructions executed (LDSM)",
            "the fragments of both operands come from ldmatrix: per warp and 16-wide step of k "
            "the reference issues 3 (one .x4 for A, two .x2.trans for B), a kernel loading B's "
            "with one .x4 issues 2, one assembling B's from scalar shared-memory loads 1, one "
            "assembling both (as the lesson's gemm_scalar_kernel) none", COUNTED,
            min_ratio=LDSM_SHARE),
               MetricRule(
            "sm__inst_executed_pipe_tensor_op_hmma.sum", "tensor-core mma instructions executed "
            "(HMMA)", "every 16x8x16 product runs on the tensor cores: M*N*K/2048 "
            "mma.m16n8k16 for any tensor-core GEMM, none for one of scalar multiply-adds",
            COUNTED, min_ratio=HMMA_SHARE)),
        profile=_profile_gemm),
    "swizzle": dict(
        rules=(MetricRule(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "shared-load bank conflicts",
            "with the XOR swizzle the eight 16-byte rows an ldmatrix phase reads sit in eight "
            "different groups of banks", "NVIDIA H200 (cc 9.0), 2026-11-22", max_value=0),),
        profile=_profile_swizzle),
}

ONE_WARP = ("one warp, one tile, no loop: every check counts the instruction it is about, "
            "exactly (as the simulator runs it; in the SASS on a GPU), which is what Nsight "
            "Compute would count; a launch this small has no speed to measure")
NO_METRIC_RULE = {
    "address": "a shared-space address, checked exactly; one tiny launch, nothing to measure",
    "predict": "CPU-only: numpy",
    **dict.fromkeys(("x1", "x4", "trans", "stmatrix", "mma"), ONE_WARP),
}

EXERCISES = with_metric_rules(EXERCISES, METRICS, NO_METRIC_RULE)

# Slow but correct submissions, each (description, text in the solution cell, replacement):
# graded correct on a GPU (the SASS holds the instruction), each must fail a metric rule of
# its exercise there (benchmarks/metric_rules.py checks this). swizzle: rows 128 bytes apart
# all start in bank 0. gemm: ldmatrix for A only, B's fragments assembled from scalar
# shared-memory loads as the lesson's gemm_scalar_kernel does (the simulator counts too few
# ldmatrix and rejects it as well).
SLOW_VARIANTS = {
    "ldmatrix.swizzle": ("no swizzle: 128-byte rows, 8-way bank conflicts",
                         "    return ((col // 8) ^ (row % 8)) * 8 + col % 8", "    return col"),
    "ldmatrix.gemm": ("ldmatrix for A only: B's fragments from scalar shared-memory loads", '''
            b0, b1 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn:].ctypes)
            b2, b3 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn + 8:].ctypes)
''', '''
            kb = kk + 2 * (lane % 4)  # two 16-bit elements of a column per register
            nb = wn + lane // 4
            b0 = uint32(uint32(tile_b[kb, nb]) | (uint32(tile_b[kb + 1, nb]) << 16))
            b1 = uint32(uint32(tile_b[kb + 8, nb]) | (uint32(tile_b[kb + 9, nb]) << 16))
            b2 = uint32(uint32(tile_b[kb, nb + 8]) | (uint32(tile_b[kb + 1, nb + 8]) << 16))
            b3 = uint32(uint32(tile_b[kb + 8, nb + 8]) | (uint32(tile_b[kb + 9, nb + 8]) << 16))
'''),
}

# Correct submissions written differently from the reference, each (description, text in
# the solution cell, replacement) as above. Each must be graded correct on its output and
# pass every metric rule of its exercise on a GPU: benchmarks/metric_rules.py profiles them
# beside the slow variants and records both groups' ratios, the evidence the rules'
# thresholds are set from. Every one keeps the 8 rows an ldmatrix phase reads in 8
# different 16-byte bank groups.
_SWIZZLE_KERNEL_TAIL = '''
        out[s, lane, 0] = r0
        out[s, lane, 1] = r1
        out[s, lane, 2] = r2
        out[s, lane, 3] = r3
'''

CORRECT_VARIANTS = {
    "ldmatrix.swizzle": (
        ("the swizzle as bit operations: col ^ (row & 7) << 3",
         "    return ((col // 8) ^ (row % 8)) * 8 + col % 8",
         "    return col ^ ((row & 7) << 3)  # flip the chunk bits (3..5) of the column"),
        ("a rotation instead of an XOR: chunk (c + r) % 8",
         "    return ((col // 8) ^ (row % 8)) * 8 + col % 8",
         "    return ((col // 8 + row) % 8) * 8 + col % 8"),
        ("the swizzle inline, the tile copied row by row", None, '''
@cuda.jit(device=True)
def swizzle(row, col):
    return ((col // 8) ^ (row % 8)) * 8 + col % 8


@cuda.jit
def swizzled_fragments_kernel(a, out):
    tile = cuda.shared.array((16, 64), uint16, alignment=128)
    lane = cuda.threadIdx.x
    for r in range(16):
        for c in range(lane, 64, 32):
            tile[r, c ^ ((r % 8) * 8)] = a[r, c]
    cuda.syncthreads()
    row = lane % 16
    for s in range(4):
        chunk = (2 * s + lane // 16) ^ (row % 8)
        r0, r1, r2, r3 = ldmatrix_x4(tile[row, 8 * chunk:].ctypes)
''' + _SWIZZLE_KERNEL_TAIL),
        ("padded rows of 72 elements instead of a swizzle", None, '''
PADDED = 64 + 8  # 144-byte rows: row r starts 16 * (r % 8) bytes into the banks


@cuda.jit(device=True)
def swizzle(row, col):
    return col


@cuda.jit
def swizzled_fragments_kernel(a, out):
    tile = cuda.shared.array((16, PADDED), uint16, alignment=16)
    lane = cuda.threadIdx.x
    for i in range(32):
        e = lane + 32 * i
        tile[e // 64, e % 64] = a[e // 64, e % 64]
    cuda.syncthreads()
    row = lane % 16
    for s in range(4):
        r0, r1, r2, r3 = ldmatrix_x4(tile[row, 16 * s + 8 * (lane // 16):].ctypes)
''' + _SWIZZLE_KERNEL_TAIL),
    ),
    "ldmatrix.gemm": (
        ("B stored transposed in shared memory, its fragments by one ldmatrix .x4 (no .trans)",
         """            tile_b[e // TILE, e % TILE] = b[k0 + e // TILE, col0 + e % TILE]
        cuda.syncthreads()
        for kk in range(0, TILE, 16):
            a0, a1, a2, a3 = ldmatrix_x4(tile_a[wm + lane % 16, kk + 8 * (lane // 16):].ctypes)
            b0, b1 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn:].ctypes)
            b2, b3 = ldmatrix_x2_trans(tile_b[kk + lane % 16, wn + 8:].ctypes)
""", """            tile_b[e % TILE, e // TILE] = b[k0 + e // TILE, col0 + e % TILE]  # B^T: [n, k]
        cuda.syncthreads()
        for kk in range(0, TILE, 16):
            a0, a1, a2, a3 = ldmatrix_x4(tile_a[wm + lane % 16, kk + 8 * (lane // 16):].ctypes)
            # the matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
            b0, b1, b2, b3 = ldmatrix_x4(
                tile_b[wn + lane % 8 + 8 * (lane // 16), kk + 8 * (lane // 8 % 2):].ctypes)
"""),
        ("warps placed the other way: warps 0 and 1 one above the other",
         "    wm = 16 * (t // 64)\n    wn = 16 * (t // 32 % 2)\n",
         "    wm = 16 * (t // 32 % 2)\n    wn = 16 * (t // 64)\n"),
        ("the two k steps of a tile in reverse order",
         "        for kk in range(0, TILE, 16):\n",
         "        for kk in range(TILE - 16, -1, -16):\n"),
        ("shared tiles with rows padded to TILE + 8 elements",
         "    tile_a = cuda.shared.array((TILE, TILE), uint16, alignment=16)\n"
         "    tile_b = cuda.shared.array((TILE, TILE), uint16, alignment=16)\n",
         "    tile_a = cuda.shared.array((TILE, 40), uint16, alignment=16)  # TILE + 8: 80 bytes\n"
         "    tile_b = cuda.shared.array((TILE, 40), uint16, alignment=16)\n"),
    ),
}
