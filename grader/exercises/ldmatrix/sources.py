"""The CUDA C of lesson 01: each source compiled and assembled for sm_90 on the CPU, its
foreign function's ABI and the instruction it must contain checked before any launch."""

from __future__ import annotations

from grader.exercise import Mismatch
from grader.release import C_STUB


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


# the name of each CUDA C string -> (its function, number of arguments, required instructions)
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
