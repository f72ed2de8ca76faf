"""Foreign device functions (CUDA C, inline PTX) in numba-cuda's CUDA simulator.

On a GPU, ``f = cuda.declare_device(name, sig, link=...)`` declares a function
written in CUDA C, which numba links into every kernel that calls ``f``. The
simulator cannot link machine code: its ``declare_device`` returns ``None``.
:func:`install` replaces it, so that the same notebook runs without a GPU:

* ``cuda.declare_device(name, sig, link=...)`` returns a :class:`ForeignFunction`.
  ``link`` may name ``.cu`` / ``.ptx`` files or be ``cuda.CUSource`` / ``cuda.PTXSource``.
* On its first call the CUDA C is compiled with NVRTC and assembled with ptxas
  (:mod:`workbook.ptx`, both run on the CPU), exactly as for a GPU: a compiler
  error appears here as it would there.
* Each simulated thread then **executes the PTX of the function**: numba's
  foreign-function ABI (``int name(T* ret, args...)``, returning status 0), the
  integer, bit and float instructions compilers emit for short device functions,
  and the warp-wide matrix instructions, which run once for the whole warp when
  all 32 lanes have arrived (through :func:`workbook.sim.warp.collective`):

  - ``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16``
  - ``stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16``
  - ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``

  Their results follow the PTX ISA (see :mod:`workbook.fragments`). Branches,
  calls and local memory are not emulated: a function that needs them raises
  :class:`ForeignEmulationError` (such code may well work on a GPU).

Addresses
    A generic address is the host address of the simulator's numpy array:
    shared arrays, arrays passed as pointers (``tile[i:].ctypes``) and the
    return slot. Shared arrays also get a *shared-window* address (what
    ``cvta.to.shared`` / ``__cvta_generic_to_shared`` returns): each array
    starts at a 128-byte boundary, in the order the emulation first meets them.
    A ``.shared`` instruction given an address outside every shared array --
    typically a generic pointer that was not converted -- raises an error that
    says so, where a GPU would fault or read the wrong data. Row addresses of
    ldmatrix/stmatrix must be 16-byte aligned, as on a GPU.

Bank conflicts
    Every ldmatrix/stmatrix counts the shared-memory wavefronts it needs (one per
    8x8 matrix when its 8 rows fall in 8 different groups of 4 banks); see
    :func:`reset_stats` and :func:`stats`.

``cuda.shared.array(..., alignment=N)`` (which the simulator rejects) is
accepted too, so kernels that align their tiles for 16-byte rows run unchanged.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbook import fragments
from workbook import ptx as ptxmod
from workbook.sim import warp

__all__ = ["ForeignEmulationError", "ForeignFunction", "declare_device", "install",
           "reset_stats", "stats"]

RET_BASE = 0x0010_0000_0000_0000  # generic address of the return slot (above user space)
RET_SIZE = 256
WINDOW_ALIGN = 128
_INSTALLED = "_workbook_foreign_installed"


class ForeignEmulationError(RuntimeError):
    """A foreign function did something the simulator cannot run, or that fails on a GPU."""


# ---------------------------------------------------------------------------
# Statistics


_stats_lock = threading.Lock()
_stats: dict[str, dict[str, int]] = {}


def reset_stats() -> None:
    """Forget the counts of :func:`stats`."""
    with _stats_lock:
        _stats.clear()


def stats() -> dict[str, dict[str, int]]:
    """Counts since :func:`reset_stats`, per instruction (``"ldmatrix"``, ``"stmatrix"``,
    ``"mma"``): ``instructions`` (warp-wide executions), and for the memory instructions
    ``wavefronts`` (shared-memory passes), ``ideal`` (one per 8x8 matrix) and
    ``conflicts`` (``wavefronts - ideal``: extra passes caused by bank conflicts)."""
    with _stats_lock:
        return {k: dict(v) for k, v in _stats.items()}


def _count(kind: str, **values: int) -> None:
    with _stats_lock:
        entry = _stats.setdefault(kind, {})
        for key, value in values.items():
            entry[key] = entry.get(key, 0) + value


# ---------------------------------------------------------------------------
# Shared memory: host addresses <-> shared-window addresses


@dataclass
class _Region:
    host: int
    nbytes: int
    window: int | None
    flat: np.ndarray  # uint8 view of the array's bytes
    label: str


class _SharedWindow:
    """The shared arrays of one launch and their window addresses (stable once given)."""

    def __init__(self, shared):
        self.shared = shared
        self.regions: list[_Region] = []
        self.known: set[int] = set()
        self.next = 0
        self.lock = threading.Lock()

    def _refresh(self) -> None:
        arrays = list(self.shared._allocations.values())
        dyn = self.shared._dynshared
        arrays += [dyn] if dyn.size else []
        alignments = getattr(self.shared, "_workbook_alignment", {})
        for array in arrays:
            if id(array) in self.known:
                continue
            self.known.add(id(array))
            align = max(WINDOW_ALIGN, alignments.get(id(array), 0))
            start = -(-self.next // align) * align
            self.next = start + array.nbytes
            label = f"a shared array of {array.size} {array.dtype} (shape {array.shape})"
            flat = np.asarray(array).reshape(-1).view(np.uint8)  # plain ndarray: no logging
            self.regions.append(_Region(array.__array_interface__["data"][0], array.nbytes,
                                        start, flat, label))

    def by_host(self, address: int) -> _Region | None:
        with self.lock:
            for attempt in (0, 1):
                for region in self.regions:
                    if region.host <= address < region.host + region.nbytes:
                        return region
                if attempt == 0:
                    self._refresh()
        return None

    def by_window(self, address: int) -> _Region | None:
        with self.lock:
            for attempt in (0, 1):
                for region in self.regions:
                    if region.window <= address < region.window + region.nbytes:
                        return region
                if attempt == 0:
                    self._refresh()
        return None

    def generic_hint(self, address: int) -> str:
        """Words for an address that is the generic (host) address of shared memory."""
        with self.lock:
            self._refresh()
            for region in self.regions:
                for base in (region.host, region.host & 0xFFFFFFFF):
                    if base <= address < base + region.nbytes:
                        return (f" It is the generic address of byte {address - base} of "
                                f"{region.label}: a .shared instruction needs the shared-window "
                                "address that __cvta_generic_to_shared(p) returns.")
        return ""


def _window() -> _SharedWindow:
    from numba.cuda.simulator import kernel

    context = kernel._get_kernel_context()
    if context is None:
        raise ForeignEmulationError("foreign functions can only be called inside a kernel")
    window = getattr(context, "_workbook_window", None)
    if window is None:
        with _stats_lock:
            window = getattr(context, "_workbook_window", None)
            if window is None:
                # the simulator's FakeCUDAShared, where every shared array is listed
                # (``context.shared`` may be a proxy installed by another extension)
                window = _SharedWindow(getattr(context, "_shared", None) or context.shared)
                context._workbook_window = window
    return window


def _shared_bytes(address: int, nbytes: int, what: str) -> tuple[np.ndarray, int]:
    """(uint8 view, offset) of ``nbytes`` at shared-window ``address``."""
    window = _window()
    region = window.by_window(address)
    if region is None or address + nbytes > region.window + region.nbytes:
        hint = window.generic_hint(address)
        raise ForeignEmulationError(
            f"{what}: shared-space address {address:#x} is outside every shared array "
            f"(on a GPU: an illegal address or wrong data).{hint}")
    return region.flat, address - region.window


# ---------------------------------------------------------------------------
# Values


def _width(t: str) -> int:
    if t == "pred":
        return 1
    digits = re.sub(r"\D", "", t)
    return int(digits) if digits else 32


def _mask(value: int, width: int) -> int:
    return int(value) & ((1 << width) - 1)


def _signed(value: int, width: int) -> int:
    value = _mask(value, width)
    return value - (1 << width) if value >> (width - 1) & 1 else value


_FLOAT_DTYPES = {16: np.float16, 32: np.float32, 64: np.float64}
_UINT_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _to_float(bits: int, width: int) -> float:
    return float(np.array(_mask(bits, width), _UINT_DTYPES[width]).view(_FLOAT_DTYPES[width]))


def _from_float(value: float, width: int) -> int:
    with np.errstate(over="ignore", invalid="ignore"):
        return int(np.array(value, _FLOAT_DTYPES[width]).view(_UINT_DTYPES[width]))


def _parse_immediate(text: str) -> int | float | None:
    t = text.strip()
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
        return _to_float(int(t[2:], 16), 32)
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
        return _to_float(int(t[2:], 16), 64)
    m = re.fullmatch(r"(-?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)[uU]?", t)
    if m:
        digits = m.group(2)
        value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8 if
                                                                       digits.startswith("0")
                                                                       and len(digits) > 1
                                                                       else 10)
        return -value if m.group(1) else value
    try:
        return float(t)
    except ValueError:
        return None


def _split_operands(text: str) -> list[str]:
    out, current, depth = [], [], 0
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        out.append("".join(current).strip())
    return out


def _vector(operand: str) -> list[str]:
    operand = operand.strip()
    if not (operand.startswith("{") and operand.endswith("}")):
        return [operand]
    return [x.strip() for x in operand[1:-1].split(",")]


_MEMORY = re.compile(r"^\[\s*([^\]+\-]+?)\s*(?:([+-])\s*(-?\s*\w+))?\s*\]$")


# ---------------------------------------------------------------------------
# Decoding


_TYPES = re.compile(r"^(?:[bsuf](?:8|16|32|64)|f16x2|bf16|bf16x2|pred)$")


@dataclass(frozen=True)
class _Instruction:
    index: int
    text: str
    guard: str | None
    negate: bool
    opcode: str
    base: str
    quals: tuple[str, ...]
    types: tuple[str, ...]
    operands: tuple[str, ...]

    def has(self, *names: str) -> bool:
        return all(n in self.quals for n in names)


def _decode(fn: ptxmod.PtxFunction) -> list[_Instruction]:
    program = []
    for index, statement in enumerate(fn.statements):
        if statement in ("{", "}") or statement.endswith(":"):
            continue
        if statement.startswith("."):
            if statement.startswith(".reg") or statement.startswith(".pragma"):
                continue
            raise ForeignEmulationError(
                f"{fn.name}: `{statement}` declares memory inside the function (a local array?), "
                "which the simulator does not emulate; keep foreign functions to registers")
        guard, negate, text = None, False, statement
        m = re.match(r"^@(!?)(%\w+)\s+(.*)$", statement)
        if m:
            negate, guard, text = m.group(1) == "!", m.group(2), m.group(3)
        opcode, _, rest = text.partition(" ")
        base, *quals = opcode.split(".")
        quals = ["shared" if q == "shared::cta" else q for q in quals]
        types = tuple(q for q in quals if _TYPES.match(q))
        program.append(_Instruction(index, statement, guard, negate, opcode, base, tuple(quals),
                                    types, tuple(_split_operands(rest))))
    return program


@dataclass
class _Program:
    name: str
    fn: ptxmod.PtxFunction
    instructions: list[_Instruction]
    source_name: str


def _link_items(link) -> list[tuple[str, str, str]]:
    """(kind, text, label) for every linked item: kind "cu" or "ptx"."""
    if link is None:
        return []
    items = link if isinstance(link, (list, tuple, set)) else [link]
    out = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            path = Path(item)
            kind = path.suffix.lower().lstrip(".")
            if kind not in ("cu", "ptx"):
                raise ForeignEmulationError(
                    f"cannot emulate linked file {path} in the simulator: only CUDA C (.cu) "
                    "and PTX (.ptx) can be run there")
            try:
                out.append((kind, path.read_text(), str(path)))
            except OSError as exc:
                raise ForeignEmulationError(f"cannot read linked file {path}: {exc}") from None
            continue
        kind = type(item).__name__
        data = getattr(item, "data", None)
        if kind in ("CUSource", "PTXSource") and data is not None:
            text = data.decode() if isinstance(data, bytes) else str(data)
            out.append(("cu" if kind == "CUSource" else "ptx", text,
                        getattr(item, "name", kind)))
        else:
            raise ForeignEmulationError(
                f"cannot emulate linked {kind} in the simulator: only CUDA C (a .cu file or "
                "cuda.CUSource) and PTX can be run there")
    return out


@functools.lru_cache(maxsize=128)
def _ptx_for(kind: str, text: str) -> str:
    ptx = ptxmod.compile_ptx(text) if kind == "cu" else text
    ptxmod.assemble(ptx)
    return ptx


def _load_program(name: str, items: tuple, nargs: int) -> _Program:
    if not items:
        raise ForeignEmulationError(
            f"{name} was declared without link=...: there is no code to run (on a GPU the "
            "link step fails with an undefined reference)")
    found, problems = None, []
    for kind, text, label in items:
        functions = ptxmod.parse_functions(_ptx_for(kind, text))
        if name in functions:
            found = (functions[name], label)
            break
        problems.append(f"{label}: {', '.join(sorted(functions)) or 'no functions'}")
    if found is None:
        for kind, text, _ in items:  # a mangled C++ name gets its own explanation
            try:
                ptxmod.function_named(_ptx_for(kind, text), name)
            except ptxmod.ForeignFunctionError as exc:
                if "C++ name" in str(exc):
                    raise ForeignEmulationError(str(exc)) from None
        raise ForeignEmulationError(
            f"unknown foreign function {name}: the linked code defines no function of that "
            f"name ({'; '.join(problems)}). Define it as extern \"C\" __device__ int "
            f"{name}(...) in the linked CUDA C.")
    fn, label = found
    try:
        ptxmod.check_abi(fn, nargs)
    except ptxmod.ForeignFunctionError as exc:
        raise ForeignEmulationError(str(exc)) from None
    return _Program(name, fn, _decode(fn), label)


# ---------------------------------------------------------------------------
# One lane executing a function


class _Failure:
    """A warp instruction's error, handed to every lane so that all of them raise it."""

    def __init__(self, message: str):
        self.message = message


