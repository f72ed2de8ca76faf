"""Warp-wide instructions: ldmatrix, stmatrix, mma and bar.warp.sync."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbook import fragments
from workbook.sim import sanitizer, warp
from workbook.sim.foreign.common import ForeignEmulationError, _count
from workbook.sim.foreign.lane import _Failure, _Lane, _space
from workbook.sim.foreign.program import _Instruction
from workbook.sim.foreign.values import _vector
from workbook.sim.foreign.window import _shared_bytes, _window, report_shared


def _matrix_count(ins: _Instruction, lane: _Lane) -> int:
    if not ins.has("sync", "aligned"):
        raise lane.fail(f"{ins.base} must be .sync.aligned")
    if "m8n8" not in ins.quals or "b16" not in ins.quals:
        raise lane.fail(f"{ins.opcode}: only the .m8n8 shape with .b16 elements is emulated "
                        "(m16n16, m8n16 and .b8 need sm_100)")
    for q in ("x1", "x2", "x4"):
        if q in ins.quals:
            return int(q[1])
    raise lane.fail(f"{ins.opcode} lacks .x1, .x2 or .x4")


@dataclass
class _MatrixRequest:
    space: str
    address: int
    where: str
    values: tuple = field(default_factory=tuple)
    thread: object = None  # the lane's simulated thread and the kernel line that called:
    site: int | None = None  # where the sanitizer reports its shared-memory accesses


def _row_rows(group, n: int, what: str, space: str):
    """Shared-window address of row r of matrix i, from lane 8i + r; or a _Failure."""
    window = _window()
    addresses = []
    for i in range(n):
        rows = []
        for r in range(8):
            request = group[8 * i + r].value
            address = request.address
            if space != "shared":  # a generic address: it must point into shared memory
                region = window.by_host(address)
                if region is None:
                    return _Failure(
                        f"{request.where}: {what} without .shared takes a generic address, but "
                        f"lane {8 * i + r}'s ({address:#x}) is not in shared memory")
                address = region.window + address - region.host
            if address % 16:
                return _Failure(
                    f"{request.where}: lane {8 * i + r} gives row {r} of matrix {i} at "
                    f"shared address {address:#x}, which is not 16-byte aligned (each row is "
                    "16 contiguous bytes; on a GPU: a misaligned-address error)")
            try:
                _shared_bytes(address, 16, f"lane {8 * i + r} (row {r} of matrix {i})")
            except ForeignEmulationError as exc:
                return _Failure(f"{request.where}: {exc}")
            rows.append(address)
        addresses.append(rows)
    return addresses


def _full_warp(group, what: str):
    if len(group) == warp.WARP_SIZE:
        return None
    lanes = sorted(group)
    where = next(iter(group.values())).value.where
    return _Failure(
        f"{where}: {what} is a warp-wide instruction: all 32 lanes must execute it, but this "
        f"warp has only lanes {lanes[0]}..{lanes[-1]} (make the block a multiple of 32 threads)")


def _report_rows(group, addresses, what: str, kind: int):
    """Report each lane's row (16 bytes) to the sanitizer; a _Failure if it finds a bug."""
    try:
        for i, rows in enumerate(addresses):
            for r, address in enumerate(rows):
                request = group[8 * i + r].value
                report_shared(request.thread, request.site, f"{what} row {r} of matrix {i}",
                              kind, address, 16)
    except sanitizer.SanitizerError as exc:
        return _Failure(str(exc), type(exc))
    return None


def _record_wavefronts(kind: str, addresses) -> None:
    fronts = sum(fragments.wavefronts(rows) for rows in addresses)
    _count(kind, instructions=1, wavefronts=fronts, ideal=len(addresses),
           conflicts=fronts - len(addresses))


def _ldmatrix_results(n: int, trans: bool, space: str):
    def results(group, mask):
        failure = _full_warp(group, "ldmatrix")
        addresses = failure or _row_rows(group, n, "ldmatrix", space)
        if isinstance(addresses, _Failure):
            return dict.fromkeys(group, addresses)
        failure = _report_rows(group, addresses, "ldmatrix", sanitizer.READ)
        if failure:
            return dict.fromkeys(group, failure)
        matrices = []
        for rows in addresses:
            data = []
            for address in rows:
                flat, offset = _shared_bytes(address, 16, "ldmatrix")
                data.append(flat[offset:offset + 16].view("<u2").copy())
            matrices.append(np.stack(data))
        regs = fragments.ldmatrix(matrices, trans)
        _record_wavefronts("ldmatrix", addresses)
        return {lane: tuple(int(v) for v in regs[lane]) for lane in group}

    return results


