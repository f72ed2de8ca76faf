"""What NVIDIA's compute-sanitizer tools can look for in an exercise's kernels, read from
their compiled code.

``racecheck`` looks for hazards in shared memory only, and ``synccheck`` for misused
barriers and warp-synchronous primitives (``__syncthreads``, ``__syncwarp``, ``shfl.sync``,
``vote.sync`` ...), both as NVIDIA's documentation describes them. A kernel whose code
touches no shared memory gives racecheck nothing to look for; one with no barrier and no
``*.sync`` primitive gives synccheck nothing. ``memcheck`` checks every access, so it always
runs.

The check records the compiled kernels each exercise launched (:func:`launched_kernels`) and
reads their code: the NVVM IR numba compiled them from, which it keeps beside the machine
code, in its disk cache too (numba's PTX is not there: with link-time optimisation numba
compiles the IR to LTO-IR, not PTX). Shared memory is LLVM's address space 3, or
``.shared`` in inline PTX; a barrier or a ``*.sync`` primitive is an NVVM intrinsic or
inline PTX whose name says ``barrier``, ``bar.`` or ``sync``. A kernel whose code cannot be
read whole (CUDA C linked in, the device runtime, no IR) counts as using everything, and an
exercise that launched no kernel that was recorded gets every tool: nothing is left out on a
guess. :func:`unneeded_tools` gives the tools left out and why; the sanitize stage reports
them instead of running them (:mod:`grader.sanitizer`).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

SHARED_MEMORY = re.compile(r"addrspace\(3\)|\.shared\b")
SYNCHRONISES = re.compile(r"sync|barrier|\bbar\.", re.IGNORECASE)

# tool -> (what its kernels must show for it to run, why it is left out when they do not)
NEEDS = {
    "racecheck": (SHARED_MEMORY, "its kernels use no shared memory, where racecheck looks "
                                 "for races"),
    "synccheck": (SYNCHRONISES, "its kernels use no barrier and no warp-synchronous "
                                "primitive, which synccheck checks"),
}


def code_of(kernel) -> str | None:
    """The NVVM IR of a compiled numba kernel (``_Kernel``) and the device functions it calls,
    or None where that is not all of its code (linked CUDA C, the device runtime) or there
    is none to read."""
    library = getattr(kernel, "_codelibrary", None)
    if library is None or getattr(library, "_linking_files", None) or \
            getattr(library, "needs_cudadevrt", True):
        return None
    try:
        modules = list(library.llvm_strs)
    except Exception:  # noqa: BLE001  (numba's internals moved: read nothing, skip nothing)
        return None
    return "\n".join(modules) if modules else None


def unneeded_tools(codes: list[str | None]) -> dict[str, str]:
    """The tools that have nothing to look for in kernels of code ``codes`` (one entry per
    kernel; None: not readable), each with the reason; none without a kernel."""
    if not codes or any(code is None for code in codes):
        return {}
    return {tool: why for tool, (pattern, why) in NEEDS.items()
            if not any(pattern.search(code) for code in codes)}


@contextmanager
def launched_kernels():
    """The compiled kernels (numba's ``_Kernel``) launched while the block runs, each once, by
    numba's launch or a prepared one (:func:`grader.launch_hooks.on_launch`); in simulator
    mode none."""
    from grader.launch_hooks import on_launch
    from workbook.launch import _DriverLaunch

    kernels: dict[int, object] = {}

    def note(launched) -> None:
        compiled = launched.overload if isinstance(launched, _DriverLaunch) else launched
        if hasattr(compiled, "_codelibrary"):
            kernels.setdefault(id(compiled), compiled)

    with on_launch(note):
        yield kernels
