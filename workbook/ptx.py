"""CUDA C -> PTX -> machine code on the CPU, and what is inside: no GPU needed.

``compile_ptx(source)`` runs NVRTC (the same compiler numba-cuda uses for a
linked ``.cu`` or ``cuda.CUSource``, with the same relocatable-device-code
option) and returns the PTX. NVRTC copies ``asm`` statements into the PTX
without checking them; :func:`assemble` runs ptxas (through nvJitLink) on that
PTX, so a misspelled instruction is reported here and not at the first launch
on a GPU. :func:`parse_functions` splits PTX into functions and statements,
:func:`check_foreign_function` checks a function against numba's foreign-function
ABI and the instructions it must contain, and :func:`sass` / :func:`count_sass`
give the machine code of a compiled kernel on a GPU.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

ARCH = (9, 0)  # stmatrix needs sm_90; the lesson checks PTX for Hopper


class CompileError(RuntimeError):
    """NVRTC or ptxas rejected the code; the message holds the compiler's log."""


class ForeignFunctionError(ValueError):
    """A compiled function does not match what the kernel declared or needs."""


# --- compiling ------------------------------------------------------------------------------

def _check(result, what: str):
    status, *values = result
    if int(status) != 0:
        raise CompileError(f"{what} failed: {status!r}")
    return values[0] if len(values) == 1 else values


def _include_dirs() -> list[str]:
    try:
        from numba.cuda.cuda_paths import get_cuda_paths

        path = get_cuda_paths()["include_dir"].info
    except Exception:  # no CUDA headers found: plain device code needs none
        return []
    return [path] if path and os.path.isdir(path) else []


@functools.lru_cache(maxsize=64)
def compile_ptx(source: str, arch: tuple[int, int] = ARCH, name: str = "foreign.cu") -> str:
    """PTX for ``source`` (CUDA C++) for ``sm_<arch>``; :class:`CompileError` with the log.

    NVRTC has no C++ standard library headers: use ``unsigned int`` and
    ``unsigned short`` rather than ``<cstdint>``'s ``uint32_t`` and ``uint16_t``.
    """
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        options = [f"-arch=sm_{arch[0]}{arch[1]}".encode(), b"-rdc=true"]
        options += [f"-I{d}".encode() for d in _include_dirs()]
        status = nvrtc.nvrtcCompileProgram(prog, len(options), options)[0]
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = bytes(size)  # a fresh buffer: b" " * 1 is the interpreter's shared b" "
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.rstrip(b"\x00").decode(errors="replace").strip()
        if int(status) != 0:
            raise CompileError(f"NVRTC could not compile the CUDA C source:\n{log_text}")
        size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        ptx = bytes(size)
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx.rstrip(b"\x00").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@functools.lru_cache(maxsize=64)
def assemble(ptx: str, arch: tuple[int, int] = ARCH) -> int:
    """Assemble PTX into machine code with ptxas (via nvJitLink); return the cubin's size.

    Raises :class:`CompileError` with ptxas's messages (an unknown instruction, a
    wrong number of operands, an instruction the architecture lacks, ...).
    """
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch=sm_{arch[0]}{arch[1]}"])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "foreign.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            text = log.rstrip(b"\x00").decode(errors="replace").strip()
            lines = ptx.splitlines()
            quoted = []
            for number in sorted({int(n) for n in re.findall(r"line (\d+);", text)}):
                if 0 < number <= len(lines):
                    quoted.append(f"  PTX line {number}: {lines[number - 1].strip()}")
            where = "\n".join(quoted)
            raise CompileError(
                f"ptxas rejected the PTX for sm_{arch[0]}{arch[1]} ({exc}):\n{text}"
                + (f"\n{where}" if where else "")) from None
        return nvjitlink.get_linked_cubin_size(handle)
    finally:
        nvjitlink.destroy(handle)


# --- reading PTX ----------------------------------------------------------------------------

@dataclass(frozen=True)
class PtxFunction:
    """One ``.func`` of a PTX module."""

    name: str
    returns: str | None  # the return parameter's declaration, e.g. ".param .b32 func_retval0"
    params: tuple[tuple[str, str], ...]  # (type, name), e.g. (".b64", "f_param_0")
    text: str  # the function as written in the PTX
    statements: tuple[str, ...]  # body statements without comments; "{" and "}" for scopes

    def opcodes(self) -> list[str]:
        """The opcode of every instruction (``ldmatrix.sync.aligned.m8n8.x1.shared.b16``, ...)."""
        return [opcode_of(s) for s in self.statements if opcode_of(s)]