def _stmatrix_results(n: int, trans: bool, space: str):
    def results(group, mask):
        failure = _full_warp(group, "stmatrix")
        addresses = failure or _row_rows(group, n, "stmatrix", space)
        if isinstance(addresses, _Failure):
            return dict.fromkeys(group, addresses)
        failure = _report_rows(group, addresses, "stmatrix", sanitizer.WRITE)
        if failure:
            return dict.fromkeys(group, failure)
        regs = np.array([group[lane].value.values for lane in range(warp.WARP_SIZE)],
                        dtype=np.uint32)
        matrices = fragments.stmatrix(regs, trans)
        for rows, matrix in zip(addresses, matrices):
            for address, row in zip(rows, matrix):
                flat, offset = _shared_bytes(address, 16, "stmatrix")
                flat[offset:offset + 16] = row.astype("<u2").view(np.uint8)
        _record_wavefronts("stmatrix", addresses)
        return dict.fromkeys(group, ())

    return results


def _mma_results(group, mask):
    failure = _full_warp(group, "mma")
    if failure:
        return dict.fromkeys(group, failure)
    values = [group[lane].value.values for lane in range(warp.WARP_SIZE)]
    a = np.array([v[0:4] for v in values], dtype=np.uint32)
    b = np.array([v[4:6] for v in values], dtype=np.uint32)
    c = np.array([v[6:10] for v in values], dtype=np.uint32).view(np.float32)
    d = fragments.mma_m16n8k16(a, b, c).view(np.uint32)
    _count("mma", instructions=1)
    return {lane: tuple(int(x) for x in d[lane]) for lane in group}


def _warp_op(lane: _Lane, ins: _Instruction, value, results):
    op = f"{lane.program.name}#{ins.index}: {ins.opcode}"
    # Matrix instructions synchronise the warp but do not order memory: the lanes' shared-
    # memory accesses before them still need a barrier (or cuda.syncwarp()).
    result = warp.collective(op, value, results, orders=False)
    if isinstance(result, _Failure):
        raise result.error(result.message)
    return result


def _ldmatrix(lane: _Lane, ins: _Instruction) -> None:
    n = _matrix_count(ins, lane)
    dests = _vector(ins.operands[0])
    if len(dests) != n:
        raise lane.fail(f"ldmatrix .x{n} writes {n} register(s), not {len(dests)}")
    space = _space(ins)
    _, address = lane.address(ins.operands[1])
    request = _MatrixRequest(space, address, lane.where(), (), lane.thread, lane.site())
    regs = _warp_op(lane, ins, request, _ldmatrix_results(n, "trans" in ins.quals, space))
    for dest, value in zip(dests, regs):
        lane.write(dest, value)


def _stmatrix(lane: _Lane, ins: _Instruction) -> None:
    n = _matrix_count(ins, lane)
    sources = _vector(ins.operands[1])
    if len(sources) != n:
        raise lane.fail(f"stmatrix .x{n} reads {n} register(s), not {len(sources)}")
    space = _space(ins)
    _, address = lane.address(ins.operands[0])
    values = tuple(lane.read(s, "b32") for s in sources)
    request = _MatrixRequest(space, address, lane.where(), values, lane.thread, lane.site())
    _warp_op(lane, ins, request, _stmatrix_results(n, "trans" in ins.quals, space))


_MMA = ("sync", "aligned", "m16n8k16", "row", "col")


def _mma(lane: _Lane, ins: _Instruction) -> None:
    if not ins.has(*_MMA) or ins.types != ("f32", "f16", "f16", "f32"):
        raise lane.fail(f"{ins.opcode}: only mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                        "is emulated")
    groups = [_vector(op) for op in ins.operands]
    if [len(g) for g in groups] != [4, 4, 2, 4]:
        raise lane.fail("m16n8k16 with float32 accumulators takes {d0..d3}, {a0..a3}, "
                        "{b0, b1}, {c0..c3}")
    d, a, b, c = groups
    values = tuple(lane.read(x, "b32") for x in (*a, *b)) + tuple(lane.read(x, "f32") for x in c)
    result = _warp_op(lane, ins, _MatrixRequest("", 0, lane.where(), values), _mma_results)
    for dest, value in zip(d, result):
        lane.write(dest, value)


def _bar(lane: _Lane, ins: _Instruction) -> None:
    if "warp" not in ins.quals:
        raise lane.fail(f"{ins.opcode} (a block-wide barrier) is not emulated inside foreign "
                        "functions; call cuda.syncthreads() in the kernel")
    mask = lane.read(ins.operands[0], "b32") if ins.operands else warp.FULL_MASK
    warp.collective(f"{lane.program.name}#{ins.index}: {ins.opcode}", None,
                    lambda group, m: dict.fromkeys(group), mask=mask)
