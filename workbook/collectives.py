"""Warp and block all-reductions (max and sum of float32), as device functions.

The patterns of lesson 02, packaged for the lessons that build on them (softmax,
layernorm). Every thread gets the result, hence *all*-reduce:

``warp_all_reduce_max(value, width)`` / ``warp_all_reduce_sum(value, width)``
    The max / sum of ``value`` over a *thread group* of ``width`` consecutive lanes
    of a warp (``width`` a power of two, 1 to 32; groups start at lanes that are
    multiples of ``width``). A butterfly of ``cuda.shfl_xor_sync`` with offsets
    ``width/2, ..., 2, 1``: after the step with offset ``d`` every lane holds the
    result over its aligned group of ``2d`` lanes, so ``log2(width)`` shuffles give
    every lane of the group the group's result. Several groups of one warp (e.g.
    four groups of 8 lanes, one row each) reduce independently in the same
    instructions. ``width`` should be a compile-time constant (a literal or a
    closure constant of a kernel factory) so that the loop is unrolled.

``block_all_reduce_max(value)`` / ``block_all_reduce_sum(value)``
    The max / sum of ``value`` over the whole block, returned to every thread:
    each warp reduces its values with shuffles, lane 0 of each warp stores the
    warp's result in shared memory (one slot per warp), warp 0 reduces those slots
    and lane 0 stores the block's result in a broadcast slot that every thread
    then reads. Two ``cuda.syncthreads()`` per call, so every thread of the block
    must call it (never inside a branch that only some threads take).

Conditions, as on a GPU:

* Every lane of the warp takes part in each call (the shuffles use the full mask
  ``0xFFFFFFFF``): for a group whose row does not exist, pass the identity
  (``-inf`` for max, ``0`` for sum) rather than skipping the call.
* Block versions: a 1-D block whose size is a multiple of 32, at most 1024.
* Each block function owns one small shared array (33 float32). A second call of
  the same function can follow the first immediately: its first write to the
  array happens after the first call's last read (both calls' barriers order
  them).
* Values are float32 (a float16 input is converted before reducing: see lesson 02
  on accumulating in a wider type). ``max`` follows ``-inf`` correctly: the max of
  a group that holds only ``-inf`` is ``-inf`` (NaN inputs are not supported: the
  hardware ``max`` returns the other operand).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32
_SLOTS = WARP_SIZE + 1  # one per warp (at most 32) and the broadcast slot
NEG_INF = np.float32(-np.inf)

__all__ = ["FULL_MASK", "NEG_INF", "WARP_SIZE", "block_all_reduce_max", "block_all_reduce_sum",
           "warp_all_reduce_max", "warp_all_reduce_sum"]


@cuda.jit(device=True)
def warp_all_reduce_max(value, width):
    """Max of ``value`` over each aligned group of ``width`` lanes; every lane gets it."""
    offset = width // 2
    while offset > 0:
        value = max(value, cuda.shfl_xor_sync(FULL_MASK, value, offset))
        offset //= 2
    return value


@cuda.jit(device=True)
def warp_all_reduce_sum(value, width):
    """Sum of ``value`` over each aligned group of ``width`` lanes; every lane gets it."""
    offset = width // 2
    while offset > 0:
        value += cuda.shfl_xor_sync(FULL_MASK, value, offset)
        offset //= 2
    return value


def _block_all_reduce(warp_reduce, identity):
    """A block all-reduce built on ``warp_reduce``; ``identity`` fills the missing warps."""

    @cuda.jit(device=True)
    def block_all_reduce(value):
        slots = cuda.shared.array(_SLOTS, float32)
        lane = cuda.threadIdx.x % WARP_SIZE
        warp = cuda.threadIdx.x // WARP_SIZE
        value = warp_reduce(float32(value), WARP_SIZE)
        if lane == 0:
            slots[warp] = value
        cuda.syncthreads()
        if warp == 0:
            warps = cuda.blockDim.x // WARP_SIZE
            partial = slots[lane] if lane < warps else identity
            partial = warp_reduce(partial, WARP_SIZE)
            if lane == 0:
                slots[WARP_SIZE] = partial
        cuda.syncthreads()
        return slots[WARP_SIZE]

    return block_all_reduce


#: Max of ``value`` over the block (1-D, a multiple of 32 threads); every thread gets it.
block_all_reduce_max = _block_all_reduce(warp_all_reduce_max, NEG_INF)
#: Sum of ``value`` over the block (1-D, a multiple of 32 threads); every thread gets it.
block_all_reduce_sum = _block_all_reduce(warp_all_reduce_sum, float32(0.0))
