"""Vectorised (128-bit) global loads for kernels, usable in both modes.

NVVM never merges numba's scalar loads into wide loads, so a kernel that wants
``LDG.E.128`` asks for it: ``a, b, c, d = load4(x, i)`` reads ``x[i:i+4]`` of a
float32 array with one ``ld.global.nc.v4.f32`` (read-only data path). The index
must be a multiple of 4 and the array 16-byte aligned (device allocations are).
In simulator mode the same call reads four elements and checks the alignment.
"""

from __future__ import annotations

from workbook.mode import current_mode


def _simulated_load4():
    from numba import cuda

    @cuda.jit(device=True)
    def load4(array, index):
        if index % 4 != 0:
            raise IndexError(
                f"load4 at index {index}: a 128-bit load needs an index that is a multiple "
                "of 4 (misaligned address on a GPU)"
            )
        return array[index], array[index + 1], array[index + 2], array[index + 3]

    return load4


def _hardware_load4():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def load4(typingctx, array, index):
        if not (isinstance(array, types.Array) and array.dtype == types.float32
                and isinstance(index, types.Integer)):
            return None
        result_type = types.UniTuple(types.float32, 4)

        def codegen(context, builder, sig, args):
            array_type, index_type = sig.args
            data = context.make_array(array_type)(context, builder, value=args[0]).data
            offset = context.cast(builder, args[1], index_type, types.intp)
            pointer = builder.gep(data, [offset])
            f32 = ir.FloatType()
            asm_type = ir.FunctionType(ir.LiteralStructType([f32] * 4), [pointer.type])
            asm = ir.InlineAsm(asm_type, "ld.global.nc.v4.f32 {$0, $1, $2, $3}, [$4];",
                               "=f,=f,=f,=f,l")
            packed = builder.call(asm, [pointer])
            values = [builder.extract_value(packed, k) for k in range(4)]
            return context.make_tuple(builder, result_type, values)

        return result_type(array, index), codegen

    return load4


load4 = _simulated_load4() if current_mode() == "sim" else _hardware_load4()

__all__ = ["load4"]
