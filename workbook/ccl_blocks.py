"""The block-based labelling of lesson 05 in numpy: cells, 2x2 blocks, links and unions.

The lesson's GPU kernels and this model follow the same rules, written down once here
for the grader's checks and the lesson's pictures and statistics:

* a **cell** is a pair of horizontally adjacent pixels ``(y, 2bx)`` and ``(y, 2bx + 1)``;
  its **key** is ``y * cols + bx`` with ``cols = ceil(width / 2)``. Keys are ordered like
  the cells' first pixels in raster order, so the smallest key of a blob is the cell of
  its first pixel: numbering the roots by key gives ``scipy.ndimage.label``'s numbering.
* ``forest`` holds one entry per cell (``height * cols``): -1 for a cell without
  foreground, else the key of its parent (smaller than its own key) or its own key (a root).
* ``links`` holds one byte per 2x2 block ``(by, bx)`` (``ceil(height / 2) * cols``): bits
  0-3 say which of its pixels a b / c d are foreground, bits 4-7 which unions the merge
  must still make.
* 8-connectivity: a 2x2 block is one node (all its foreground pixels touch each other),
  kept at its first non-empty cell; its bottom cell links to its top cell. The node links
  to the first touching neighbour block (P up-left, Q up, R up-right, S left) inside the
  same tile; every other touching neighbour gets a union bit unless it touches one
  already joined (P-Q through pixels pd and qc, Q-R through qd and rc, P-S through pd
  and sb, Q-S through qc and sb).
* 4-connectivity: every cell is a node (its two pixels share an edge). A cell links to the
  cell above if they touch, else to the cell on its left if they touch (inside the tile);
  the other touching one gets a union bit unless the 2x2 square up-left of the cell's
  first pixel is full (then the cell above, the cell on the left and the one up-left are
  joined without it: Playne and Hawick's critical pixels).

A tile is ``tile = (x, y)`` blocks, the 2x2 blocks of one thread block: links never leave
it, so that following parents stays short.
"""

from __future__ import annotations

import numpy as np

PIXEL_A, PIXEL_B, PIXEL_C, PIXEL_D = 1, 2, 4, 8
PIXELS = PIXEL_A | PIXEL_B | PIXEL_C | PIXEL_D
UNION_P, UNION_Q, UNION_R, UNION_S = 16, 32, 64, 128  # 8-connectivity
UNION_UP, UNION_LEFT_TOP, UNION_LEFT_BOTTOM = 16, 32, 64  # 4-connectivity
UNIONS = {8: {"P": UNION_P, "Q": UNION_Q, "R": UNION_R, "S": UNION_S},
          4: {"UP": UNION_UP, "LEFT_TOP": UNION_LEFT_TOP, "LEFT_BOTTOM": UNION_LEFT_BOTTOM}}
# the neighbour blocks of 8-connectivity: (block row, block column) offsets
NEIGHBOURS = {"P": (-1, -1), "Q": (-1, 0), "R": (-1, 1), "S": (0, -1)}
NEIGHBOUR_NAMES = {"P": "up-left", "Q": "up", "R": "up-right", "S": "left"}


def sizes(shape) -> tuple[int, int, int]:
    """(block rows, cells per row = block columns, cells) of an image of ``shape``."""
    height, width = shape
    cols = (width + 1) // 2
    return (height + 1) // 2, cols, height * cols


class Pixels:
    """Foreground of an image, padded so that pixels outside it read as background."""

    def __init__(self, image: np.ndarray):
        self.height, self.width = image.shape
        self.rows, self.cols, self.cells = sizes(image.shape)
        self.padded = np.zeros((2 * self.rows + 3, 2 * self.cols + 4), bool)
        self.padded[2:2 + self.height, 2:2 + self.width] = image != 0

    def at(self, dy: int, dx: int) -> np.ndarray:
        """Pixel (2by + dy, 2bx + dx) of every block (by, bx), as a (rows, cols) array."""
        return self.padded[2 + dy:2 + dy + 2 * self.rows:2, 2 + dx:2 + dx + 2 * self.cols:2]


def _blocks(pixels: Pixels, tile):
    by, bx = np.mgrid[0:pixels.rows, 0:pixels.cols]
    top = 2 * by * pixels.cols + bx
    return top, top + pixels.cols, bx % tile[0], by % tile[1]


