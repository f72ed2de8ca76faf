"""Foreign CUDA C functions: ldmatrix / stmatrix / mma against the PTX ISA's layouts.

The kernels of the tests not marked ``sim_only`` are valid CUDA and run
unmodified with ``WORKBOOK_MODE=gpu`` (stmatrix needs sm_90). The ``sim_only``
tests check what the simulator reports where a GPU faults, reads the wrong data
or cannot link.
"""

import numpy as np
import pytest

import workbook
from workbook import fragments as F
from workbook import ptx
from workbook.sim.sanitizer import RaceError, UninitializedReadError

# isort: split
from numba import cuda, float32, uint16, uint32

FULL = 0xFFFFFFFF
needs_sm90 = pytest.mark.skipif(
    workbook.MODE == "gpu" and cuda.get_current_device().compute_capability < (9, 0),
    reason="stmatrix needs sm_90")


# ---------------------------------------------------------------------------
# CUDA C for every variant, and one kernel per variant (generated: they differ only
# in the function they call and the number of registers)

def _ld(name, num, trans):
    regs = {"x1": 1, "x2": 2, "x4": 4}[num]
    outs = ", ".join(f'"=r"(r[{i}])' for i in range(regs))
    slots = ", ".join(f"%{i}" for i in range(regs))
    return f"""
extern "C" __device__ int {name}(unsigned int* r, unsigned short* p)
{{
    unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.{num}{'.trans' if trans else ''}.shared.b16 "
                 "{{{slots}}}, [%{regs}];" : {outs} : "r"(a));
    return 0;
}}"""


def _st(name, num, trans):
    regs = {"x1": 1, "x2": 2, "x4": 4}[num]
    params = ", ".join(f"unsigned int v{i}" for i in range(regs))
    ins = ", ".join(f'"r"(v{i})' for i in range(regs))
    slots = ", ".join(f"%{i + 1}" for i in range(regs))
    return f"""
extern "C" __device__ int {name}(void* r, unsigned short* p, {params})
{{
    unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(p));
    asm volatile("stmatrix.sync.aligned.m8n8.{num}{'.trans' if trans else ''}.shared.b16 "
                 "[%0], {{{slots}}};" :: "r"(a), {ins} : "memory");
    return 0;
}}"""


MMA = r"""
extern "C" __device__ int mma(float* d, unsigned int a0, unsigned int a1, unsigned int a2,
                              unsigned int a3, unsigned int b0, unsigned int b1,
                              float c0, float c1, float c2, float c3)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
                   "f"(c0), "f"(c1), "f"(c2), "f"(c3));
    return 0;
}"""

VARIANTS = [(num, trans) for num in ("x1", "x2", "x4") for trans in (False, True)]
SOURCE = "\n".join([*(_ld(f"ld_{n}{'_t' * t}", n, t) for n, t in VARIANTS),
                    *(_st(f"st_{n}{'_t' * t}", n, t) for n, t in VARIANTS), MMA])
LINK = cuda.CUSource(SOURCE)

_LD_KERNEL = '''
ld_{tag} = cuda.declare_device("ld_{tag}", "{ret}(CPointer(uint16))", link=LINK)


@cuda.jit
def ld_{tag}_kernel(mats, rows, out):
    tile = cuda.shared.array((4, 8, 8), uint16, alignment=16)
    lane = cuda.threadIdx.x
    for i in range(8):
        e = lane + 32 * i
        tile[e // 64, e // 8 % 8, e % 8] = mats[e // 64, e // 8 % 8, e % 8]
    cuda.syncthreads()
    regs = ld_{tag}(tile[lane // 8, rows[lane], :].ctypes)
    {store}
'''

_ST_KERNEL = '''
st_{tag} = cuda.declare_device("st_{tag}", "void(CPointer(uint16), {args})", link=LINK)


@cuda.jit
def st_{tag}_kernel(regs, rows, out):
    tile = cuda.shared.array((4, 8, 8), uint16, alignment=16)
    lane = cuda.threadIdx.x
    for i in range(8):
        e = lane + 32 * i
        tile[e // 64, e // 8 % 8, e % 8] = 0
    cuda.syncthreads()
    st_{tag}(tile[lane // 8, rows[lane], :].ctypes, {values})
    cuda.syncthreads()
    for i in range(8):
        e = lane + 32 * i
        out[e // 64, e // 8 % 8, e % 8] = tile[e // 64, e // 8 % 8, e % 8]
'''

