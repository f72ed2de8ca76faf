"""Vectorised (64- and 128-bit) global loads and stores for kernels, usable in both modes.

NVVM never merges numba's scalar loads into wide loads, so a kernel that wants
``LDG.E.128`` asks for it: ``a, b, c, d = load4(x, i)`` reads ``x[i:i+4]`` of a
float32 array with one ``ld.global.nc.v4.f32`` (read-only data path). The index
must be a multiple of 4 and the array 16-byte aligned (device allocations are).
In simulator mode the same call reads four elements and checks the alignment.

``load4_int32(x, i)`` reads four int32 values with one ``ld.global.v4.s32``: not the
read-only path, so a kernel may use it on an array that it also writes (each thread reading
entries before any thread writes them).

The same 16 bytes in the other direction and for float16 (eight halves, converted
to and from float32, the type kernels compute in):

* ``store4(y, i, a, b, c, d)`` writes ``y[i:i+4]`` of a float32 array with one
  ``st.global.v4.f32``;
* ``load_half8(x, i)`` reads ``x[i:i+8]`` of a float16 array with one
  ``ld.global.nc.v4.b32`` and returns eight float32 values (``cvt.f32.f16``);
* ``store_half8(y, i, v0, ..., v7)`` rounds eight float32 values to float16
  (``cvt.rn.f16.f32``, round to nearest even, as numpy does) and writes them with
  one ``st.global.v4.b32``.

Their index must be a multiple of 4 (``store4``) or 8 (the half versions).

``store2_int32(y, i, a, b)`` writes ``y[i:i+2]`` of an int32 array with one 64-bit
``st.global.v2.s32``; its index must be even.

``load4_once`` and ``load_half8_once`` are the same loads for data a kernel reads exactly
once: ``ld.global.nc.L1::no_allocate`` asks the L1 cache not to keep the 16 bytes. In the
simulator (no caches) they are ``load4`` and ``load_half8``.
"""

from __future__ import annotations

from workbook.mode import current_mode


def _check_access(name: str, array, index, multiple: int, dtype=None, verb: str = "reads"):
    """The simulator's checks of a wide access (``multiple`` elements at once): an index that
    is a multiple of ``multiple`` and, where given, the array's ``dtype``."""
    if index % multiple != 0:
        raise _misaligned(name, index, multiple, 8 * multiple * array.dtype.itemsize)
    if dtype is not None and array.dtype != dtype:
        kind = dtype.__name__
        article = "an" if kind[0] in "aeiou" else "a"
        raise TypeError(f"{name} {verb} {article} {kind} array, not {array.dtype}")


def _simulated_load4():
    from numba import cuda
    from numpy import int32

    @cuda.jit(device=True)
    def load4(array, index):
        _check_access("load4", array, index, 4)
        return array[index], array[index + 1], array[index + 2], array[index + 3]

    @cuda.jit(device=True)
    def load4_int32(array, index):
        _check_access("load4_int32", array, index, 4, int32)
        return array[index], array[index + 1], array[index + 2], array[index + 3]

    return load4, load4_int32


LOAD4 = "ld.global.nc.v4.f32"
LOAD4_ONCE = "ld.global.nc.L1::no_allocate.v4.f32"
LOAD4_INT32 = "ld.global.v4.s32"
LOAD_HALF8 = "ld.global.nc.v4.b32"
LOAD_HALF8_ONCE = "ld.global.nc.L1::no_allocate.v4.b32"