def init_8(image: np.ndarray, tile, order: str = "PQRS") -> tuple[np.ndarray, np.ndarray]:
    """``(forest, links)`` of the lesson's 8-connected init (a node per 2x2 block); ``order``
    is the order in which a block picks the neighbour it links to (the lesson's: P Q R S)."""
    px = Pixels(image)
    a, b, c, d = px.at(0, 0), px.at(0, 1), px.at(1, 0), px.at(1, 1)
    pd, qc, qd, rc, sb, sd = (px.at(-1, -1), px.at(-1, 0), px.at(-1, 1), px.at(-1, 2),
                              px.at(0, -1), px.at(1, -1))
    top, bottom, tx, ty = _blocks(px, tile)
    cols = px.cols
    node = np.where(a | b, top, bottom)
    touch = {"P": a & pd, "Q": (a | b) & (qc | qd), "R": b & rc, "S": (a | c) & (sb | sd)}
    inside = {"P": (tx > 0) & (ty > 0), "Q": ty > 0, "R": (ty > 0) & (tx < tile[0] - 1),
              "S": (tx > 0) & (sb | (node == bottom))}
    cell = {"P": top - cols - 1, "Q": top - cols, "R": top - cols + 1,
            "S": np.where(sb, top - 1, bottom - 1)}
    parent = node.copy()
    linked = np.full(node.shape, "", object)
    for name in order:
        take = touch[name] & inside[name] & (linked == "")
        parent = np.where(take, cell[name], parent)
        linked[take] = name
    done = {name: linked == name for name in "PQRS"}
    # a touching neighbour that touches one already joined needs no union
    joined_through = {"P": lambda: (done["Q"] & qc) | (done["S"] & sb),
                      "Q": lambda: (done["P"] & qc) | (done["R"] & qd) | (done["S"] & qc & sb),
                      "R": lambda: done["Q"] & qd,
                      "S": lambda: (done["P"] & sb) | (done["Q"] & qc & sb)}
    links = (a * PIXEL_A | b * PIXEL_B | c * PIXEL_C | d * PIXEL_D).astype(np.uint8)
    for name in "PQRS":
        need = touch[name] & ~done[name] & ~joined_through[name]()
        links |= np.where(need, UNIONS[8][name], 0).astype(np.uint8)
        done[name] = done[name] | touch[name]
    forest = np.full((px.rows, 2, cols), -1, np.int64)
    forest[:, 0] = np.where(a | b, parent, -1)
    forest[:, 1] = np.where(c | d, np.where(a | b, top, parent), -1)
    return forest.reshape(-1)[:px.cells], links.reshape(-1)


def init_4(image: np.ndarray, tile) -> tuple[np.ndarray, np.ndarray]:
    """``(forest, links)`` of the lesson's 4-connected init (a node per cell)."""
    px = Pixels(image)
    top, _, tx, ty = _blocks(px, tile)
    cols = px.cols
    forest = np.full((px.rows, 2, cols), -1, np.int64)
    links = np.zeros((px.rows, cols), np.uint8)
    for r in range(2):
        a, b = px.at(r, 0), px.at(r, 1)
        key = top + r * cols
        up = (a & px.at(r - 1, 0)) | (b & px.at(r - 1, 1))
        left = a & px.at(r, -1)
        square = px.at(r - 1, -1) & px.at(r - 1, 0)
        up_inside = (ty > 0) | (r == 1)
        link_up = up & up_inside
        link_left = ~link_up & left & (tx > 0)
        forest[:, r] = np.where(a | b, np.where(link_up, key - cols,
                                                np.where(link_left, key - 1, key)), -1)
        need_up = up & ~link_up & ~(left & square & link_left)
        need_left = left & ~link_left & ~(up & square)
        links |= ((a * PIXEL_A | b * PIXEL_B) << (2 * r)).astype(np.uint8)
        links |= np.where(need_up, UNION_UP, 0).astype(np.uint8)  # never for r == 1
        links |= np.where(need_left, UNION_LEFT_TOP if r == 0 else UNION_LEFT_BOTTOM,
                          0).astype(np.uint8)
    return forest.reshape(-1)[:px.cells], links.reshape(-1)


def init(image: np.ndarray, connectivity: int, tile) -> tuple[np.ndarray, np.ndarray]:
    """``(forest, links)`` of the lesson's block init for ``connectivity``."""
    return (init_8 if connectivity == 8 else init_4)(image, tile)