for _num, _trans in VARIANTS:
    _tag = f"{_num}{'_t' * _trans}"
    _k = int(_num[1])
    _ret = "uint32" if _k == 1 else f"UniTuple(uint32, {_k})"
    _store = ("out[lane, 0] = regs" if _k == 1 else
              "\n    ".join(f"out[lane, {i}] = regs[{i}]" for i in range(_k)))
    exec(_LD_KERNEL.format(tag=_tag, ret=_ret, store=_store))
    exec(_ST_KERNEL.format(tag=_tag, args=", ".join(["uint32"] * _k),
                           values=", ".join(f"regs[lane, {i}]" for i in range(_k))))

mma = cuda.declare_device(
    "mma", "UniTuple(float32, 4)(uint32, uint32, uint32, uint32, uint32, uint32, "
    "float32, float32, float32, float32)", link=LINK)


@cuda.jit
def mma_kernel(a_regs, b_regs, c_regs, d_regs):
    lane = cuda.threadIdx.x
    d0, d1, d2, d3 = mma(a_regs[lane, 0], a_regs[lane, 1], a_regs[lane, 2], a_regs[lane, 3],
                         b_regs[lane, 0], b_regs[lane, 1], c_regs[lane, 0], c_regs[lane, 1],
                         c_regs[lane, 2], c_regs[lane, 3])
    d_regs[lane, 0] = d0
    d_regs[lane, 1] = d1
    d_regs[lane, 2] = d2
    d_regs[lane, 3] = d3


def _rows(rng):
    """Each group of 8 lanes points at the 8 rows of its matrix in a random order."""
    return np.concatenate([rng.permutation(8) for _ in range(4)]).astype(np.int32)


def _matrices(rng):
    return rng.choice(1 << 16, size=256, replace=False).astype(np.uint16).reshape(4, 8, 8)


# ---------------------------------------------------------------------------
# The reference layouts (numpy only)


def test_reference_layouts_agree_with_the_mma_fragments(rng):
    a = rng.integers(0, 1 << 16, size=(16, 16)).astype(np.uint16)
    b = rng.integers(0, 1 << 16, size=(16, 8)).astype(np.uint16)
    blocks = [a[:8, :8], a[8:, :8], a[:8, 8:], a[8:, 8:]]
    assert np.array_equal(F.ldmatrix(blocks), F.a_fragments(a))
    assert np.array_equal(F.ldmatrix([b[:8], b[8:]], trans=True), F.b_fragments(b))
    assert np.array_equal(F.a_from_fragments(F.a_fragments(a)), a)
    assert np.array_equal(F.b_from_fragments(F.b_fragments(b)), b)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    assert np.array_equal(F.c_from_fragments(F.c_fragments(c)), c)
    row, col = F.x4_a_rows(np.arange(32))
    assert row.tolist() == [*range(16), *range(16)] and col.tolist() == [0] * 16 + [8] * 16


def test_x1_map_covers_the_matrix_once():
    coords = F.x1_coords().reshape(-1, 2)
    assert len({tuple(c) for c in coords}) == 64
    assert F.x1_coords()[5].tolist() == [[1, 2], [1, 3]]
    assert F.x1_coords(trans=True)[5].tolist() == [[2, 1], [3, 1]]


def test_stmatrix_inverts_ldmatrix(rng):
    mats = list(_matrices(rng))
    for trans in (False, True):
        back = F.stmatrix(F.ldmatrix(mats, trans), trans)
        assert all(np.array_equal(x, y) for x, y in zip(back, mats))


def test_wavefronts():
    assert F.wavefronts([128 * r for r in range(8)]) == 8      # rows of 128 bytes: 8-way
    assert F.wavefronts([64 * r for r in range(8)]) == 4
    assert F.wavefronts([16 * r for r in range(8)]) == 1
    swizzled = [128 * r + 16 * int(F.swizzle_chunk(r, 0)) for r in range(8)]
    assert F.wavefronts(swizzled) == 1
    assert F.wavefronts([0] * 8) == 1  # the same row 8 times: a broadcast