class _Lane:
    def __init__(self, program: _Program, params: dict[str, int], regions: list, thread):
        self.program = program
        self.params = params
        self.regions = regions  # (host address, nbytes, uint8 view, label) of pointer args
        self.thread = thread
        self.regs: dict[str, int] = {}
        self.ret = np.zeros(RET_SIZE, dtype=np.uint8)
        self.status: int | None = None
        self.ins: _Instruction | None = None

    # --- messages
    def where(self) -> str:
        t = self.thread
        block = ",".join(str(i) for i in t.blockIdx)
        ins = f": `{self.ins.text}`" if self.ins else ""
        return (f"{self.program.name} (lane {t.thread_id % 32} of warp {t.thread_id // 32}, "
                f"block ({block})){ins}")

    def fail(self, message: str) -> ForeignEmulationError:
        return ForeignEmulationError(f"{self.where()}: {message}")

    # --- registers and operands
    def special(self, name: str) -> int | None:
        t = self.thread
        dims = {"tid": t.threadIdx, "ctaid": t.blockIdx,
                "ntid": t._manager._block_dim, "nctaid": t._manager._grid_dim}
        if name == "%laneid":
            return t.thread_id % 32
        if name == "%warpid":
            return t.thread_id // 32
        m = re.fullmatch(r"%(tid|ctaid|ntid|nctaid)\.([xyz])", name)
        if m:
            value = dims[m.group(1)]
            axis = "xyz".index(m.group(2))
            return int(getattr(value, m.group(2)) if hasattr(value, "x") else value[axis])
        return None

    def read(self, operand: str, t: str) -> int:
        """Bits of ``operand`` as type ``t`` (a float immediate is converted to ``t``)."""
        operand = operand.strip()
        width = _width(t)
        if operand.startswith("%"):
            if operand in self.regs:
                value = self.regs[operand]
                return value if t == "pred" else _mask(value, width)
            value = self.special(operand)
            if value is not None:
                return _mask(value, width)
            raise self.fail(f"reads {operand} before anything was written to it")
        immediate = _parse_immediate(operand)
        if immediate is None:
            raise self.fail(f"cannot read operand {operand!r} (symbols and labels are not "
                            "emulated)")
        if isinstance(immediate, float):
            if t[0] == "f":
                return _from_float(immediate, width)
            immediate = int(immediate)
        return _mask(immediate, width)

    def write(self, operand: str, value) -> None:
        operand = operand.strip()
        if operand == "_":
            return
        if not operand.startswith("%") or self.special(operand) is not None:
            raise self.fail(f"cannot write to {operand!r}")
        self.regs[operand] = value if isinstance(value, bool) else int(value)

    def predicate(self, operand: str) -> bool:
        operand = operand.strip()
        negate = operand.startswith("!")
        value = bool(self.read(operand.lstrip("!"), "pred"))
        return not value if negate else value

    # --- memory
    def address(self, operand: str) -> tuple[str | None, int]:
        """(parameter name or None, address) of a memory operand ``[base+offset]``."""
        m = _MEMORY.match(operand.strip())
        if not m:
            raise self.fail(f"cannot decode the memory operand {operand!r}")
        base, sign, offset = m.group(1).strip(), m.group(2), m.group(3)
        off = 0
        if offset:
            value = _parse_immediate(offset.replace(" ", ""))
            if not isinstance(value, int):
                raise self.fail(f"cannot decode the offset in {operand!r}")
            off = -value if sign == "-" else value
        if base in self.params or base.startswith("func_retval") or base.endswith("_retval0"):
            return base, off
        if base.startswith("%"):
            return None, _mask(self.read(base, "u64") + off, 64)
        value = _parse_immediate(base)
        if isinstance(value, int):
            return None, value + off
        raise self.fail(f"cannot access {base!r}: variables declared in the CUDA C source "
                        "(__shared__, __device__) are not emulated")

    def generic(self, address: int, nbytes: int) -> tuple[np.ndarray, int]:
        if RET_BASE <= address and address + nbytes <= RET_BASE + RET_SIZE:
            return self.ret, address - RET_BASE
        for host, size, flat, _ in self.regions:
            if host <= address and address + nbytes <= host + size:
                return flat, address - host
        region = _window().by_host(address)
        if region is not None and address + nbytes <= region.host + region.nbytes:
            return region.flat, address - region.host
        if RET_BASE <= address < RET_BASE + RET_SIZE:
            raise self.fail(
                f"writes past the return slot (byte {address - RET_BASE}): the declared "
                "return type is smaller than what the function stores through ret")
        raise self.fail(
            f"generic address {address:#x} is not in a shared array, an array passed as a "
            "pointer or the return slot (on a GPU: an illegal address or wrong data)")

    def memory(self, space: str, address: int, nbytes: int) -> tuple[np.ndarray, int]:
        if space == "shared":
            return _shared_bytes(address, nbytes, self.where())
        if space in ("", "global"):
            return self.generic(address, nbytes)
        raise self.fail(f".{space} memory is not emulated")


