"""Foreign device functions (CUDA C, inline PTX) in numba-cuda's CUDA simulator.

On a GPU, ``f = cuda.declare_device(name, sig, link=...)`` declares a function
written in CUDA C, which numba links into every kernel that calls ``f``. The
simulator cannot link machine code: its ``declare_device`` returns ``None``.
:func:`install` replaces it, so that the same notebook runs without a GPU:

* ``cuda.declare_device(name, sig, link=...)`` returns a :class:`ForeignFunction`.
  ``link`` may name ``.cu`` / ``.ptx`` files or be ``cuda.CUSource`` / ``cuda.PTXSource``.
* On its first call the CUDA C is compiled with NVRTC and assembled with ptxas
  (:mod:`workbook.ptx`, both run on the CPU), exactly as for a GPU: a compiler
  error appears here as it would there.
* Each simulated thread then **executes the PTX of the function**: numba's
  foreign-function ABI (``int name(T* ret, args...)``, returning status 0), the
  integer, bit and float instructions compilers emit for short device functions,
  and the warp-wide matrix instructions, which run once for the whole warp when
  all 32 lanes have arrived (through :func:`workbook.sim.warp.collective`):

  - ``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16``
  - ``stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16``
  - ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``

  Their results follow the PTX ISA (see :mod:`workbook.fragments`). Branches,
  calls and local memory are not emulated: a function that needs them raises
  :class:`ForeignEmulationError` (such code may well work on a GPU).

Addresses
    A generic address is the host address of the simulator's numpy array:
    shared arrays, arrays passed as pointers (``tile[i:].ctypes``) and the
    return slot. Shared arrays also get a *shared-window* address (what
    ``cvta.to.shared`` / ``__cvta_generic_to_shared`` returns): each array
    starts at a 128-byte boundary, in the order the emulation first meets them.
    A ``.shared`` instruction given an address outside every shared array --
    typically a generic pointer that was not converted -- raises an error that
    says so, where a GPU would fault or read the wrong data. Row addresses of
    ldmatrix/stmatrix must be 16-byte aligned, as on a GPU.

Bank conflicts
    Every ldmatrix/stmatrix counts the shared-memory wavefronts it needs (one per
    8x8 matrix when its 8 rows fall in 8 different groups of 4 banks); see
    :func:`reset_stats` and :func:`stats`.

``cuda.shared.array(..., alignment=N)`` (which the simulator rejects) is
accepted too, so kernels that align their tiles for 16-byte rows run unchanged.

Modules, by job: :mod:`.program` (decoding), :mod:`.lane` (one lane's registers and
memory), :mod:`.arithmetic`, :mod:`.memory` and :mod:`.matrix` (the instruction
families), :mod:`.execute` (the instruction table), :mod:`.window` (shared-memory
addresses, and the accesses reported to the sanitizer), :mod:`.function`
(``declare_device``), :mod:`.simulator` (installation).
"""

from workbook.sim.foreign.common import ForeignEmulationError, reset_stats, stats
from workbook.sim.foreign.function import ForeignFunction, declare_device
from workbook.sim.foreign.simulator import install

__all__ = ["ForeignEmulationError", "ForeignFunction", "declare_device", "install",
           "reset_stats", "stats"]