def test_mma_reference_is_a_matrix_product(rng):
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = F.c_from_fragments(F.mma_m16n8k16(F.a_fragments(a.view(np.uint16)),
                                          F.b_fragments(b.view(np.uint16)), F.c_fragments(c)))
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    assert np.allclose(d, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# The instructions, run (emulated in the simulator)


@pytest.mark.parametrize("num,trans", VARIANTS, ids=[f"{n}{'.trans' * t}" for n, t in VARIANTS])
def test_ldmatrix(num, trans, rng):
    k = int(num[1])
    mats, rows = _matrices(rng), _rows(rng)
    out = np.zeros((32, 4), np.uint32)
    globals()[f"ld_{num}{'_t' * trans}_kernel"][1, 32](mats, rows, out)
    loaded = [mats[i][rows[8 * i:8 * i + 8]] for i in range(k)]
    assert np.array_equal(out[:, :k], F.ldmatrix(loaded, trans))


@needs_sm90
@pytest.mark.parametrize("num,trans", VARIANTS, ids=[f"{n}{'.trans' * t}" for n, t in VARIANTS])
def test_stmatrix(num, trans, rng):
    k = int(num[1])
    regs = rng.integers(0, 1 << 32, size=(32, 4), dtype=np.uint64).astype(np.uint32)
    rows = _rows(rng)
    out = np.zeros((4, 8, 8), np.uint16)
    globals()[f"st_{num}{'_t' * trans}_kernel"][1, 32](regs, rows, out)
    want = np.zeros((4, 8, 8), np.uint16)
    for i, m in enumerate(F.stmatrix(regs[:, :k], trans)):
        want[i][rows[8 * i:8 * i + 8]] = m
    assert np.array_equal(out, want)


def test_mma(rng):
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = np.zeros((32, 4), np.float32)
    mma_kernel[1, 32](F.a_fragments(a.view(np.uint16)), F.b_fragments(b.view(np.uint16)),
                      F.c_fragments(c), d)
    want = a.astype(np.float64) @ b.astype(np.float64) + c
    tol = 20 * 2.0**-23 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + abs(c))
    assert np.all(np.abs(F.c_from_fragments(d) - want) <= tol)


# ---------------------------------------------------------------------------
# Simulator: what a GPU gets wrong silently is an error here

def _declare(source, name, sig):
    return cuda.declare_device(name, sig, link=cuda.CUSource(source))


NO_CVTA = _declare(r"""
extern "C" __device__ int no_cvta(unsigned int* r, unsigned short* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
                 : "=r"(r[0]) : "l"(p));
    return 0;
}""", "no_cvta", "uint32(CPointer(uint16))")
LD1 = globals()["ld_x1"]
ST1 = globals()["st_x1"]
ADDRESS = _declare(r"""
extern "C" __device__ int address_of(unsigned int* r, unsigned short* p)
{
    *r = static_cast<unsigned int>(__cvta_generic_to_shared(p));
    return 0;
}""", "address_of", "uint32(CPointer(uint16))")
ARITH = _declare(r"""
extern "C" __device__ int arith(unsigned int* r, unsigned int a, unsigned short lo,
                                unsigned short hi, int s, float x)
{
    r[0] = (a * 3u + (a >> 2)) ^ 0x55u;
    r[1] = static_cast<unsigned int>(lo) | (static_cast<unsigned int>(hi) << 16);
    r[2] = static_cast<unsigned int>(s / 3 - (s % 5));
    r[3] = __float_as_uint(x * 2.5f + 1.0f);
    return 0;
}""", "arith", "UniTuple(uint32, 4)(uint32, uint16, uint16, int32, float32)")
STATUS = _declare(r"""
extern "C" __device__ int status(unsigned int* r, unsigned int a)
{
    *r = a;
    return -1;  // not implemented yet
}""", "status", "uint32(uint32)")
NOT_THERE = _declare(MMA, "not_there", "uint32(uint32)")


@cuda.jit
def call_no_cvta(out):
    tile = cuda.shared.array((8, 8), uint16, alignment=16)
    lane = cuda.threadIdx.x
    out[lane] = NO_CVTA(tile[lane % 8, :].ctypes)


@cuda.jit
def call_ld1_offset(out, offset):
    tile = cuda.shared.array(80, uint16, alignment=16)
    lane = cuda.threadIdx.x
    for i in range(lane, 80, 32):
        tile[i] = i
    cuda.syncthreads()
    out[lane] = LD1(tile[offset + 8 * (lane % 8):].ctypes)


@cuda.jit
def call_ld1_global(matrix, out):
    lane = cuda.threadIdx.x
    out[lane] = LD1(matrix[lane % 8:].ctypes)


@cuda.jit
def call_ld1_array(out):
    tile = cuda.shared.array(64, uint16, alignment=16)
    lane = cuda.threadIdx.x
    out[lane] = LD1(tile)