def _space(ins: _Instruction) -> str:
    for q in ins.quals:
        if q in ("param", "shared", "global", "local", "const", "tex"):
            return q
    return ""


# ---------------------------------------------------------------------------
# Instruction semantics


def _int_binary(op):
    def run(lane: _Lane, ins: _Instruction) -> None:
        t = ins.types[-1]
        w = _width(t)
        if t == "pred":
            a, b = lane.predicate(ins.operands[1]), lane.predicate(ins.operands[2])
            lane.write(ins.operands[0], bool(op(int(a), int(b), 1, False)))
            return
        if t[0] == "f":
            a = _to_float(lane.read(ins.operands[1], t), w)
            b = _to_float(lane.read(ins.operands[2], t), w)
            lane.write(ins.operands[0], _from_float(_FLOAT_OPS[ins.base](a, b, w), w))
            return
        wide = "wide" in ins.quals
        a, b = lane.read(ins.operands[1], t), lane.read(ins.operands[2], t)
        if t[0] == "s":
            a, b = _signed(a, w), _signed(b, w)
        if ins.base == "mul" and "hi" in ins.quals:
            result = (a * b) >> w
        else:
            result = op(a, b, w, t[0] == "s")
        lane.write(ins.operands[0], _mask(result, 2 * w if wide else w))

    return run


