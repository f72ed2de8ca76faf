"""Memory instructions: address conversion (cvta), loads and stores."""

from __future__ import annotations

import numpy as np

from workbook.sim import sanitizer
from workbook.sim.foreign.lane import _Lane, _space
from workbook.sim.foreign.program import _Instruction
from workbook.sim.foreign.values import _mask, _signed, _vector, _width
from workbook.sim.foreign.window import _window


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
    lane.report(space, address, nbytes * len(dests), sanitizer.READ)
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
    lane.report(space, address, nbytes * len(values), sanitizer.WRITE)
    for i, operand in enumerate(values):
        value = lane.read(operand, t)
        flat[offset + i * nbytes: offset + (i + 1) * nbytes] = np.frombuffer(
            value.to_bytes(nbytes, "little"), dtype=np.uint8)
