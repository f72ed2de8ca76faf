"""Pictures of lesson 05's block-based labelling: 2x2 blocks, their neighbours, the links of
the init and the unions left for the merge (drawn from arrays, see workbook.ccl_blocks)."""

from __future__ import annotations

import numpy as np

from workbook import ccl_blocks as cb

LINK, UNION, SKIPPED, TOUCH = "#1f77b4", "#d62728", "#999999", "#2ca02c"

# the schematic's pixels: (row, column) in a 4 x 6 window, rows 2by-2 .. 2by+1 and columns
# 2bx-2 .. 2bx+3; block X is rows 2-3, columns 2-3
BLOCKS = {"P": (0, 0), "Q": (0, 2), "R": (0, 4), "S": (2, 0), "X": (2, 2)}
NAME_AT = {"P": (0, 0), "Q": (0, 2.5), "R": (0, 5), "S": (2.5, 0), "X": (2.5, 4.3)}
READ = {"pd": (1, 1), "qc": (1, 2), "qd": (1, 3), "rc": (1, 4), "sb": (2, 1), "sd": (3, 1),
        "a": (2, 2), "b": (2, 3), "c": (3, 2), "d": (3, 3)}
# neighbour pairs that touch through pixels X reads (each a pixel of each block)
NEIGHBOUR_PAIRS = (("P", "Q", "pd", "qc"), ("Q", "R", "qd", "rc"), ("P", "S", "pd", "sb"),
                   ("Q", "S", "qc", "sb"))


def _square(ax, row, col, size, **style):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((col - 0.5, row - 0.5), size, size, **style))


def _frame(ax, rows, cols):
    ax.set_xlim(-0.6, cols - 0.4)
    ax.set_ylim(rows - 0.4, -0.6)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_block_neighbours(ax=None, foreground=("a", "b", "pd", "qc", "rc", "sb")):
    """Block X, its neighbour blocks P Q R S and the pixels of theirs that X reads.

    ``foreground`` names the pixels drawn black; lines show which touch (green) and, dotted,
    the pairs of neighbours that touch each other through them."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    for name, (row, col) in BLOCKS.items():
        _square(ax, row, col, 2, fill=name == "X", facecolor="#fff3c4", edgecolor="black",
                linewidth=2, zorder=1)
        ax.text(NAME_AT[name][1], NAME_AT[name][0], "\u2190 X" if name == "X" else name,
                ha="center", va="center",
                fontsize=14, fontweight="bold", color="#444444")
    for name, (row, col) in READ.items():
        on = name in foreground
        _square(ax, row, col, 1, facecolor="black" if on else "white", edgecolor="#555555",
                linewidth=0.8, zorder=2)
        ax.text(col, row, name, ha="center", va="center", fontsize=9, zorder=3,
                color="white" if on else "black")
    centre = {k: (c, r) for k, (r, c) in READ.items()}
    touching = [(p, q) for p in ("a", "b", "c", "d") for q in ("pd", "qc", "qd", "rc", "sb", "sd")
                if p in foreground and q in foreground
                and max(abs(READ[p][0] - READ[q][0]), abs(READ[p][1] - READ[q][1])) == 1]
    for p, q in touching:
        ax.plot(*zip(centre[p], centre[q]), color=TOUCH, linewidth=2.5, zorder=4, alpha=0.8)
    for _, _, p, q in NEIGHBOUR_PAIRS:
        if p in foreground and q in foreground:
            ax.plot(*zip(centre[p], centre[q]), color=TOUCH, linewidth=1.5, zorder=4,
                    linestyle=":")
    _frame(ax, 4, 6)
    ax.set_title("the pixels X reads: green lines touch X,\ndotted ones join two of its "
                 "neighbours", fontsize=9)
    return ax


def draw_block_forest(ax, image, forest, links, connectivity: int, tile, title: str = ""):
    """An image with its 2x2 blocks (tiles in grey), the init's links (blue arrows, from each
    cell to its parent) and the unions the links ask for (red dashed); roots circled."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    image = np.asarray(image)
    height, width = image.shape
    _, cols, _ = cb.sizes(image.shape)
    forest = np.asarray(forest).reshape(-1)
    ax.imshow(image != 0, cmap="gray_r", vmin=0, vmax=1.6, interpolation="nearest")
    for x in range(0, width + 1, 2):
        ax.axvline(x - 0.5, color="#bbbbbb", linewidth=0.5)
    for y in range(0, height + 1, 2):
        ax.axhline(y - 0.5, color="#bbbbbb", linewidth=0.5)
    for x in range(0, width + 1, 2 * tile[0]):
        ax.axvline(x - 0.5, color="#888888", linewidth=2.5)
    for y in range(0, height + 1, 2 * tile[1]):
        ax.axhline(y - 0.5, color="#888888", linewidth=2.5)

    def centre(key):
        y, bx = divmod(int(key), cols)
        return (2 * bx + (0.5 if 2 * bx + 1 < width else 0.0), y)

    for key, parent in enumerate(forest):
        if parent < 0:
            continue
        if parent == key:
            ax.scatter(*centre(key), s=60, facecolors="none", edgecolors=LINK, linewidths=1.5,
                       zorder=5)
        else:
            ax.annotate("", xy=centre(parent), xytext=centre(key), zorder=5,
                        arrowprops={"arrowstyle": "->", "color": LINK, "linewidth": 1.3})
    for _, mine, other in cb.union_pairs(forest, links, image.shape, connectivity).values():
        for a, b in zip(mine, other):
            if b >= 0:
                ax.plot(*zip(centre(a), centre(b)), color=UNION, linestyle="--", linewidth=1.5,
                        zorder=6)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    return ax
