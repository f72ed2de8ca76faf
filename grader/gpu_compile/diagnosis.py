"""The compiler's rejection of a kernel, told to the student: where, what, and the fix.

numba's messages are long (a typing error lists every overload it tried) and some name
no line. :func:`describe` gives the student's line (``<cell 18>:7``) with its text, a
short explanation where one of :data:`EXPLANATIONS` applies, and the compiler's own
reason cut to its first lines.
"""

from __future__ import annotations

import linecache
import re

MAX_REASON = 400  # characters of the compiler's reason quoted


def _device_args(m: re.Match) -> str:
    return (f"the device function `{m['fn']}{m['params']}` cannot be called with these "
            f"arguments ({m['args']}{', ' + m['kws'] if m['kws'] else ''}): {m['why']}")


def _device_signature(m: re.Match) -> str:
    known = "; ".join(s.strip(" *") for s in m["known"].strip().splitlines())
    return (f"the device function `{m['fn']}` was compiled for the signature {known} and is "
            f"called with ({m['args']}): pass it those types, or leave the signature out of "
            f"`@cuda.jit(device=True)` so that it compiles for the types it gets")


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//",
              "mod": "%", "pow": "**", "xor": "^", "and_": "&", "or_": "|", "lshift": "<<",
              "rshift": ">>", "neg": "unary -", "invert": "~", "lt": "<", "gt": ">",
              "le": "<=", "ge": ">=", "eq": "==", "ne": "!=", "iadd": "+=", "isub": "-=",
              "imul": "*=", "itruediv": "/=", "ifloordiv": "//=", "ixor": "^=", "iand": "&=",
              "ior": "|=", "getitem": "indexing", "setitem": "storing into an array"}


def _operator(m: re.Match) -> str:
    what = _OPERATORS.get(m["op"], f"`{m['op']}`")
    return (f"{what} is not defined on the GPU for these types: {_plain(m['sig'])}. Check the "
            f"types of the operands (a float where an integer is needed, an array where one "
            f"element is meant, a tuple stored into an element?)")


def _function(m: re.Match) -> str:
    return (f"`{m['fn']}` has no GPU implementation for these argument types: "
            f"{_plain(m['sig'])}")


def _plain(signature: str) -> str:
    """``getitem(array(float32, 1d, C), Literal[int](1))`` without numba's literal types."""
    return re.sub(r"Literal\[(\w+)\]\((.*?)\)", r"\1", signature.strip())


LIST = ("a list cannot be created inside a kernel on the GPU: use `cuda.local.array` with a "
        "constant size, or a tuple of constants")
STRING = ("strings cannot be built inside a kernel on the GPU (f-strings, str(), .format(), "
          "string arithmetic): print numbers and constant strings, e.g. `print(\"i =\", i)`, "
          "and give exceptions a constant message")

