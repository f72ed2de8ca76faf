"""Running a decoded function in one lane: the instruction table."""

from __future__ import annotations

from workbook.sim import warp
from workbook.sim.foreign.arithmetic import (
    _BINARY,
    _bfe,
    _bfi,
    _cvt,
    _mad,
    _mov,
    _prmt,
    _selp,
    _setp,
    _unary,
)
from workbook.sim.foreign.common import ForeignEmulationError
from workbook.sim.foreign.lane import _Lane
from workbook.sim.foreign.matrix import _bar, _ldmatrix, _mma, _stmatrix
from workbook.sim.foreign.memory import _cvta, _ld, _st
from workbook.sim.foreign.program import _Instruction, _Program


def _unsupported(lane: _Lane, ins: _Instruction) -> None:
    if ins.base in ("bra", "brx", "call"):
        raise lane.fail(
            "branches and calls are not emulated by the simulator: keep foreign functions "
            "straight-line (no if, loops or calls), or test this one on a GPU")
    raise lane.fail(f"the PTX instruction {ins.opcode} is not emulated by the simulator "
                    "(it may well work on a GPU)")



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
