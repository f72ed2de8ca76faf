"""One lane (simulated thread) executing a foreign function: registers, operands, memory."""

from __future__ import annotations

import re
import sys

import numpy as np

from workbook.sim import sanitizer
from workbook.sim.foreign.common import RET_BASE, RET_SIZE, ForeignEmulationError
from workbook.sim.foreign.program import _Instruction, _Program
from workbook.sim.foreign.values import _MEMORY, _from_float, _mask, _parse_immediate, _width
from workbook.sim.foreign.window import _shared_bytes, _window, report_shared


class _Failure:
    """A warp instruction's error, handed to every lane so that all of them raise it."""

    def __init__(self, message: str, error: type = ForeignEmulationError):
        self.message = message
        self.error = error


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
        self._site = None

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

    def site(self):
        """The kernel's line that called the foreign function (for sanitizer messages)."""
        if self._site is None:
            self._site = sanitizer.caller_site(sys._getframe())
        return self._site

    def report(self, space: str, address: int, nbytes: int, kind: int) -> None:
        """Tell the sanitizer about this lane's access if it is to shared memory."""
        if space in ("shared", "", "global"):
            report_shared(self.thread, self.site(), f"{self.ins.opcode}", kind, address,
                          nbytes, generic=space != "shared")

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
