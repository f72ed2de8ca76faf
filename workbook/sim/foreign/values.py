"""Bits, numbers and operands: how the PTX emulation reads and writes values."""

from __future__ import annotations

import re

import numpy as np


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