_FUNC = re.compile(
    r"\.(?:visible|weak|extern)?\s*\.func\s*(?:\((?P<ret>[^)]*)\))?\s*(?P<name>[\w$]+)\s*"
    r"\((?P<params>[^)]*)\)\s*(?P<tail>[;{])", re.S)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def split_statements(body: str) -> list[str]:
    """Statements of a PTX function body; scope braces become ``"{"`` and ``"}"``."""
    body = _strip_comments(body)
    out, current, depth = [], [], 0
    for ch in body:
        if ch == "{" and depth == 0 and not "".join(current).strip():
            out.append("{")
            current = []
        elif ch == "}" and depth == 0 and not "".join(current).strip():
            out.append("}")
            current = []
        elif ch == ";" and depth == 0:
            text = " ".join("".join(current).split())
            if text:
                out.append(text)
            current = []
        else:
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
            current.append(ch)
    tail = " ".join("".join(current).split())
    if tail:
        out.append(tail)
    return out


def _body_at(text: str, start: int) -> tuple[str, int]:
    """The text between the brace at ``start`` and its matching brace."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    raise ValueError("unbalanced braces in PTX")


def parse_functions(ptx: str) -> dict[str, PtxFunction]:
    """Every function defined (not merely declared) in ``ptx``, by name."""
    clean = _strip_comments(ptx)
    found = {}
    for match in _FUNC.finditer(clean):
        if match.group("tail") != "{":
            continue
        body, end = _body_at(clean, match.end() - 1)
        params = []
        for decl in match.group("params").split(","):
            words = decl.split()
            if words:
                kind = next((w for w in words if w.startswith(".") and w != ".param"), "")
                params.append((kind, words[-1]))
        ret = (match.group("ret") or "").strip() or None
        found[match.group("name")] = PtxFunction(
            name=match.group("name"), returns=ret, params=tuple(params),
            text=clean[match.start():end], statements=tuple(split_statements(body)))
    return found


_PREDICATE = re.compile(r"^@!?%\w+\s+")


def opcode_of(statement: str) -> str:
    """The opcode of an instruction statement ('' for declarations, labels and braces)."""
    s = _PREDICATE.sub("", statement)
    if not s or s[0] in "{}." or s.endswith(":"):
        return ""
    return s.split()[0]


def qualifiers(opcode: str) -> tuple[str, set[str]]:
    """``("ldmatrix", {"sync", "aligned", "m8n8", "x1", "shared", "b16"})``; ``shared::cta``
    counts as ``shared``."""
    base, *rest = opcode.split(".")
    return base, {"shared" if q == "shared::cta" else q for q in rest}


def find_instructions(fn: PtxFunction, base: str, has: Iterable[str] = (),
                      lacks: Iterable[str] = ()) -> list[str]:
    """Opcodes in ``fn`` named ``base`` with every qualifier of ``has`` and none of ``lacks``."""
    has, lacks = set(has), set(lacks)
    found = []
    for op in fn.opcodes():
        name, quals = qualifiers(op)
        if name == base and has <= quals and not (lacks & quals):
            found.append(op)
    return found


def _mangled(functions: dict[str, PtxFunction], name: str) -> str | None:
    pattern = re.compile(rf"^_Z\d+{re.escape(name)}")
    return next((f for f in functions if pattern.match(f) or f"{len(name)}{name}" in f), None)


def function_named(ptx: str, name: str) -> PtxFunction:
    """The function ``name`` of ``ptx``, or a :class:`ForeignFunctionError` saying why not."""
    functions = parse_functions(ptx)
    if name in functions:
        return functions[name]
    mangled = _mangled(functions, name)
    if mangled:
        raise ForeignFunctionError(
            f"{name} was compiled with the C++ name {mangled}: declare it "
            f'extern "C" __device__ so that numba can link it by its plain name')
    known = ", ".join(sorted(functions)) or "none"
    raise ForeignFunctionError(
        f"the CUDA C source defines no function {name} (functions found: {known}); "
        f'define extern "C" __device__ int {name}(...)')


def check_abi(fn: PtxFunction, nargs: int) -> None:
    """numba's ABI: ``extern "C" __device__ int f(T* ret, arg1, ..., argN)`` returning 0."""
    if fn.returns is None or ".b32" not in fn.returns:
        raise ForeignFunctionError(
            f"{fn.name} returns nothing: numba calls foreign functions as "
            f"int {fn.name}(T* ret, ...) and reads the int as a status (return 0)")
    if len(fn.params) != nargs + 1:
        raise ForeignFunctionError(
            f"{fn.name} takes {len(fn.params)} parameters, but numba passes {nargs + 1}: "
            f"a pointer to the return value first, then the {nargs} declared argument(s)")