@cuda.jit
def call_address(out):
    first = cuda.shared.array(24, uint16, alignment=16)
    second = cuda.shared.array(64, uint16, alignment=128)
    t = cuda.threadIdx.x
    out[0, t] = ADDRESS(first[t:].ctypes)
    out[1, t] = ADDRESS(second[t:].ctypes)


@cuda.jit
def call_arith(args, out):
    t = cuda.threadIdx.x
    r = ARITH(uint32(args[t, 0]), uint16(args[t, 1]), uint16(args[t, 2]), args[t, 3],
              float32(args[t, 4]))
    for i in range(4):
        out[t, i] = r[i]


@cuda.jit
def call_status(out):
    out[cuda.threadIdx.x] = STATUS(uint32(1))


@cuda.jit
def call_not_there(out):
    out[cuda.threadIdx.x] = NOT_THERE(uint32(1))


sim_only = pytest.mark.sim_only


@sim_only
def test_declare_device_returns_a_callable_in_the_simulator():
    from workbook.sim.foreign import ForeignFunction

    assert isinstance(LD1, ForeignFunction)
    assert "ld_x1" in repr(LD1) and "uint16*" in repr(LD1)


@sim_only
def test_generic_pointer_to_a_shared_instruction_is_reported():
    with pytest.raises(Exception, match="cvta_generic_to_shared"):
        call_no_cvta[1, 32](np.zeros(32, np.uint32))


@sim_only
def test_misaligned_row_is_reported():
    with pytest.raises(Exception, match="not 16-byte aligned"):
        call_ld1_offset[1, 32](np.zeros(32, np.uint32), 4)
    out = np.zeros(32, np.uint32)
    call_ld1_offset[1, 32](out, 8)  # 16 bytes: aligned


@sim_only
def test_global_pointer_to_cvta_is_reported():
    with pytest.raises(Exception, match="does not point into a shared array"):
        call_ld1_global[1, 32](np.zeros(72, np.uint16), np.zeros(32, np.uint32))


@sim_only
def test_array_instead_of_pointer_is_a_type_error():
    with pytest.raises(TypeError, match=r"\.ctypes"):
        call_ld1_array[1, 32](np.zeros(32, np.uint32))


@sim_only
def test_partial_warp_is_reported():
    with pytest.raises(Exception, match="all 32 lanes"):
        globals()["ld_x1_kernel"][1, 16](np.zeros((4, 8, 8), np.uint16), np.zeros(32, np.int32),
                                         np.zeros((32, 4), np.uint32))


@sim_only
def test_shared_window_addresses():
    out = np.zeros((2, 8), np.uint32)
    call_address[1, 8](out)
    assert out[0].tolist() == [2 * t for t in range(8)]  # the first array starts at 0
    assert out[1, 0] % 128 == 0 and out[1, 0] >= 48
    assert (out[1] - out[1, 0]).tolist() == [2 * t for t in range(8)]


@sim_only
def test_integer_and_float_instructions():
    rng = np.random.default_rng(5)
    args = np.zeros((32, 5), np.float64)
    args[:, 0] = rng.integers(0, 1 << 31, 32)
    args[:, 1:3] = rng.integers(0, 1 << 16, (32, 2))
    args[:, 3] = rng.integers(-1000, 1000, 32)
    args[:, 4] = rng.standard_normal(32).astype(np.float32)
    out = np.zeros((32, 4), np.uint32)
    call_arith[1, 32](args, out)
    a = args[:, 0].astype(np.uint64)
    want0 = (((a * 3 + (a >> 2)) & 0xFFFFFFFF) ^ 0x55).astype(np.uint32)
    assert np.array_equal(out[:, 0], want0)
    assert np.array_equal(out[:, 1], F.pack(args[:, 1], args[:, 2]))
    s = args[:, 3].astype(np.int64)
    want2 = (np.trunc(s / 3).astype(np.int64) - np.fmod(s, 5)).astype(np.int32).view(np.uint32)
    assert np.array_equal(out[:, 2], want2)
    x = args[:, 4].astype(np.float32).astype(np.float64)
    want3 = (x * 2.5 + 1.0).astype(np.float32)  # exact in float64, one rounding: an fma
    assert np.array_equal(out[:, 3].view(np.float32), want3)


@sim_only
def test_nonzero_status_is_reported():
    with pytest.raises(Exception, match="status -1"):
        call_status[1, 1](np.zeros(1, np.uint32))