#: (pattern over the compiler's message, explanation or function of the match), in order
EXPLANATIONS: list[tuple[re.Pattern, object]] = [(re.compile(p, re.S), e) for p, e in [
    (r"= global\((?P<name>\w+): \[", lambda m: (
        f"the global list `{m['name']}` cannot be used inside a kernel on the GPU: make it a "
        f"tuple, e.g. `{m['name']} = (...)`, or pass a device array")),
    (r"build_list|of type list\(|reflected list", LIST),
    (r"DictType|build_map|Untyped global name 'dict'", (
        "a dict cannot be used inside a kernel on the GPU: use arrays (`cuda.local.array` of "
        "a constant size) or tuples of constants")),
    (r"build_set|Untyped global name 'set'", (
        "a set cannot be used inside a kernel on the GPU: use an array of flags")),
    (r"Function\(<class 'str'>\)|Unknown attribute '\w+' of type Literal\[str\]|unicode_type",
     STRING),
    (r"printing unimplemented for values of type (?P<type>[^\n]+)", lambda m: (
        f"print inside a kernel prints numbers and constant strings only, not "
        f"{m['type']}: print its elements")),
    (r"Untyped global name '(?P<name>\w+)': Cannot determine Numba type of <class "
     r"'function'>", lambda m: (
         f"`{m['name']}` is a plain Python function, which a kernel cannot call on the GPU: "
         f"decorate it with `@cuda.jit(device=True)` to make it a device function")),
    (r"set_try_status|exception_match|Exception matching", (
        "try/except and try/finally are not supported inside a kernel on the GPU: test the "
        "condition with `if` instead")),
    (r"insert_unresolved_ref|RecursiveCall", (
        "a device function calls itself: numba-cuda does not compile recursion for the GPU; "
        "write it as a loop")),
    (r"Cannot bind 'args=\((?P<args>.*?),?\) kws=\{(?P<kws>.*?)\}' to signature "
     r"'(?P<params>.*?)' due to \"TypeError: (?P<why>.*?)\".*?CUDADispatcher\(<function "
     r"(?P<fn>\w+)", _device_args),
    (r"Invalid use of type\(CUDADispatcher\(<function (?P<fn>\w+) at \w+>\)\) with "
     r"parameters \((?P<args>[^\n]*)\)\nKnown signatures:\n(?P<known>(?: \* [^\n]*\n?)+)",
     _device_signature),
    (r"Can't unify return type from the following types: (?P<types>[^\n]+)", lambda m: (
        f"a function returns values of different types ({_plain(m['types'])}): every "
        f"`return` must give the same type")),
    (r"Cannot unify (?P<a>\S.*?) and (?P<b>\S.*?) for '(?P<var>[^']+)'", lambda m: (
        f"the variable `{m['var'].split('.')[0]}` holds values of different types "
        f"({_plain(m['a'])} and {_plain(m['b'])}): on the GPU a variable has one type")),
    (r"Cannot cast (?P<src>.+?) to (?P<dst>[^\s:]+)", lambda m: (
        f"a {_plain(m['src'])} cannot be converted to {m['dst']} here: check the types "
        f"(what is stored, passed or returned must be a {m['dst']})")),
    (r"Unsupported array index type (?P<type>\S+?) in", lambda m: (
        f"an array index must be an integer, and this one is a {m['type']}: use integer "
        f"arithmetic (`//`, not `/`)")),
    (r"Only accept returning of array passed into the function", (
        "numpy arrays cannot be allocated inside a kernel (np.zeros, np.empty, ...): use "
        "`cuda.local.array(SIZE, dtype)` with a constant SIZE, or pass an array in")),
    (r"Function\(<function (?P<kind>local|shared)\.array at \w+>\) found for signature:\s*"
     r">>> array\((?P<shape>[^\n]*?), ", lambda m: (
         f"the shape of a {m['kind']} array must be a constant of the kernel (a literal, or "
         f"a global or closure variable), and here it is a run-time {_plain(m['shape'])}")),
    (r"No implementation of function Function\(<built-in function (?P<op>\w+)>\) found for "
     r"signature:\s*>>> (?P<sig>[^\n]+)", _operator),
    (r"No implementation of function Function\(<(?:function|intrinsic|class) '?(?P<fn>[\w.]+)"
     r"'?[^>]*>\) found for signature:\s*>>> (?P<sig>[^\n]+)", _function),
    (r"Untyped global name '(?P<name>\w+)': Cannot determine Numba type of (?P<type>[^\n]+)",
     lambda m: (f"`{m['name']}` ({m['type']}) cannot be used inside a kernel on the GPU: a "
                f"kernel uses numbers, arrays, tuples, constants and device functions")),
    (r"NameError: name '(?P<name>\w+)' is not defined", lambda m: (
        f"`{m['name']}` is not defined where the kernel was compiled")),
    (r"use of yield", "generators (`x for x in ...`) are not supported inside a kernel: write "
                      "the loop"),
    (r"'with \(context manager\)", "`with` blocks are not supported inside a kernel"),
]]

_NOISE = re.compile(r"^(Failed in \w+ mode pipeline|During:|File \"|raised from |<source elided>"
                    r"|\s*\^\s*$|There are \d+ candidate|\s*- Of which|\s*Overload)")