def check_foreign_function(source: str, name: str, nargs: int,
                           requires: Iterable[tuple[str, Iterable[str], Iterable[str]]] = (),
                           arch: tuple[int, int] = ARCH) -> PtxFunction:
    """Compile ``source``, assemble it, and check function ``name``.

    ``requires`` lists instructions as ``(base, has, lacks)`` (see
    :func:`find_instructions`), e.g. ``("ldmatrix", ("x1", "shared", "b16"), ("trans",))``;
    messages name the qualifiers of ``has`` in the order given.
    """
    ptx = compile_ptx(source, arch)
    assemble(ptx, arch)
    fn = function_named(ptx, name)
    check_abi(fn, nargs)
    for base, has, lacks in requires:
        if not find_instructions(fn, base, has, lacks):
            quals = sorted(has) if isinstance(has, (set, frozenset)) else list(has)
            wanted = ".".join([base, *quals]) + "".join(f" without .{q}" for q in lacks)
            present = ", ".join(sorted(set(fn.opcodes()))) or "none"
            hint = (" (__cvta_generic_to_shared(p) compiles to cvta.to.shared: a .shared "
                    "instruction needs that shared-space address, not the generic pointer)"
                    if base == "cvta" else "")
            raise ForeignFunctionError(
                f"{name}'s PTX has no {wanted} instruction{hint}; its instructions are: "
                f"{present}")
    return fn


def show_ptx(source: str, name: str, arch: tuple[int, int] = ARCH) -> None:
    """Print the PTX that NVRTC makes of function ``name``."""
    fn = function_named(compile_ptx(source, arch), name)
    print(fn.text.strip())


# --- machine code (GPU mode) ----------------------------------------------------------------

def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    try:
        from cuda import pathfinder

        return pathfinder.find_nvidia_binary_utility(name)
    except Exception:
        pass
    for root in ("/usr/local/cuda/bin",):
        if os.path.exists(os.path.join(root, name)):
            return os.path.join(root, name)
    return None


def sass(kernel) -> str | None:
    """SASS of every compiled specialisation of a numba kernel, or None if no disassembler
    (nvdisasm or cuobjdump) is available. Needs a GPU (the kernel must have been compiled)."""
    try:
        text = kernel.inspect_sass()
        return "\n".join(text.values()) if isinstance(text, dict) else str(text)
    except Exception:
        pass
    cuobjdump = _tool("cuobjdump")
    if cuobjdump is None:
        return None
    out = []
    for overload in kernel.overloads.values():
        cubin = overload._codelibrary.get_cubin()
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin.code if hasattr(cubin, "code") else bytes(cubin))
            path = f.name
        try:
            proc = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True,
                                  timeout=120)
            out.append(proc.stdout)
        finally:
            os.unlink(path)
    return "\n".join(out) or None


SASS_OPCODES = ("LDSM", "STSM", "HMMA", "CALL", "LDS", "STS")


def count_sass(text: str, opcodes: Iterable[str] = SASS_OPCODES) -> dict[str, int]:
    """How many instructions of each opcode (``LDSM`` also counts ``LDSM.16.M88.4``...)."""
    counts = {}
    for op in opcodes:
        counts[op] = len(re.findall(rf"(?<![\w.]){re.escape(op)}(?=[\s.])", text))
    return counts


__all__ = ["ARCH", "CompileError", "ForeignFunctionError", "PtxFunction", "assemble",
           "check_abi", "check_foreign_function", "compile_ptx", "count_sass",
           "find_instructions", "function_named", "opcode_of", "parse_functions", "qualifiers",
           "sass", "show_ptx", "split_statements"]