@sim_only
def test_unknown_function_is_reported():
    with pytest.raises(Exception, match="unknown foreign function not_there"):
        call_not_there[1, 1](np.zeros(1, np.uint32))


@sim_only
@pytest.mark.parametrize("source,words", [
    ('__device__ int f(unsigned int* r) { *r = 1; return 0; }', 'extern "C"'),
    ('extern "C" __device__ void f(unsigned int* r) { *r = 1; }', "returns nothing"),
    ('extern "C" __device__ int f(unsigned int* r, unsigned int a, unsigned int b) '
     '{ *r = a + b; return 0; }', "numba passes 2"),
    ('extern "C" __device__ int f(unsigned int* r) { uint32_t x = 1; *r = x; return 0; }',
     "uint32_t"),
    ('extern "C" __device__ int f(unsigned int* r) { asm volatile("mov.b32 %0, 1; bogus.op;" '
     ': "=r"(r[0])); return 0; }', "ptxas"),
    ('extern "C" __device__ int f(unsigned int* r, unsigned int a) { if (a > 3) *r = a; '
     'else *r = a * a + 1; return 0; }', ""),
])
def test_broken_functions_are_reported(source, words):
    from workbook.sim.foreign import ForeignEmulationError

    nargs = "(uint32)" if "unsigned int a" in source else "()"
    fn = cuda.declare_device("f", f"uint32{nargs}", link=cuda.CUSource(source))

    @cuda.jit
    def kernel(out):
        out[0] = fn(uint32(5)) if nargs != "()" else fn()

    try:
        kernel[1, 1](np.zeros(1, np.uint32))
    except (ForeignEmulationError, TypeError) as exc:
        assert words in str(exc)
    else:  # straight-line code (the compiler may turn the if into a select) runs
        assert words == ""


@sim_only
def test_alignment_argument_is_validated():
    @cuda.jit
    def kernel(out):
        tile = cuda.shared.array(16, uint16, alignment=24)
        out[0] = tile.size

    with pytest.raises(ValueError, match="power of 2"):
        kernel[1, 1](np.zeros(1, np.int64))


@sim_only
def test_bank_conflicts_are_counted(rng):
    from workbook.sim import foreign

    mats = _matrices(rng)
    foreign.reset_stats()
    globals()["ld_x4_kernel"][1, 32](mats, _rows(rng), np.zeros((32, 4), np.uint32))
    # rows of 16 bytes, each matrix 128 contiguous bytes: conflict-free
    assert foreign.stats()["ldmatrix"] == {"instructions": 1, "wavefronts": 4, "ideal": 4,
                                           "conflicts": 0}


# ---------------------------------------------------------------------------
# workbook.ptx on its own


def test_ptx_parsing_and_checks():
    source = _ld("ld", "x4", False)
    fn = ptx.check_foreign_function(
        source, "ld", 1, [("ldmatrix", {"x4", "shared", "b16"}, {"trans"}),
                          ("cvta", {"to", "shared"}, ())])
    assert fn.params[0][0] == ".b64" and len(fn.params) == 2
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in fn.opcodes()
    with pytest.raises(ptx.ForeignFunctionError, match="trans"):
        ptx.check_foreign_function(source, "ld", 1, [("ldmatrix", {"trans"}, ())])
    with pytest.raises(ptx.ForeignFunctionError, match="no function nope"):
        ptx.check_foreign_function(source, "nope", 1)


def test_split_statements_keeps_scopes_and_vectors():
    body = "{ .reg .b64 %t; cvta.to.shared.u64 %t, %rd1; } // c\nmov.b32 %r1, {%h1, %h2};"
    assert ptx.split_statements(body) == [
        "{", ".reg .b64 %t", "cvta.to.shared.u64 %t, %rd1", "}", "mov.b32 %r1, {%h1, %h2}"]


def test_count_sass():
    text = """
        /*0100*/  LDSM.16.M88.4 R4, [R2] ;
        /*0110*/  LDSM.16.MT88.2 R8, [R3] ;
        /*0120*/  HMMA.16816.F32 R12, R4, R8, R12 ;
        /*0130*/  LDS.U16 R5, [R6] ;
        /*0140*/  @P0 STSM.16.M88.4 [R2], R4 ;
    """
    assert ptx.count_sass(text) == {"LDSM": 2, "STSM": 1, "HMMA": 1, "CALL": 0, "LDS": 1,
                                    "STS": 0}


