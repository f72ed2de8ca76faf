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


def warp_tile_lanes(width: int, rows_per_thread: int, cols_per_thread: int,
                    pack: int = 1) -> np.ndarray:
    """Which lane of a warp holds each element of one tile of the warp kernels (softmax.warp,
    layernorm.warp): an int array of ``(32 // width) * rows_per_thread`` rows and
    ``width * cols_per_thread`` columns.

    Lane ``L`` (``cuda.threadIdx.x % 32``, which is ``cuda.laneid`` in a 1-D block) is lane
    ``l = L % width`` of group ``g = L // width``. Group ``g`` holds rows
    ``g * rows_per_thread + r`` of the tile, and its lane ``l`` holds, of each of those rows,
    packs ``p * width + l`` for ``p < cols_per_thread // pack``: columns
    ``(p * width + l) * pack + i`` for ``i < pack``.
    """
    if 32 % width or cols_per_thread % pack:
        raise ValueError("width must divide 32 and pack must divide cols_per_thread")
    groups = 32 // width
    lanes = np.full((groups * rows_per_thread, width * cols_per_thread), -1)
    for lane in range(32):
        g, l = divmod(lane, width)
        for r in range(rows_per_thread):
            for p in range(cols_per_thread // pack):
                start = (p * width + l) * pack
                lanes[g * rows_per_thread + r, start:start + pack] = lane
    return lanes


def draw_warp_tile(width: int, rows_per_thread: int, cols_per_thread: int, pack: int = 1,
                   cols: int | None = None, ax=None):
    """Draw one warp's tile: rows x columns, each element coloured and labelled with the lane
    that holds it (see :func:`warp_tile_lanes`); columns at or past ``cols`` are padding
    (hatched: loaded as nothing, filled with -inf or skipped)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    ax = ax or plt.gca()
    lanes = warp_tile_lanes(width, rows_per_thread, cols_per_thread, pack)
    rows, columns = lanes.shape
    palette = np.vstack([plt.get_cmap("tab20")(np.arange(20)),
                         plt.get_cmap("tab20b")(np.arange(12))])
    ax.imshow(lanes, cmap=ListedColormap(palette), vmin=-0.5, vmax=31.5, aspect="auto")
    small = 7 if columns <= 32 else 5
    for (row, col), lane in np.ndenumerate(lanes):
        ax.text(col, row, str(lane), ha="center", va="center", fontsize=small)
    if cols is not None and cols < columns:
        ax.axvspan(cols - 0.5, columns - 0.5, facecolor="white", alpha=0.6, hatch="//",
                   edgecolor="grey")
        ax.text((cols + columns) / 2 - 0.5, rows / 2 - 0.5, "padding", ha="center",
                va="center", rotation=90, fontsize=9, backgroundcolor="white")
    for k in range(1, 32 // width):  # group boundaries
        ax.axhline(k * rows_per_thread - 0.5, color="black", lw=1.2)
    for start in range(0, columns, pack * width):  # one pass of the group over its packs
        ax.axvline(start - 0.5, color="black", lw=0.6, ls=":")
    ax.set_yticks(range(rows), [f"g{row // rows_per_thread} r{row % rows_per_thread}"
                                for row in range(rows)], fontsize=7)
    ax.set_xticks(range(0, columns, pack), [str(c) for c in range(0, columns, pack)],
                  fontsize=7)
    ax.set_xlabel(f"column (packs of {pack}: pack p * {width} + l of lane l)")
    ax.set_ylabel("row of the tile (group g, row r)")
    ax.set_title(f"one warp's tile: {32 // width} groups of {width} lanes x {rows_per_thread} "
                 f"row(s) = {rows} rows\n{cols_per_thread} values per lane and row, in packs "
                 f"of {pack}", fontsize=10)
    return ax