def _hardware_wide_load(name: str, element: str, lanes: int, asm: str, result: str = "float32"):
    """An intrinsic ``name(array, index)``: one 128-bit load of ``array[index:]`` (a 1-D
    array of ``element``), returned as ``lanes`` values of ``result`` (float32 or int32), by
    the inline PTX ``asm``, whose operands are the values, then the address."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    value_type, constraint = ((ir.FloatType(), "=f") if result == "float32"
                              else (ir.IntType(32), "=r"))

    def typer(typingctx, array, index):
        if not (_array_of(array, getattr(types, element)) and isinstance(index, types.Integer)):
            return None
        result_type = types.UniTuple(getattr(types, result), lanes)

        def codegen(context, builder, sig, args):
            pointer = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            asm_type = ir.FunctionType(ir.LiteralStructType([value_type] * lanes),
                                       [pointer.type])
            packed = builder.call(ir.InlineAsm(asm_type, asm, f"{constraint}," * lanes + "l"),
                                  [pointer])
            values = [builder.extract_value(packed, k) for k in range(lanes)]
            return context.make_tuple(builder, result_type, values)

        return result_type(array, index), codegen

    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


def _hardware_load4(instruction: str = LOAD4):
    return _hardware_wide_load("load4", "float32", 4,
                               instruction + " {$0, $1, $2, $3}, [$4];")


def _hardware_load4_int32():
    return _hardware_wide_load("load4_int32", "int32", 4,
                               LOAD4_INT32 + " {$0, $1, $2, $3}, [$4];", result="int32")


def _misaligned(name: str, index, multiple: int, bits: int = 128) -> IndexError:
    return IndexError(
        f"{name} at index {index}: a {bits}-bit access needs an index that is a multiple "
        f"of {multiple} (misaligned address on a GPU)"
    )


def _simulated_wide():
    from numba import cuda
    from numpy import errstate, float16, float32, int32

    @cuda.jit(device=True)
    def store4(array, index, a, b, c, d):
        _check_access("store4", array, index, 4)
        array[index] = a
        array[index + 1] = b
        array[index + 2] = c
        array[index + 3] = d

    @cuda.jit(device=True)
    def load_half8(array, index):
        _check_access("load_half8", array, index, 8, float16)
        return tuple(float32(array[index + k]) for k in range(8))

    @cuda.jit(device=True)
    def store_half8(array, index, v0, v1, v2, v3, v4, v5, v6, v7):
        _check_access("store_half8", array, index, 8, float16, "writes")
        with errstate(over="ignore"):  # beyond 65504 is inf, as cvt.rn.f16.f32 gives
            for k, value in enumerate((v0, v1, v2, v3, v4, v5, v6, v7)):
                array[index + k] = float16(value)

    @cuda.jit(device=True)
    def store2_int32(array, index, a, b):
        _check_access("store2_int32", array, index, 2, int32, "writes")
        array[index] = a
        array[index + 1] = b

    return store4, load_half8, store_half8, store2_int32


def _pointer(context, builder, array_type, array, index, index_type):
    """The address of ``array[index]`` (a 1-D contiguous array) as an LLVM pointer."""
    from numba.cuda import types

    data = context.make_array(array_type)(context, builder, value=array).data
    offset = context.cast(builder, index, index_type, types.intp)
    return builder.gep(data, [offset])


def _array_of(array, dtype) -> bool:
    from numba.cuda import types

    return isinstance(array, types.Array) and array.dtype == dtype


def _hardware_wide():
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    f32 = ir.FloatType()

    @intrinsic
    def store4(typingctx, array, index, a, b, c, d):
        if not (_array_of(array, types.float32) and isinstance(index, types.Integer)):
            return None
        values = (a, b, c, d)
        if not all(isinstance(v, (types.Float, types.Integer)) for v in values):
            return None

        def codegen(context, builder, sig, args):
            pointer = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            floats = [context.cast(builder, v, t, types.float32)
                      for v, t in zip(args[2:], sig.args[2:])]
            asm_type = ir.FunctionType(ir.VoidType(), [pointer.type] + [f32] * 4)
            asm = ir.InlineAsm(asm_type, "st.global.v4.f32 [$0], {$1, $2, $3, $4};",
                               "l,f,f,f,f", side_effect=True)
            builder.call(asm, [pointer, *floats])
            return context.get_dummy_value()

        return types.none(array, index, a, b, c, d), codegen

    @intrinsic
    def store_half8(typingctx, array, index, v0, v1, v2, v3, v4, v5, v6, v7):
        values = (v0, v1, v2, v3, v4, v5, v6, v7)
        if not (_array_of(array, types.float16) and isinstance(index, types.Integer)):
            return None
        if not all(isinstance(v, (types.Float, types.Integer)) for v in values):
            return None

        def codegen(context, builder, sig, args):
            pointer = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            floats = [context.cast(builder, v, t, types.float32)
                      for v, t in zip(args[2:], sig.args[2:])]
            asm_type = ir.FunctionType(ir.VoidType(), [pointer.type] + [f32] * 8)
            asm = ir.InlineAsm(
                asm_type,
                "{\n\t.reg .b32 w<4>;\n\t.reg .b16 h<8>;\n\t"
                "cvt.rn.f16.f32 h0, $1;\n\tcvt.rn.f16.f32 h1, $2;\n\t"
                "cvt.rn.f16.f32 h2, $3;\n\tcvt.rn.f16.f32 h3, $4;\n\t"
                "cvt.rn.f16.f32 h4, $5;\n\tcvt.rn.f16.f32 h5, $6;\n\t"
                "cvt.rn.f16.f32 h6, $7;\n\tcvt.rn.f16.f32 h7, $8;\n\t"
                "mov.b32 w0, {h0, h1};\n\tmov.b32 w1, {h2, h3};\n\t"
                "mov.b32 w2, {h4, h5};\n\tmov.b32 w3, {h6, h7};\n\t"
                "st.global.v4.b32 [$0], {w0, w1, w2, w3};\n\t}",
                "l,f,f,f,f,f,f,f,f", side_effect=True)
            builder.call(asm, [pointer, *floats])
            return context.get_dummy_value()

        return types.none(array, index, *values), codegen

    @intrinsic
    def store2_int32(typingctx, array, index, a, b):
        if not (_array_of(array, types.int32) and isinstance(index, types.Integer)):
            return None
        if not all(isinstance(v, types.Integer) for v in (a, b)):
            return None

        def codegen(context, builder, sig, args):
            pointer = _pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            ints = [context.cast(builder, v, t, types.int32)
                    for v, t in zip(args[2:], sig.args[2:])]
            i32 = ir.IntType(32)
            asm_type = ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32])
            asm = ir.InlineAsm(asm_type, "st.global.v2.s32 [$0], {$1, $2};", "l,r,r",
                               side_effect=True)
            builder.call(asm, [pointer, *ints])
            return context.get_dummy_value()

        return types.none(array, index, a, b), codegen

    return store4, _hardware_load_half8(), store_half8, store2_int32


def _hardware_load_half8(instruction: str = LOAD_HALF8):
    return _hardware_wide_load(
        "load_half8", "float16", 8,
        "{\n\t.reg .b32 w<4>;\n\t.reg .b16 h<8>;\n\t" + instruction +
        " {w0, w1, w2, w3}, [$8];\n\t"
        "mov.b32 {h0, h1}, w0;\n\tmov.b32 {h2, h3}, w1;\n\t"
        "mov.b32 {h4, h5}, w2;\n\tmov.b32 {h6, h7}, w3;\n\t"
        "cvt.f32.f16 $0, h0;\n\tcvt.f32.f16 $1, h1;\n\t"
        "cvt.f32.f16 $2, h2;\n\tcvt.f32.f16 $3, h3;\n\t"
        "cvt.f32.f16 $4, h4;\n\tcvt.f32.f16 $5, h5;\n\t"
        "cvt.f32.f16 $6, h6;\n\tcvt.f32.f16 $7, h7;\n\t}")


if current_mode() == "sim":
    load4, load4_int32 = _simulated_load4()
    load4_once = load4
    store4, load_half8, store_half8, store2_int32 = _simulated_wide()
    load_half8_once = load_half8
else:
    load4, load4_once = _hardware_load4(), _hardware_load4(LOAD4_ONCE)
    load4_int32 = _hardware_load4_int32()
    store4, load_half8, store_half8, store2_int32 = _hardware_wide()
    load_half8_once = _hardware_load_half8(LOAD_HALF8_ONCE)

__all__ = ["load4", "load4_int32", "load4_once", "load_half8", "load_half8_once", "store2_int32",
           "store4", "store_half8"]
