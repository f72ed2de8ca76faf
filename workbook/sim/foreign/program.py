"""Decoding: from linked CUDA C or PTX to the instructions of one function."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from workbook import ptx as ptxmod
from workbook.sim.foreign.common import ForeignEmulationError
from workbook.sim.foreign.values import _split_operands

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
