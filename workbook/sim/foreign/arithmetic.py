"""Integer, floating-point, bit, compare and move instructions."""

from __future__ import annotations

import numpy as np

from workbook.sim.foreign.lane import _Lane
from workbook.sim.foreign.program import _Instruction
from workbook.sim.foreign.values import (
    _FLOAT_DTYPES,
    _from_float,
    _mask,
    _signed,
    _to_float,
    _vector,
    _width,
)


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