def _shift(a, b, w, signed, left):
    b = min(b, w)
    if left:
        return a << b
    return a >> b  # a is already sign-interpreted for .s types


def _float_round(value: float, w: int) -> float:
    return float(np.array(value, _FLOAT_DTYPES[w]))


def _float_op(op):
    def run(a: float, b: float, w: int) -> float:
        dtype = _FLOAT_DTYPES[w]
        with np.errstate(all="ignore"):
            return _float_round(op(np.array(a, dtype), np.array(b, dtype)), w)

    return run


_FLOAT_OPS = {
    "add": _float_op(lambda a, b: a + b),
    "sub": _float_op(lambda a, b: a - b),
    "mul": _float_op(lambda a, b: a * b),
    "div": _float_op(lambda a, b: a / b),
    "min": lambda a, b, w: min(a, b),
    "max": lambda a, b, w: max(a, b),
}


def _int_div(a, b, w, signed):
    if b == 0:
        return (1 << w) - 1
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _int_rem(a, b, w, signed):
    if b == 0:
        return a
    return a - _int_div(a, b, w, signed) * b


_BINARY = {
    "add": _int_binary(lambda a, b, w, s: a + b),
    "sub": _int_binary(lambda a, b, w, s: a - b),
    "mul": _int_binary(lambda a, b, w, s: a * b),
    "div": _int_binary(_int_div),
    "rem": _int_binary(_int_rem),
    "and": _int_binary(lambda a, b, w, s: a & b),
    "or": _int_binary(lambda a, b, w, s: a | b),
    "xor": _int_binary(lambda a, b, w, s: a ^ b),
    "min": _int_binary(lambda a, b, w, s: min(a, b)),
    "max": _int_binary(lambda a, b, w, s: max(a, b)),
    "shl": _int_binary(lambda a, b, w, s: _shift(a, b, w, s, True)),
    "shr": _int_binary(lambda a, b, w, s: _shift(a, b, w, s, False)),
}


def _shift_run(left):
    def run(lane: _Lane, ins: _Instruction) -> None:
        t = ins.types[-1]
        w = _width(t)
        a = lane.read(ins.operands[1], t)
        b = lane.read(ins.operands[2], "u32")
        if t[0] == "s":
            a = _signed(a, w)
        lane.write(ins.operands[0], _mask(_shift(a, b, w, t[0] == "s", left), w))

    return run


_BINARY["shl"] = _shift_run(True)
_BINARY["shr"] = _shift_run(False)


