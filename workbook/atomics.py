"""A relaxed atomic load for kernels, usable in both modes.

``load_relaxed(array, i)`` reads ``array[i]`` of an int32 array with one
``ld.relaxed.gpu.global.b32``: an atomic read in the CUDA memory model (no data race
with atomics that other threads make on the same element), served by the L2 cache
like an ordinary load. Reading with a read-modify-write such as
``cuda.atomic.or_(array, i, 0)`` is atomic too, but every such read of one address
is serialised by the L2's atomic unit: when thousands of threads read the same
element (a union-find root), they queue. In simulator mode the call is an atomic
read, which the workbook's sanitizer treats like any other atomic.
"""

from __future__ import annotations

from workbook.mode import current_mode


def _hardware_load_relaxed():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    from workbook.vector import _pointer

    @intrinsic
    def load_relaxed(typingctx, array, index):
        if not (isinstance(array, types.Array) and array.dtype == types.int32
                and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            pointer = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            i32 = ir.IntType(32)
            asm = ir.InlineAsm(ir.FunctionType(i32, [pointer.type]),
                               "ld.relaxed.gpu.global.b32 $0, [$1];", "=r,l",
                               side_effect=True)
            return builder.call(asm, [pointer])

        return types.int32(array, index), codegen

    return load_relaxed


if current_mode() == "sim":
    from numba import cuda

    @cuda.jit(device=True)
    def load_relaxed(array, index):
        return cuda.atomic.or_(array, index, 0)
else:
    load_relaxed = _hardware_load_relaxed()

__all__ = ["load_relaxed"]
