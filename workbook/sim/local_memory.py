"""Local memory for the simulator sanitizer: ``cuda.local.array`` starts out poisoned.

On a GPU a local array holds whatever its registers or stack slots held before; the
plain simulator hands out ``np.empty``, which is often zeros, so a kernel that reads an
element it never wrote (a load skipped by a bounds check while the update that uses it
is not) usually gets a harmless 0 there. With the sanitizer on, new local arrays hold
the poison value of shared memory (NaN for floats, ``0x7FADBEEF`` bytes for others;
see :func:`workbook.sim.shared_memory.poison`), so such a read spoils the result.

In every launch, a local array's shape that the GPU compiler would reject (an expression on
variables) is an error (:mod:`workbook.sim.array_shapes`).
"""

from __future__ import annotations

from workbook.sim import array_shapes, sanitizer
from workbook.sim.shared_memory import poison


def install() -> None:
    """Poison new ``cuda.local.array`` arrays in sanitized launches (idempotent)."""
    from numba.cuda.simulator import kernelapi

    local = kernelapi.FakeCUDALocal
    if getattr(local, "_workbook_poisoned", False):
        return
    plain = local.array

    def array(self, shape, dtype, alignment=None):
        array_shapes.check("local")  # in every launch: the GPU compiler rejects it
        result = plain(self, shape, dtype, alignment)
        if sanitizer.current_block()[1] is not None:
            poison(result)
        return result

    array.__doc__ = plain.__doc__
    local.array = array
    local._workbook_poisoned = True


sanitizer.register("local", install)