def _unary(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    if t == "pred":
        lane.write(ins.operands[0], not lane.predicate(ins.operands[1]))
        return
    a = lane.read(ins.operands[1], t)
    if t[0] == "f":
        x = _to_float(a, w)
        result = {"neg": -x, "abs": abs(x)}.get(ins.base)
        if result is None:
            raise lane.fail(f"{ins.opcode} is not emulated")
        lane.write(ins.operands[0], _from_float(result, w))
        return
    s = _signed(a, w)
    result = {"not": ~a, "neg": -s, "abs": abs(s)}[ins.base]
    lane.write(ins.operands[0], _mask(result, w))


def _mad(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    if t[0] == "f" or ins.base == "fma":
        a, b, c = (_to_float(lane.read(x, t), w) for x in ins.operands[1:4])
        lane.write(ins.operands[0], _from_float(_float_round(a * b + c, w), w))
        return
    a, b = lane.read(ins.operands[1], t), lane.read(ins.operands[2], t)
    if t[0] == "s":
        a, b = _signed(a, w), _signed(b, w)
    wide = "wide" in ins.quals
    product = (a * b) >> w if "hi" in ins.quals else a * b
    c = lane.read(ins.operands[3], f"{t[0]}{2 * w}" if wide else t)
    lane.write(ins.operands[0], _mask(product + c, 2 * w if wide else w))


def _mov(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1] if ins.types else "b32"
    w = _width(t)
    dst, src = ins.operands[0], ins.operands[1]
    parts_src, parts_dst = _vector(src), _vector(dst)
    if len(parts_src) > 1:  # pack: mov.b32 %r, {%h0, %h1} (first element in the low bits)
        k = w // len(parts_src)
        value = 0
        for i, part in enumerate(parts_src):
            value |= lane.read(part, f"b{k}") << (k * i)
        lane.write(dst, value)
    elif len(parts_dst) > 1:  # unpack
        k = w // len(parts_dst)
        value = lane.read(src, t)
        for i, part in enumerate(parts_dst):
            lane.write(part, _mask(value >> (k * i), k))
    elif t == "pred":
        lane.write(dst, lane.predicate(src))
    else:
        lane.write(dst, lane.read(src, t))


def _cvt(lane: _Lane, ins: _Instruction) -> None:
    if len(ins.types) < 2:
        raise lane.fail("cvt needs a destination and a source type")
    dt, st = ins.types[-2], ins.types[-1]
    dw, sw = _width(dt), _width(st)
    value = lane.read(ins.operands[1], st)
    if st[0] == "f":
        x = _to_float(value, sw)
        if dt[0] == "f":
            lane.write(ins.operands[0], _from_float(x, dw))
            return
        if np.isnan(x):
            result = 0
        else:
            if "rni" in ins.quals:
                x = float(np.rint(x))
            elif "rmi" in ins.quals:
                x = float(np.floor(x))
            elif "rpi" in ins.quals:
                x = float(np.ceil(x))
            result = int(x)
            lo, hi = ((-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dt[0] == "s"
                      else (0, (1 << dw) - 1))
            result = min(max(result, lo), hi)
        lane.write(ins.operands[0], _mask(result, dw))
        return
    number = _signed(value, sw) if st[0] == "s" else value
    if dt[0] == "f":
        lane.write(ins.operands[0], _from_float(float(number), dw))
        return
    if "sat" in ins.quals:
        lo, hi = ((-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dt[0] == "s" else (0, (1 << dw) - 1))
        number = min(max(number, lo), hi)
    lane.write(ins.operands[0], _mask(number, dw))


def _cvta(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1] if ins.types else "u64"
    w = _width(t)
    value = lane.read(ins.operands[1], t)
    to = "to" in ins.quals
    if "shared" not in ins.quals:  # global, local, const: generic == host address here
        lane.write(ins.operands[0], _mask(value, w))
        return
    window = _window()
    if to:
        region = window.by_host(value)
        if region is None:
            raise lane.fail(
                f"cvta.to.shared of {value:#x}, which does not point into a shared array "
                "(a global array? only cuda.shared.array memory has a shared-space address)")
        lane.write(ins.operands[0], _mask(region.window + value - region.host, w))
    else:
        region = window.by_window(value)
        if region is None:
            raise lane.fail(f"cvta.shared of {value:#x}, which is outside every shared array")
        lane.write(ins.operands[0], _mask(region.host + value - region.window, w))


def _setp(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    cmp = next(q for q in ins.quals if q not in ins.types)
    a, b = lane.read(ins.operands[1], t), lane.read(ins.operands[2], t)
    if t[0] == "f":
        a, b = _to_float(a, w), _to_float(b, w)
    elif t[0] == "s":
        a, b = _signed(a, w), _signed(b, w)
    table = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
             "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}
    key = cmp[:-1] if cmp.endswith("u") and cmp[:-1] in table and t[0] == "f" else cmp
    if key not in table:
        raise lane.fail(f"comparison .{cmp} is not emulated")
    result = bool(table[key])
    dests = ins.operands[0].split("|")
    lane.write(dests[0], result)
    if len(dests) > 1:
        lane.write(dests[1], not result)


def _selp(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    pick = ins.operands[1] if lane.predicate(ins.operands[3]) else ins.operands[2]
    lane.write(ins.operands[0], lane.read(pick, t))


def _prmt(lane: _Lane, ins: _Instruction) -> None:
    if any(q in ins.quals for q in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")):
        raise lane.fail(f"{ins.opcode}: only the default prmt mode is emulated")
    a = lane.read(ins.operands[1], "b32")
    b = lane.read(ins.operands[2], "b32")
    c = lane.read(ins.operands[3], "b32")
    source = (b << 32) | a
    result = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = (source >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        result |= byte << (8 * i)
    lane.write(ins.operands[0], result)


def _bfe(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    a = lane.read(ins.operands[1], t)
    pos = lane.read(ins.operands[2], "u32") & 0xFF
    length = lane.read(ins.operands[3], "u32") & 0xFF
    field_ = (a >> pos) & ((1 << length) - 1) if pos < w else 0
    if t[0] == "s" and length and field_ >> (length - 1) & 1:
        field_ -= 1 << length
    lane.write(ins.operands[0], _mask(field_, w))


def _bfi(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    a, b = lane.read(ins.operands[1], t), lane.read(ins.operands[2], t)
    pos = lane.read(ins.operands[3], "u32") & 0xFF
    length = lane.read(ins.operands[4], "u32") & 0xFF
    mask = ((1 << length) - 1) << pos
    lane.write(ins.operands[0], _mask((b & ~mask) | ((a << pos) & mask), w))


def _ld(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    dests = _vector(ins.operands[0])
    param, address = lane.address(ins.operands[1])
    space = _space(ins)
    if space == "param":
        if param is None or param not in lane.params or address != 0 or len(dests) != 1:
            raise lane.fail("reads a parameter that numba does not pass")
        lane.write(dests[0], _mask(lane.params[param], w))
        return
    nbytes = max(w // 8, 1)
    flat, offset = lane.memory(space, address, nbytes * len(dests))
    for i, dest in enumerate(dests):
        raw = bytes(flat[offset + i * nbytes: offset + (i + 1) * nbytes])
        value = int.from_bytes(raw, "little")
        if t[0] == "s":
            value = _signed(value, w)
        lane.write(dest, _mask(value, max(w, 32) if t[0] in "su" else w))


def _st(lane: _Lane, ins: _Instruction) -> None:
    t = ins.types[-1]
    w = _width(t)
    param, address = lane.address(ins.operands[0])
    values = _vector(ins.operands[1])
    space = _space(ins)
    if space == "param":
        lane.status = _signed(lane.read(values[0], t), w)
        return
    nbytes = max(w // 8, 1)
    flat, offset = lane.memory(space, address, nbytes * len(values))
    for i, operand in enumerate(values):
        value = lane.read(operand, t)
        flat[offset + i * nbytes: offset + (i + 1) * nbytes] = np.frombuffer(
            value.to_bytes(nbytes, "little"), dtype=np.uint8)


def _unsupported(lane: _Lane, ins: _Instruction) -> None:
    if ins.base in ("bra", "brx", "call"):
        raise lane.fail(
            "branches and calls are not emulated by the simulator: keep foreign functions "
            "straight-line (no if, loops or calls), or test this one on a GPU")
    raise lane.fail(f"the PTX instruction {ins.opcode} is not emulated by the simulator "
                    "(it may well work on a GPU)")


# --- warp-wide instructions ----------------------------------------------------------------


def _matrix_count(ins: _Instruction, lane: _Lane) -> int:
    if not ins.has("sync", "aligned"):
        raise lane.fail(f"{ins.base} must be .sync.aligned")
    if "m8n8" not in ins.quals or "b16" not in ins.quals:
        raise lane.fail(f"{ins.opcode}: only the .m8n8 shape with .b16 elements is emulated "
                        "(m16n16, m8n16 and .b8 need sm_100)")
    for q in ("x1", "x2", "x4"):
        if q in ins.quals:
            return int(q[1])
    raise lane.fail(f"{ins.opcode} lacks .x1, .x2 or .x4")


@dataclass
class _MatrixRequest:
    space: str
    address: int
    where: str
    values: tuple = field(default_factory=tuple)


def _row_rows(group, n: int, what: str, space: str):
    """Shared-window address of row r of matrix i, from lane 8i + r; or a _Failure."""
    window = _window()
    addresses = []
    for i in range(n):
        rows = []
        for r in range(8):
            request = group[8 * i + r].value
            address = request.address
            if space != "shared":  # a generic address: it must point into shared memory
                region = window.by_host(address)
                if region is None:
                    return _Failure(
                        f"{request.where}: {what} without .shared takes a generic address, but "
                        f"lane {8 * i + r}'s ({address:#x}) is not in shared memory")
                address = region.window + address - region.host
            if address % 16:
                return _Failure(
                    f"{request.where}: lane {8 * i + r} gives row {r} of matrix {i} at "
                    f"shared address {address:#x}, which is not 16-byte aligned (each row is "
                    "16 contiguous bytes; on a GPU: a misaligned-address error)")
            try:
                _shared_bytes(address, 16, f"lane {8 * i + r} (row {r} of matrix {i})")
            except ForeignEmulationError as exc:
                return _Failure(f"{request.where}: {exc}")
            rows.append(address)
        addresses.append(rows)
    return addresses


def _full_warp(group, what: str):
    if len(group) == warp.WARP_SIZE:
        return None
    lanes = sorted(group)
    where = next(iter(group.values())).value.where
    return _Failure(
        f"{where}: {what} is a warp-wide instruction: all 32 lanes must execute it, but this "
        f"warp has only lanes {lanes[0]}..{lanes[-1]} (make the block a multiple of 32 threads)")


def _record_wavefronts(kind: str, addresses) -> None:
    fronts = sum(fragments.wavefronts(rows) for rows in addresses)
    _count(kind, instructions=1, wavefronts=fronts, ideal=len(addresses),
           conflicts=fronts - len(addresses))


def _ldmatrix_results(n: int, trans: bool, space: str):
    def results(group, mask):
        failure = _full_warp(group, "ldmatrix")
        addresses = failure or _row_rows(group, n, "ldmatrix", space)
        if isinstance(addresses, _Failure):
            return dict.fromkeys(group, addresses)
        matrices = []
        for rows in addresses:
            data = []
            for address in rows:
                flat, offset = _shared_bytes(address, 16, "ldmatrix")
                data.append(flat[offset:offset + 16].view("<u2").copy())
            matrices.append(np.stack(data))
        regs = fragments.ldmatrix(matrices, trans)
        _record_wavefronts("ldmatrix", addresses)
        return {lane: tuple(int(v) for v in regs[lane]) for lane in group}

    return results


def _stmatrix_results(n: int, trans: bool, space: str):
    def results(group, mask):
        failure = _full_warp(group, "stmatrix")
        addresses = failure or _row_rows(group, n, "stmatrix", space)
        if isinstance(addresses, _Failure):
            return dict.fromkeys(group, addresses)
        regs = np.array([group[lane].value.values for lane in range(warp.WARP_SIZE)],
                        dtype=np.uint32)
        matrices = fragments.stmatrix(regs, trans)
        for rows, matrix in zip(addresses, matrices):
            for address, row in zip(rows, matrix):
                flat, offset = _shared_bytes(address, 16, "stmatrix")
                flat[offset:offset + 16] = row.astype("<u2").view(np.uint8)
        _record_wavefronts("stmatrix", addresses)
        return dict.fromkeys(group, ())

    return results


def _mma_results(group, mask):
    failure = _full_warp(group, "mma")
    if failure:
        return dict.fromkeys(group, failure)
    values = [group[lane].value.values for lane in range(warp.WARP_SIZE)]
    a = np.array([v[0:4] for v in values], dtype=np.uint32)
    b = np.array([v[4:6] for v in values], dtype=np.uint32)
    c = np.array([v[6:10] for v in values], dtype=np.uint32).view(np.float32)
    d = fragments.mma_m16n8k16(a, b, c).view(np.uint32)
    _count("mma", instructions=1)
    return {lane: tuple(int(x) for x in d[lane]) for lane in group}


def _warp_op(lane: _Lane, ins: _Instruction, value, results):
    op = f"{lane.program.name}#{ins.index}: {ins.opcode}"
    result = warp.collective(op, value, results)
    if isinstance(result, _Failure):
        raise ForeignEmulationError(result.message)
    return result


def _ldmatrix(lane: _Lane, ins: _Instruction) -> None:
    n = _matrix_count(ins, lane)
    dests = _vector(ins.operands[0])
    if len(dests) != n:
        raise lane.fail(f"ldmatrix .x{n} writes {n} register(s), not {len(dests)}")
    space = _space(ins)
    _, address = lane.address(ins.operands[1])
    request = _MatrixRequest(space, address, lane.where())
    regs = _warp_op(lane, ins, request, _ldmatrix_results(n, "trans" in ins.quals, space))
    for dest, value in zip(dests, regs):
        lane.write(dest, value)


def _stmatrix(lane: _Lane, ins: _Instruction) -> None:
    n = _matrix_count(ins, lane)
    sources = _vector(ins.operands[1])
    if len(sources) != n:
        raise lane.fail(f"stmatrix .x{n} reads {n} register(s), not {len(sources)}")
    space = _space(ins)
    _, address = lane.address(ins.operands[0])
    values = tuple(lane.read(s, "b32") for s in sources)
    request = _MatrixRequest(space, address, lane.where(), values)
    _warp_op(lane, ins, request, _stmatrix_results(n, "trans" in ins.quals, space))


_MMA = ("sync", "aligned", "m16n8k16", "row", "col")


def _mma(lane: _Lane, ins: _Instruction) -> None:
    if not ins.has(*_MMA) or ins.types != ("f32", "f16", "f16", "f32"):
        raise lane.fail(f"{ins.opcode}: only mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                        "is emulated")
    groups = [_vector(op) for op in ins.operands]
    if [len(g) for g in groups] != [4, 4, 2, 4]:
        raise lane.fail("m16n8k16 with float32 accumulators takes {d0..d3}, {a0..a3}, "
                        "{b0, b1}, {c0..c3}")
    d, a, b, c = groups
    values = tuple(lane.read(x, "b32") for x in (*a, *b)) + tuple(lane.read(x, "f32") for x in c)
    result = _warp_op(lane, ins, _MatrixRequest("", 0, lane.where(), values), _mma_results)
    for dest, value in zip(d, result):
        lane.write(dest, value)


def _bar(lane: _Lane, ins: _Instruction) -> None:
    if "warp" not in ins.quals:
        raise lane.fail(f"{ins.opcode} (a block-wide barrier) is not emulated inside foreign "
                        "functions; call cuda.syncthreads() in the kernel")
    mask = lane.read(ins.operands[0], "b32") if ins.operands else warp.FULL_MASK
    warp.collective(f"{lane.program.name}#{ins.index}: {ins.opcode}", None,
                    lambda group, m: dict.fromkeys(group), mask=mask)


_HANDLERS = {
    **_BINARY,
    "not": _unary, "neg": _unary, "abs": _unary,
    "mad": _mad, "fma": _mad,
    "mov": _mov, "cvt": _cvt, "cvta": _cvta, "setp": _setp, "selp": _selp, "prmt": _prmt,
    "bfe": _bfe, "bfi": _bfi, "ld": _ld, "st": _st,
    "ldmatrix": _ldmatrix, "stmatrix": _stmatrix, "mma": _mma, "bar": _bar,
}


def _execute(program: _Program, params: dict[str, int], regions: list, thread) -> _Lane:
    lane = _Lane(program, params, regions, thread)
    for ins in program.instructions:
        lane.ins = ins
        if ins.guard is not None:
            taken = bool(lane.read(ins.guard, "pred"))
            if taken == ins.negate:
                continue
        if ins.base in ("ret", "exit"):
            break
        handler = _HANDLERS.get(ins.base, _unsupported)
        try:
            handler(lane, ins)
        except (ForeignEmulationError, warp.WarpCollectiveError):
            raise
        except (IndexError, ValueError, KeyError, StopIteration) as exc:
            raise lane.fail(f"cannot emulate this instruction ({type(exc).__name__}: {exc})") \
                from None
    lane.ins = None
    return lane


# ---------------------------------------------------------------------------
# The declared function


def _pointer_address(value, name: str, index: int) -> tuple[int, tuple | None]:
    """(address, region) of an argument passed to a CPointer parameter."""
    data = getattr(value, "data", None)
    array = getattr(value, "_arr", None)
    if isinstance(value, np.ndarray) or hasattr(value, "_ary") or hasattr(
            value, "__cuda_array_interface__"):
        raise TypeError(
            f"{name}: argument {index + 1} is an array, but the parameter is a C pointer; "
            "numba does not convert arrays to pointers: pass tile[i:].ctypes (a pointer to "
            "element i) or ffi.from_buffer(tile[i:])")
    if isinstance(data, int) and array is not None:
        base = array
        while isinstance(getattr(base, "base", None), np.ndarray):
            base = base.base
        region = None
        if isinstance(base, np.ndarray) and base.flags.c_contiguous:
            host = base.__array_interface__["data"][0]
            region = (host, base.nbytes, np.asarray(base).reshape(-1).view(np.uint8),
                      "argument")
        return data, region
    try:  # a cffi pointer (ffi.from_buffer(...))
        import cffi

        ffi = cffi.FFI()
        if isinstance(value, ffi.CData):
            return int(ffi.cast("uintptr_t", value)), None
    except ImportError:
        pass
    raise TypeError(f"{name}: argument {index + 1} ({type(value).__name__}) cannot be passed to "
                    "a C pointer parameter: pass array[i:].ctypes")


def _argument_bits(value, typ, name: str, index: int) -> tuple[int, tuple | None]:
    from numba.cuda import types

    if isinstance(typ, types.CPointer):
        return _pointer_address(value, name, index)
    if isinstance(typ, types.Float):
        return _from_float(float(value), typ.bitwidth), None
    if isinstance(typ, types.Boolean):
        return int(bool(value)), None
    if isinstance(typ, types.Integer):
        if isinstance(value, (float, np.floating)):
            value = int(value)
        return _mask(int(value), typ.bitwidth), None
    raise TypeError(f"{name}: parameters of type {typ} are not emulated by the simulator")


def _return_dtype(typ):
    from numba.cuda import types

    if isinstance(typ, (types.NoneType,)) or typ == types.void:
        return None
    if isinstance(typ, types.BaseTuple):
        fields = [(f"f{i}", _return_dtype(t)) for i, t in enumerate(typ.types)]
        return np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields]},
                        align=True)
    if isinstance(typ, types.Boolean):
        return np.dtype(np.uint8)
    if isinstance(typ, (types.Integer, types.Float)):
        from numba.np import numpy_support

        return numpy_support.as_dtype(typ)
    raise TypeError(f"return type {typ} is not emulated by the simulator")


class ForeignFunction:
    """What ``cuda.declare_device`` returns in simulator mode: call it inside a kernel."""

    def __init__(self, name: str, sig, link=None, use_cooperative=False, abi="numba"):
        from numba.cuda.core import sigutils

        if abi != "numba":
            raise NotImplementedError(
                f"declare_device(..., abi={abi!r}): the simulator emulates numba's ABI only")
        argtypes, restype = sigutils.normalize_signature(sig)
        if restype is None:
            raise TypeError("Return type must be provided for device declarations")
        self.__name__ = self.name = name
        self.argtypes, self.restype = tuple(argtypes), restype
        self.link = link
        self._program: _Program | None = None
        self._lock = threading.Lock()
        self.return_dtype = _return_dtype(restype)
        if self.return_dtype is not None and self.return_dtype.itemsize > RET_SIZE:
            raise TypeError(f"{name}: return type {restype} is too large to emulate")

    def __repr__(self) -> str:
        args = ", ".join(str(t) for t in self.argtypes)
        return f"<foreign function {self.name}: {self.restype}({args}) (simulated)>"

    def program(self) -> _Program:
        """Compile the linked code and decode this function's PTX (once per declaration)."""
        if self._program is None:
            with self._lock:
                if self._program is None:
                    try:
                        items = tuple(_link_items(self.link))
                        self._program = _load_program(self.name, items, len(self.argtypes))
                    except ptxmod.CompileError as exc:
                        raise ForeignEmulationError(f"{self.name}: {exc}") from None
        return self._program

    def __call__(self, *args):
        thread = threading.current_thread()
        if getattr(thread, "_manager", None) is None:
            raise ForeignEmulationError(f"{self.name} can only be called inside a kernel")
        if len(args) != len(self.argtypes):
            raise TypeError(f"{self.name} takes {len(self.argtypes)} argument(s) "
                            f"({', '.join(map(str, self.argtypes))}), not {len(args)}")
        program = self.program()
        names = [name for _, name in program.fn.params]
        params = {names[0]: RET_BASE}
        regions = []
        for index, (value, typ) in enumerate(zip(args, self.argtypes)):
            bits, region = _argument_bits(value, typ, self.name, index)
            params[names[index + 1]] = bits
            if region is not None:
                regions.append(region)
        lane = _execute(program, params, regions, thread)
        if lane.status is None:
            raise ForeignEmulationError(f"{lane.where()}: returned without a status value")
        if lane.status != 0:
            raise ForeignEmulationError(
                f"{lane.where()}: returned status {lane.status}. numba's foreign functions "
                "return 0 on success (a stub that still says `return -1;` is not written yet)")
        if self.return_dtype is None:
            return None
        record = lane.ret[:self.return_dtype.itemsize].copy().view(self.return_dtype)[0]
        if self.return_dtype.names:
            return tuple(record[n][()] for n in self.return_dtype.names)
        return record[()] if hasattr(record, "shape") else record


def declare_device(name, sig, link=None, use_cooperative=False, abi="numba"):
    """The simulator's ``cuda.declare_device``: a :class:`ForeignFunction` that runs the
    linked code's PTX (see the module's docstring)."""
    return ForeignFunction(name, sig, link=link, use_cooperative=use_cooperative, abi=abi)


# ---------------------------------------------------------------------------
# Installation


def _validate_alignment(alignment) -> None:
    if not isinstance(alignment, int) or isinstance(alignment, bool):
        raise ValueError("Alignment must be an integer")
    if alignment <= 0:
        raise ValueError("Alignment must be positive")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")
    if alignment % struct.calcsize("P"):
        raise ValueError(f"Alignment must be a multiple of {struct.calcsize('P')}")


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array`` of the simulator, also accepting ``alignment`` as numba does
    on a GPU (the emulated shared window places every array on a 128-byte boundary)."""
    from numba.cuda import types
    from numba.np import numpy_support

    if alignment is not None:
        _validate_alignment(alignment)
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    # Identify allocations by the caller's file and line, as the simulator does.
    caller = traceback.extract_stack(sys._getframe())[-2][0:2]
    res = self._allocations.get(caller)
    if res is None:
        res = np.empty(shape, dtype)
        self._allocations[caller] = res
        if alignment is not None:
            if not hasattr(self, "_workbook_alignment"):
                self._workbook_alignment = {}
            self._workbook_alignment[id(res)] = alignment
    return res


def install() -> None:
    """Make ``cuda.declare_device`` and aligned shared arrays work in the simulator
    (idempotent)."""
    import numba.cuda
    from numba.cuda.simulator import api, kernelapi

    if getattr(api, _INSTALLED, False):
        return
    api.declare_device = declare_device
    numba.cuda.declare_device = declare_device
    # Only replace the simulator's own shared.array: an extension that already wraps it
    # (workbook.sim.shared_memory) handles alignment itself.
    if getattr(kernelapi.FakeCUDAShared.array, "__module__", "") == kernelapi.__name__:
        kernelapi.FakeCUDAShared.array = _shared_array
    setattr(api, _INSTALLED, True)