def union_pairs(forest: np.ndarray, links: np.ndarray, shape, connectivity: int) -> dict:
    """The unions that ``links`` asks for, by name: arrays ``(block, cell, other cell)``.

    ``block`` is the block's index ``by * cols + bx``; ``other cell`` is -1 where the
    neighbour lies outside the image. Under 8-connectivity ``cell`` is the block's node and
    the S union joins S's top cell, or its bottom one if the top one is empty."""
    rows, cols, cells = sizes(shape)
    links = np.asarray(links).reshape(-1).astype(np.int64)
    block = np.arange(rows * cols)
    by, bx = np.divmod(block, cols)
    top = 2 * by * cols + bx
    bottom = top + cols

    def cell_at(key, ok):
        return np.where(ok & (key >= 0) & (key < cells), key, -1)

    first_col, first_row, last_col = bx == 0, by == 0, bx == cols - 1
    if connectivity == 8:
        node = np.where(links & (PIXEL_A | PIXEL_B), top, bottom)
        s_top = cell_at(top - 1, ~first_col)
        s_empty = np.where(s_top >= 0, forest[np.maximum(s_top, 0)] < 0, True)
        s_cell = np.where(s_empty, cell_at(bottom - 1, ~first_col), s_top)
        others = {"P": cell_at(top - cols - 1, ~first_row & ~first_col),
                  "Q": cell_at(top - cols, ~first_row),
                  "R": cell_at(top - cols + 1, ~first_row & ~last_col), "S": s_cell}
        mine = {name: node for name in others}
    else:
        others = {"UP": cell_at(top - cols, ~first_row), "LEFT_TOP": cell_at(top - 1, ~first_col),
                  "LEFT_BOTTOM": cell_at(bottom - 1, ~first_col)}
        mine = {"UP": top, "LEFT_TOP": top, "LEFT_BOTTOM": bottom}
    pairs = {}
    for name, bit in UNIONS[connectivity].items():
        sel = (links & bit) != 0
        pairs[name] = (block[sel], mine[name][sel], others[name][sel])
    return pairs


