"""Occupancy: how many blocks of a kernel one SM can run at once.

An SM holds blocks until one of its resources runs out: threads (2048 on
Hopper), blocks (32), registers (65536, allocated per warp) or shared memory
(228 KiB, of which 1 KiB per block is reserved by the system). The fewer
resources a block needs, the more blocks stay resident, and the more warps the
SM can switch to while others wait for memory or at a barrier.

``max_active_blocks(kernel, block_size, dynamic_shared_bytes, args)``
    On a GPU, the CUDA occupancy calculator
    (``cuOccupancyMaxActiveBlocksPerMultiprocessor``, through numba's context)
    for the kernel compiled for ``args``: it knows the kernel's real register
    count and static shared memory. In the simulator there is no compiled
    kernel, so it is an *estimate* for an H100/H200-class SM (compute capability
    9.0) from the limits above, assuming ``registers_per_thread`` (default 32)
    and only the dynamic shared memory (plus the 1 KiB reservation).

``allow_dynamic_shared_memory(kernel, nbytes, args)``
    A block may use more than 48 KiB of dynamic shared memory only if the kernel
    says so (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``, what
    ``cudaFuncSetAttribute`` sets in CUDA C++). Call it before such a launch;
    ``max_active_blocks`` calls it for sizes above 48 KiB, so that its answer
    describes the launch as it will happen. The limit only ever grows.

``compiled(kernel, args)``
    The kernel compiled for the types of ``args`` (numba compiles one version per
    argument types, on first launch or here).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbook.mode import current_mode

DEFAULT_DYNAMIC_LIMIT = 48 * 1024  # bytes a block may use without opting in


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resources of the simulator's estimate (an H100/H200, compute capability 9.0)."""

    threads: int = 2048
    blocks: int = 32
    registers: int = 65536
    register_unit: int = 256        # registers are allocated per warp, in units of 256
    shared_bytes: int = 233472      # 228 KiB per SM
    shared_per_block: int = 232448  # 227 KiB: the most one block can opt in to
    reserved_per_block: int = 1024  # shared memory the system keeps per block


HOPPER = SMLimits()


def estimate_active_blocks(block_size: int, dynamic_shared_bytes: int = 0,
                           registers_per_thread: int = 32, static_shared_bytes: int = 0,
                           limits: SMLimits = HOPPER) -> int:
    """Blocks per SM allowed by threads, blocks, registers and shared memory (0: never fits)."""
    if block_size <= 0 or block_size > 1024:
        return 0
    shared = dynamic_shared_bytes + static_shared_bytes
    if shared > limits.shared_per_block:
        return 0
    warps = -(-block_size // 32)
    per_warp = -(-registers_per_thread * 32 // limits.register_unit) * limits.register_unit
    by_registers = limits.registers // (per_warp * warps)
    by_shared = limits.shared_bytes // (shared + limits.reserved_per_block)
    return max(0, min(limits.blocks, limits.threads // block_size, by_registers, by_shared))


def compiled(kernel, args):
    """The compiled version of a ``@cuda.jit`` kernel for the types of ``args`` (GPU only)."""
    argtypes = tuple(kernel.typeof_pyval(a) for a in args)
    return kernel.compile(argtypes)


_granted: dict[int, int] = {}  # id(compiled kernel) -> dynamic shared bytes allowed so far


def allow_dynamic_shared_memory(kernel, nbytes: int, args=()) -> None:
    """Let ``kernel`` (compiled for ``args``) launch with ``nbytes`` of dynamic shared memory."""
    if current_mode() == "sim":
        if nbytes > HOPPER.shared_per_block:
            raise ValueError(f"{nbytes} bytes of shared memory per block: more than the "
                             f"{HOPPER.shared_per_block} a block can use on this GPU")
        return
    if nbytes <= DEFAULT_DYNAMIC_LIMIT:
        return
    overload = compiled(kernel, args)
    if _granted.get(id(overload), DEFAULT_DYNAMIC_LIMIT) >= nbytes:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    cufunc = overload._codelibrary.get_cufunc()
    attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attribute, nbytes, cufunc.handle, cufunc.device.id)
    _granted[id(overload)] = nbytes


def _shared_limit() -> int:
    from numba import cuda

    return cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN


def max_active_blocks(kernel, block_size: int, dynamic_shared_bytes: int = 0, args=(),
                      registers_per_thread: int = 32) -> int:
    """Resident blocks per SM for ``kernel`` launched with this block size and dynamic
    shared memory (0 when such a block cannot run at all).

    ``args`` are arguments of the launch (e.g. ``(x, y)``): on a GPU the kernel is
    compiled for their types. ``registers_per_thread`` is used by the simulator's
    estimate only.
    """
    if current_mode() == "sim":
        return estimate_active_blocks(block_size, dynamic_shared_bytes, registers_per_thread)
    from numba import cuda

    overload = compiled(kernel, args)
    if dynamic_shared_bytes > DEFAULT_DYNAMIC_LIMIT:
        static = overload.shared_mem_per_block
        if dynamic_shared_bytes + static > _shared_limit():
            return 0
        allow_dynamic_shared_memory(kernel, dynamic_shared_bytes, args)
    cufunc = overload._codelibrary.get_cufunc()
    return int(cuda.current_context().get_active_blocks_per_multiprocessor(
        cufunc, block_size, dynamic_shared_bytes))


__all__ = ["HOPPER", "SMLimits", "allow_dynamic_shared_memory", "compiled",
           "estimate_active_blocks", "max_active_blocks"]