def test_compile_error_has_the_log():
    with pytest.raises(ptx.CompileError, match="identifier"):
        ptx.compile_ptx('extern "C" __device__ int f(unsigned int* r) { *r = y; return 0; }')


def test_compiling_leaves_the_interpreters_shared_one_byte_string_alone():
    """NVRTC writes its log (a lone NUL when the log is empty) into the buffer it is given;
    a buffer made as b" " * 1 is the interpreter's shared b" ", and every space that print()
    wrote after a compile came out as a NUL byte."""
    name = f"f{id(ptx)}"  # a new source: compiled now, whatever was compiled before
    ptx.compile_ptx(f'extern "C" __device__ int {name}(unsigned int* r) {{ *r = 5; return 0; }}')
    assert [byte for byte in " ".encode("ascii")] == [32]  # noqa: C416  (bytes, not a copy)


# --- the sanitizer sees the emulated instructions' shared-memory accesses -------------------

NO_ORDER, SYNCWARP, SYNCTHREADS = 0, 1, 2


@cuda.jit
def ld1_after_writes(matrix, out, order):
    """Every thread writes one element of the tile, then each warp loads it with ldmatrix."""
    tile = cuda.shared.array((8, 8), uint16, alignment=16)
    t = cuda.threadIdx.x
    for e in range(t, 64, cuda.blockDim.x):
        tile[e // 8, e % 8] = matrix[e // 8, e % 8]
    if order == SYNCWARP:
        cuda.syncwarp()
    elif order == SYNCTHREADS:
        cuda.syncthreads()
    out[t] = LD1(tile[t % 8, :].ctypes)


@cuda.jit
def st1_then_reads(regs, out, order):
    tile = cuda.shared.array((8, 8), uint16, alignment=16)
    lane = cuda.threadIdx.x
    ST1(tile[lane % 8, :].ctypes, regs[lane])
    if order == SYNCWARP:
        cuda.syncwarp()
    elif order == SYNCTHREADS:
        cuda.syncthreads()
    out[lane] = tile[7 - lane // 8, lane % 8]


def _ld1_case(threads, order):
    matrix = np.arange(64, dtype=np.uint16).reshape(8, 8)
    out = np.zeros(threads, np.uint32)
    ld1_after_writes[1, threads](matrix, out, order)
    return out


@sim_only
@pytest.mark.parametrize("threads", [32, 64])
def test_ldmatrix_after_writes_without_a_barrier_is_a_race(threads):
    with pytest.raises(RaceError) as info:
        _ld1_case(threads, NO_ORDER)
    message = str(info.value)
    assert "racecheck: data race on shared memory tile[" in message
    assert "(ldmatrix row " in message and "16 bytes at shared address 0x" in message
    assert "missing cuda.syncthreads()?" in message


@sim_only
def test_syncwarp_orders_the_lanes_of_one_warp_only_for_ldmatrix():
    _ld1_case(32, SYNCWARP)  # one warp: syncwarp is enough
    with pytest.raises(RaceError, match="warp 1"):
        _ld1_case(64, SYNCWARP)  # warp 1 wrote rows that warp 0's ldmatrix reads


@pytest.mark.parametrize("threads", [32, 64])
def test_ldmatrix_after_a_barrier_is_clean(threads):
    out = _ld1_case(threads, SYNCTHREADS)
    matrix = np.arange(64, dtype=np.uint16).reshape(8, 8)
    assert (out.reshape(-1, 32) == F.ldmatrix([matrix], False)[:, 0]).all()


@sim_only
def test_reads_of_what_stmatrix_wrote_need_an_order():
    regs = np.arange(32, dtype=np.uint32) * 0x10001
    with pytest.raises(RaceError, match=r"stmatrix row \d of matrix 0"):
        st1_then_reads[1, 32](regs, np.zeros(32, np.uint16), NO_ORDER)
    for order in (SYNCWARP, SYNCTHREADS):
        st1_then_reads[1, 32](regs, np.zeros(32, np.uint16), order)


@sim_only
def test_ldmatrix_of_unwritten_shared_memory_is_an_initcheck_error():
    with pytest.raises(UninitializedReadError, match=r"ldmatrix row \d of matrix 0"):
        ld1_unwritten[1, 32](np.zeros(32, np.uint32))


@cuda.jit
def ld1_unwritten(out):
    tile = cuda.shared.array((8, 8), uint16, alignment=16)
    lane = cuda.threadIdx.x
    out[lane] = LD1(tile[lane % 8, :].ctypes)
