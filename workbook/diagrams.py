"""Pictures for the lessons, computed from the algorithms they illustrate."""

from __future__ import annotations

import numpy as np


def tree_steps(n: int, scheme: str) -> list[list[tuple[int, int, int]]]:
    """The (thread, destination, source) additions of each step of a one-block tree sum.

    ``scheme`` is ``"interleaved"`` (thread t adds x[2t + stride] into x[2t] when
    t % stride == 0, stride = 1, 2, 4, ...) or ``"convergent"`` (thread t < stride
    adds x[t + stride] into x[t], stride = n/2, n/4, ..., 1).
    """
    threads = n // 2
    steps = []
    if scheme == "interleaved":
        stride = 1
        while stride <= threads:
            steps.append([(t, 2 * t, 2 * t + stride) for t in range(threads) if t % stride == 0])
            stride *= 2
    elif scheme == "convergent":
        stride = threads
        while stride >= 1:
            steps.append([(t, t, t + stride) for t in range(stride)])
            stride //= 2
    else:
        raise ValueError(f"unknown scheme {scheme!r}: use 'interleaved' or 'convergent'")
    return steps


def draw_tree(n: int = 16, ax=None, scheme: str = "interleaved"):
    """Draw which thread adds which element at each step of a tree sum of n elements."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    steps = tree_steps(n, scheme)
    colours = plt.get_cmap("tab10")
    for level, step in enumerate(steps):
        y = -level
        ax.scatter(range(n), [y] * n, s=60, c="#dddddd", zorder=1)
        for thread, dst, src in step:
            ax.annotate("", xy=(dst, y - 1), xytext=(src, y),
                        arrowprops={"arrowstyle": "->", "color": colours(thread % 10)})
            ax.plot([dst, dst], [y, y - 1], color=colours(thread % 10), lw=1)
            ax.text(dst, y - 0.5, f"t{thread}", fontsize=7, ha="right", color=colours(thread % 10))
    ax.scatter([0], [-len(steps)], s=90, c="black", zorder=2)
    ax.set_yticks([-k for k in range(len(steps) + 1)],
                  [f"step {k}" for k in range(len(steps))] + ["result"])
    ax.set_xticks(range(n))
    ax.set_xlabel("element index")
    ax.set_title(f"{scheme} tree sum of {n} elements ({n // 2} threads)")
    return ax


def active_warps(block: int, scheme: str) -> tuple[np.ndarray, np.ndarray]:
    """Per step: threads doing an addition, and warps with at least one such thread."""
    steps = tree_steps(2 * block, scheme)
    threads = np.array([len(s) for s in steps])
    warps = np.array([len({t // 32 for t, _, _ in s}) for s in steps])
    return threads, warps


def draw_active_warps(block: int = 1024, ax=None):
    """Bar chart: warps kept busy per step by the interleaved and the convergent schemes."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    width = 0.4
    for offset, scheme in ((-width / 2, "interleaved"), (width / 2, "convergent")):
        threads, warps = active_warps(block, scheme)
        x = np.arange(len(warps)) + offset
        ax.bar(x, warps, width, label=f"{scheme}: {int(warps.sum())} warp-steps")
    ax.set_xlabel("step")
    ax.set_ylabel("warps issuing the addition")
    ax.set_title(f"one block of {block} threads: work is the same, warps kept busy are not")
    ax.legend()
    return ax