def reason(message: str, inner: bool = True) -> str:
    """The compiler's message cut to what matters: its first statement (with the signature
    that has no implementation) and, with ``inner``, the first specific error an overload
    raised."""
    lines = [line.rstrip() for line in message.splitlines()]
    kept, in_source = [], False
    for line in lines:
        if line.startswith("File \""):
            in_source = True
            continue
        if in_source:
            in_source = bool(line.strip())
            continue
        if line.strip() and not _NOISE.match(line.strip()):
            kept.append(line.strip())
    head = kept[:2] if kept and kept[0].endswith("signature:") else kept[:1]
    specific = [lines[i + 1].strip() for i, line in enumerate(lines[:-1])
                if line.strip().endswith("raised a specific error:")]
    first = next((s for s in specific if not re.search(r"No implementation|Failed in", s)), None)
    text = " ".join(head + ([f"({first})"] if first and inner else []))
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def explanation(message: str) -> str | None:
    for pattern, explain in EXPLANATIONS:
        match = pattern.search(message)
        if match:
            return explain(match) if callable(explain) else explain
    return None


def place(filename: str, line: int) -> str:
    """``<cell 18>:7``: the grader's name of a cell, or the file, and the line (a notebook's
    check names its cells in the result, see :mod:`grader.locations`)."""
    return f"{filename}:{line}"


def _where(error: dict) -> str:
    if not error.get("where"):
        return ""
    filename, line = error["where"]
    text = linecache.getline(filename, line).strip()
    return f"{place(filename, line)}" + (f": `{text}`" if text else "")


def cuda_c(error: dict, sources: dict[str, str]) -> str:
    """NVRTC's errors in a foreign function's CUDA C, each with its line in the .cu (and in
    the cell that holds the .cu's text, where it is there verbatim)."""
    label, source = error["label"], error["source"]
    offset = None
    for filename, text in sources.items():
        at = text.find(source)
        if at >= 0:
            offset = (filename, text[:at].count("\n"))
            break
    lines = source.splitlines()
    found = []
    for m in re.finditer(r"^.*?\((?P<line>\d+)\): (?P<kind>error|catastrophic error): "
                         r"(?P<what>.*)$", error["message"], re.M):
        number = int(m["line"])
        where = f"{label} line {number}"
        if offset:
            where = f"{place(offset[0], offset[1] + number)} ({where})"
        text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        found.append(f"{where}: {m['what']}" + (f"\n    {text}" if text else ""))
    return "\n".join(found[:3]) or error["message"].strip()


def link(message: str) -> str:
    undefined = re.search(r"Undefined reference to '(\w+)'", message)
    if undefined:
        return (f"the kernel calls `{undefined[1]}`, which no linked CUDA C defines: the name "
                f"given to `cuda.declare_device` must be the extern \"C\" function's "
                f"(nvJitLink: {' '.join(message.splitlines()[0].split())})")
    return f"nvJitLink could not link the kernel with its CUDA C: {message.strip()}"


def describe(kernel_name: str, error: dict, sources: dict[str, str]) -> str:
    """The student's message for a kernel the compiler rejected (``error``: the worker's
    record, see :mod:`grader.gpu_compile.worker`)."""
    head = f"{kernel_name} does not compile for the GPU (numba-cuda, sm_90)"
    stage = error.get("stage")
    if stage == "cuda_c":
        return f"{head}: the CUDA C of a foreign function:\n{cuda_c(error, sources)}"
    if stage == "link":
        return f"{head}: {link(error['message'])}"
    message = error.get("message", "")
    where = _where(error)
    lines = [f"{head}{': ' + where if where else ''}"]
    if error.get("call"):
        lines.append(f"called from {_where({'where': error['call']})}")
    explained = explanation(message)
    if explained:
        lines.append(explained)
    lines.append(f"compiler: {error.get('type', 'error')}: {reason(message, not explained)}")
    return "\n".join(lines)


__all__ = ["EXPLANATIONS", "describe", "explanation", "place", "reason"]