def _smallest_keys(forest: np.ndarray, joins) -> np.ndarray:
    """The smallest key of every cell's component once the forest's links and ``joins``
    (pairs of arrays of cells) are made; -1 for empty cells."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    forest = np.asarray(forest).reshape(-1).astype(np.int64)
    cells = forest.size
    keys = np.arange(cells)
    valid = forest >= 0
    src, dst = [keys[valid]], [forest[valid]]
    for mine, other in joins:
        ok = (other >= 0) & (mine >= 0)
        src.append(mine[ok])
        dst.append(other[ok])
    src, dst = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(cells, cells))
    _, comp = connected_components(graph, directed=False)
    first = np.full(cells, cells, np.int64)
    np.minimum.at(first, comp[valid], keys[valid])
    return np.where(valid, first[comp], -1)


def components(forest: np.ndarray, links: np.ndarray, shape, connectivity: int) -> np.ndarray:
    """The component of every cell once the forest's links and the unions are made (-1 for
    empty cells); components are numbered by their smallest key, in key order."""
    pairs = union_pairs(forest, links, shape, connectivity).values()
    root = _smallest_keys(forest, [(mine, other) for _, mine, other in pairs])
    valid = root >= 0
    is_root = valid & (root == np.arange(root.size))
    rank = np.cumsum(is_root) - is_root
    return np.where(valid, rank[np.maximum(root, 0)], -1)


def tile_roots(image: np.ndarray, connectivity: int, tile) -> tuple[np.ndarray, np.ndarray]:
    """``(roots, links)`` after the fused init of lesson 05: the init's links and the unions
    whose two cells lie in one tile are made, every cell gets the smallest key of its
    component inside its tile (-1 for empty cells), and ``links`` keeps only the union bits
    that cross tiles."""
    forest, links = init(image, connectivity, tile)
    _, cols, _ = sizes(image.shape)
    flat = links.reshape(-1).copy()

    def tile_of(cell):
        by, bx = cell // cols // 2, cell % cols
        return (by // tile[1]) * (cols // tile[0] + 1) + bx // tile[0]

    joins = []
    for name, (block, mine, other) in union_pairs(forest, links, image.shape,
                                                  connectivity).items():
        inside = (other >= 0) & (tile_of(mine) == tile_of(np.maximum(other, 0)))
        flat[block[inside]] &= ~np.uint8(UNIONS[connectivity][name])
        joins.append((mine[inside], other[inside]))
    return _smallest_keys(forest, joins), flat.reshape(links.shape)


def labels_from_cells(cell_labels: np.ndarray, image: np.ndarray) -> np.ndarray:
    """Pixel labels (2-D, background 0) from one label per cell (-1 for empty cells)."""
    height, width = image.shape
    _, cols, _ = sizes(image.shape)
    per_cell = np.asarray(cell_labels).reshape(height, cols)
    return np.where(image != 0, np.repeat(per_cell, 2, axis=1)[:, :width] + 1, 0)


def label(image: np.ndarray, connectivity: int, tile) -> tuple[np.ndarray, int]:
    """Labels 1..K (scipy's numbering) through the model: init, unions, numbering by key."""
    forest, links = init(image, connectivity, tile)
    comp = components(forest, links, image.shape, connectivity)
    return labels_from_cells(comp, image), int(comp.max() + 1) if comp.size else 0


# --- the per-pixel union-find of the lesson, for comparison ----------------------------------

def warp_loads(forest: np.ndarray, warp: int = 32) -> int:
    """Load requests of exercise 5's compress on ``forest`` (one thread per entry, ``warp``
    consecutive entries per warp): a warp loads as long as its longest walk takes, a load per
    step, plus the first load and the load that finds the root."""
    forest = np.asarray(forest).reshape(-1)
    _, steps = walks(forest)
    loads = np.where(forest >= 0, 2 + steps, 1)
    loads = np.concatenate([loads, np.zeros(-loads.size % warp, loads.dtype)])
    return int(loads.reshape(-1, warp).max(axis=1).sum())


def pixel_parents(image: np.ndarray, connectivity: int) -> np.ndarray:
    """The per-pixel init (flat): each foreground pixel's connected back neighbour (up-left,
    up, up-right or left) with the smallest index, or itself; -1 for background."""
    height, width = image.shape
    fg = np.zeros((height + 1, width + 2), bool)
    fg[1:, 1:-1] = image != 0
    index = np.arange(height * width).reshape(height, width)
    parent = np.where(image != 0, index, -1)
    steps = ((0, -1), (-1, 1), (-1, 0), (-1, -1))  # increasing priority: smaller index last
    for dy, dx in steps:
        if connectivity == 4 and dy != 0 and dx != 0:
            continue
        there = fg[1 + dy:1 + dy + height, 1 + dx:1 + dx + width]
        parent = np.where((image != 0) & there, index + dy * width + dx, parent)
    return parent.reshape(-1)


def walks(parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(roots, steps)``: the root each entry's parent chain ends at, and the number of
    steps it takes (-1 and 0 where the entry is -1), by pointer jumping."""
    parents = np.asarray(parents).reshape(-1).astype(np.int64)
    valid = parents >= 0
    keys = np.arange(parents.size)
    jump = np.where(valid, parents, keys)
    steps = (valid & (jump != keys)).astype(np.int64)
    while True:
        nxt = jump[jump]
        if np.array_equal(nxt, jump):
            break
        steps = steps + steps[jump] * (nxt != jump)
        jump = nxt
    return np.where(valid, jump, -1), steps


def chain_statistics(image: np.ndarray, connectivity: int, tile) -> dict:
    """What a compress pass costs after each init: nodes, roots, mean and longest walk; and
    the unions the block init leaves for the merge."""
    out = {}
    parents = pixel_parents(image, connectivity)
    for name, forest, unions in (
            ("per pixel", parents, None),
            ("blocks", *init(image, connectivity, tile))):
        roots, steps = walks(forest)
        valid = forest >= 0
        entry = {"entries": int(forest.size), "nodes": int(valid.sum()),
                 "roots": int((roots == np.arange(forest.size)).sum()),
                 "mean walk": float(steps[valid].mean()) if valid.any() else 0.0,
                 "longest walk": int(steps.max()) if steps.size else 0}
        if unions is not None:
            entry["unions"] = int(sum(np.count_nonzero(unions & bit)
                                      for bit in UNIONS[connectivity].values()))
        out[name] = entry
    return out
