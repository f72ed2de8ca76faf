"""Exec'd after interior_stats_var.py: the packed table's slot by a mask (TABLE is a power
of two) instead of Python's modulo, which numba compiles with a sign fix-up."""
assert TABLE & (TABLE - 1) == 0


@cuda.jit(device=True)
def packed_add(keys, sums, masks, k, packed, mask):
    s = k & (TABLE - 1)
    while True:
        old = cuda.atomic.cas(keys, s, EMPTY, k)
        if old == EMPTY or old == k:
            break
        s = (s + 1) & (TABLE - 1)
    cuda.atomic.add(sums, s, packed)
    cuda.atomic.or_(masks, s, mask)
