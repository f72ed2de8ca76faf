"""Diagnoses of the block labelling's init (exercise 11): its forest and links against the
rules of ``workbook.ccl_blocks``, which the lesson states, and against scipy's blobs."""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises.ccl.references import scipy_labels
from workbook import ccl_blocks as cb

GONE = -7  # what the outputs hold before the kernel writes them


def _block_pixel_pairs(name: str):
    """(X pixel, neighbour pixel) offsets, each (dy, dx) from X's top-left pixel, of the
    pixel pairs that can touch between block X and its neighbour ``name`` (8-connectivity)."""
    dby, dbx = cb.NEIGHBOURS[name]
    pairs = []
    for i in range(2):
        for j in range(2):
            for k in range(2):
                for m in range(2):
                    y, x = 2 * dby + k, 2 * dbx + m
                    if max(abs(y - i), abs(x - j)) == 1:
                        pairs.append(((i, j), (y, x)))
    return pairs


def touching(px: cb.Pixels, connectivity: int) -> dict:
    """Per direction, whether each block (8-connectivity) or each cell (4: a (rows, 2, cols)
    array, top and bottom cells) touches its neighbour there."""
    if connectivity == 8:
        out = {}
        for name in cb.NEIGHBOURS:
            hit = np.zeros((px.rows, px.cols), bool)
            for (i, j), (y, x) in _block_pixel_pairs(name):
                hit |= px.at(i, j) & px.at(y, x)
            out[name] = hit
        return out
    up = np.stack([(px.at(r, 0) & px.at(r - 1, 0)) | (px.at(r, 1) & px.at(r - 1, 1))
                   for r in range(2)], axis=1)
    left = np.stack([px.at(r, 0) & px.at(r, -1) for r in range(2)], axis=1)
    return {"UP": up, "LEFT": left}


def _cells_of(shape, rows_cells):
    """A (rows, 2, cols) array over the blocks' cells, flattened to one entry per cell."""
    h = shape[0]
    return np.asarray(rows_cells).reshape(-1)[:h * ((shape[1] + 1) // 2)]


def _cell_text(key: int, cols: int, width: int) -> str:
    y, bx = divmod(int(key), cols)
    right = f" and ({y},{2 * bx + 1})" if 2 * bx + 1 < width else ""
    return f"cell {int(key)} (pixels ({y},{2 * bx}){right})"


def _block_text(block: int, cols: int) -> str:
    by, bx = divmod(int(block), cols)
    return f"block ({by},{bx}) (rows {2 * by}-{2 * by + 1}, columns {2 * bx}-{2 * bx + 1})"


def explain_block_links(forest, links, image, connectivity: int, tile=None) -> None:
    """Raise Mismatch unless ``forest`` and ``links`` (the block init's outputs) follow the
    lesson's rules: pixel bits, links to smaller keys of the same blob, unions with touching
    neighbours, and, once the links and unions are made, exactly scipy's blobs. With
    ``tile`` (the simulator) also: links stay inside the tile, and no union is flagged that
    the lesson's rule skips (one for a neighbour that touches the block's parent, or one
    inside the tile where the block made no link)."""
    forest = np.asarray(forest).reshape(-1).astype(np.int64)
    links = np.asarray(links).reshape(-1).astype(np.int64)
    h, w = image.shape
    px = cb.Pixels(image)
    cols, cells = px.cols, px.cells
    keys = np.arange(cells)
    a, b, c, d = px.at(0, 0), px.at(0, 1), px.at(1, 0), px.at(1, 1)
    want_bits = (a * cb.PIXEL_A | b * cb.PIXEL_B | c * cb.PIXEL_C | d * cb.PIXEL_D).reshape(-1)
    wrong = np.flatnonzero((links & cb.PIXELS) != want_bits)
    if wrong.size:
        k = wrong[0]
        never = " (never written?)" if links[k] == int(L.poison_value(np.uint8)) else ""
        raise Mismatch(f"links of {_block_text(k, cols)}: pixel bits {int(links[k]) & 15:04b}, "
                       f"but the image has {int(want_bits[k]):04b}{never} (bits d c b a: "
                       f"PIXEL_A = 1 is the top-left pixel){' ...' if wrong.size > 1 else ''}")
    nonempty = _cells_of(image.shape, np.stack([a | b, c | d], axis=1))
    for bad, why in ((forest == GONE, "was never written: each block writes both of its cells "
                                      "(-1 for an empty one)"),
                     (~nonempty & (forest != -1), "has no foreground pixel but holds {v}: an "
                                                  "empty cell holds -1"),
                     (nonempty & (forest < 0), "has a foreground pixel but holds {v}: it must "
                                               "link to a parent or to itself")):
        where = np.flatnonzero(bad)
        if where.size:
            k = where[0]
            raise Mismatch(f"forest: {_cell_text(k, cols, w)} {why.format(v=forest[k])} "
                           f"({where.size} cells)")
    larger = np.flatnonzero(nonempty & (forest > keys))
    if larger.size:
        k = larger[0]
        raise Mismatch(
            f"forest: {_cell_text(k, cols, w)} links to {_cell_text(forest[k], cols, w)}, a "
            "larger key: links go to smaller keys, so that every root is its blob's first cell "
            "(and no two cells can link to each other in a loop)")
    labels, _ = scipy_labels(image, connectivity)
    padded = np.zeros((h, 2 * cols), np.int64)
    padded[:, :w] = labels
    cell_blob = padded.reshape(h, cols, 2).max(axis=2).reshape(-1)
    linked = nonempty & (forest != keys)
    other = np.flatnonzero(linked & (cell_blob[np.maximum(forest, 0)] != cell_blob))
    if other.size:
        k = other[0]
        raise Mismatch(f"forest: {_cell_text(k, cols, w)} links to "
                       f"{_cell_text(forest[k], cols, w)}, which is in another blob (or empty): "
                       "link only to a neighbour that touches")
    touch = touching(px, connectivity)
    pairs = cb.union_pairs(forest, links, image.shape, connectivity)
    for name, (blocks, _, theirs) in pairs.items():
        outside = theirs < 0
        if outside.any():
            k = blocks[outside][0]
            raise Mismatch(f"links of {_block_text(k, cols)} ask for a union {name} with a "
                           "neighbour outside the image")
        if connectivity == 8:
            ok = touch[name].reshape(-1)[blocks]
        else:
            direction = "UP" if name == "UP" else "LEFT"
            ok = touch[direction].reshape(-1, 2, cols)[:, 0 if name != "LEFT_BOTTOM" else 1]
            ok = ok.reshape(-1)[blocks]
        if not ok.all():
            k = blocks[~ok][0]
            raise Mismatch(f"links of {_block_text(k, cols)} ask for a union {name} "
                           f"({cb.NEIGHBOUR_NAMES.get(name, name.lower().replace('_', ' '))}), "
                           "but that neighbour does not touch it")
    comp = cb.components(forest, links, image.shape, connectivity)
    _explain_split(comp, px, touch, connectivity, w)
    blob_of = np.zeros(max(int(comp.max(initial=-1)) + 1, 1), np.int64)
    blob_of[comp[nonempty]] = cell_blob[nonempty]  # one of each component's blobs
    joined = np.flatnonzero(nonempty & (blob_of[np.maximum(comp, 0)] != cell_blob))
    if joined.size:
        k = joined[0]
        raise Mismatch(f"{_cell_text(k, cols, w)} ends up joined with a cell of another blob")
    if tile is not None:
        _explain_block_efficiency(forest, links, px, connectivity, tile, w)


def _explain_split(comp, px, touch, connectivity, width) -> None:
    """Name a touching pair of blocks (or cells) that the links and unions leave apart."""
    rows, cols = px.rows, px.cols
    comp3 = np.full((rows, 2, cols), -1, np.int64)
    comp3.reshape(-1)[:comp.size] = comp
    if connectivity == 8:
        top, bottom = comp3[:, 0], comp3[:, 1]
        node = np.where(top >= 0, top, bottom)
        split = (top >= 0) & (bottom >= 0) & (top != bottom)
        if split.any():
            by, bx = np.argwhere(split)[0]
            raise Mismatch(f"{_block_text(by * cols + bx, cols)}: its bottom cell is not joined "
                           "to its top cell (under 8-connectivity a block is one node: link the "
                           "bottom cell to the top one when both have foreground)")
        padded = np.full((rows + 2, cols + 2), -1, np.int64)
        padded[1:-1, 1:-1] = node
        for name, (dby, dbx) in cb.NEIGHBOURS.items():
            there = padded[1 + dby:1 + dby + rows, 1 + dbx:1 + dbx + cols]
            apart = touch[name] & (there != node)
            if apart.any():
                by, bx = np.argwhere(apart)[0]
                (i, j), (y, x) = next(
                    ((p, q) for p, q in _block_pixel_pairs(name)
                     if px.at(*p)[by, bx] and px.at(*q)[by, bx]))
                flag = {"P": "UNION_P", "Q": "UNION_Q", "R": "UNION_R", "S": "UNION_S"}[name]
                raise Mismatch(
                    f"{_block_text(by * cols + bx, cols)} touches its neighbour {name} "
                    f"({cb.NEIGHBOUR_NAMES[name]}) at pixels ({2 * by + i},{2 * bx + j}) and "
                    f"({2 * by + y},{2 * bx + x}), but they end up apart: neither a link to {name} "
                    f"nor {flag}, and nothing else joins them (is direction {name} missing, or "
                    f"a union skipped although the neighbour it touches was not joined?)")
        return
    flat = comp3.reshape(2 * rows, cols)  # one row of cells per pixel row
    for name in ("UP", "LEFT"):
        there = np.full_like(flat, -1)
        if name == "UP":
            there[1:] = flat[:-1]
        else:
            there[:, 1:] = flat[:, :-1]
        apart = touch[name].reshape(2 * rows, cols) & (there != flat)
        if apart.any():
            y, bx = np.argwhere(apart)[0]
            k = y * cols + bx
            neighbour = k - cols if name == "UP" else k - 1
            raise Mismatch(
                f"{_cell_text(k, cols, width)} touches {_cell_text(neighbour, cols, width)} "
                f"({'above' if name == 'UP' else 'on its left'}), but they end up apart: "
                "neither linked nor joined by a union")


def _explain_block_efficiency(forest, links, px, connectivity, tile, width) -> None:
    """The simulator's checks of what the init costs later (on a GPU: the metric rule)."""
    rows, cols, cells = px.rows, px.cols, px.cells
    keys = np.arange(cells)
    nonempty = forest >= 0
    linked = np.flatnonzero(nonempty & (forest != keys))
    by = (keys // cols) // 2
    bx = keys % cols
    away = linked[((bx[linked] // tile[0]) != (bx[forest[linked]] // tile[0]))
                  | ((by[linked] // tile[1]) != (by[forest[linked]] // tile[1]))]
    if away.size:
        k = away[0]
        raise Mismatch(
            f"the results are right, but {_cell_text(k, cols, width)} links to "
            f"{_cell_text(forest[k], cols, width)} in another tile (a thread block covers "
            f"{tile[0]} x {tile[1]} blocks): chains that leave the tile make compress walk "
            f"across the image. Link inside the tile only (first_row, first_col, last_col), "
            f"and flag a union for a touching neighbour outside it ({away.size} such links)")
    if connectivity != 8:
        return
    top = 2 * (np.arange(rows * cols) // cols) * cols + np.arange(rows * cols) % cols
    node = np.where(links & (cb.PIXEL_A | cb.PIXEL_B), top, top + cols)
    node = np.minimum(node, cells - 1)
    parent = forest[node]
    # the direction of each block's parent: its block relative to the node's block
    pby, pbx = (np.maximum(parent, 0) // cols) // 2, np.maximum(parent, 0) % cols
    nby, nbx = (top // cols) // 2, top % cols
    direction = np.full(node.shape, "", object)
    for name, (dby, dbx) in cb.NEIGHBOURS.items():
        direction[(parent >= 0) & (parent != node) & (pby - nby == dby) & (pbx - nbx == dbx)] = name
    pd, qc, qd, rc, sb = (px.at(-1, -1), px.at(-1, 0), px.at(-1, 1), px.at(-1, 2), px.at(0, -1))
    seen = {("P", "Q"): pd & qc, ("Q", "R"): qd & rc, ("P", "S"): pd & sb, ("Q", "S"): qc & sb}
    through = {"P": "pd", "Q": "qc", "R": "rc", "S": "sb"}
    inside = {"P": (nbx % tile[0] > 0) & (nby % tile[1] > 0), "Q": nby % tile[1] > 0,
              "R": (nby % tile[1] > 0) & (nbx % tile[0] < tile[0] - 1),
              "S": (nbx % tile[0] > 0) & (sb.reshape(-1) | (node != top))}
    for name, bit in cb.UNIONS[8].items():
        flagged = (links & bit) != 0
        for pair, adjacent in seen.items():
            if name not in pair:
                continue
            parent_dir = pair[0] if pair[1] == name else pair[1]
            hit = flagged & (direction == parent_dir) & adjacent.reshape(-1)
            if hit.any():
                k = np.flatnonzero(hit)[0]
                raise Mismatch(
                    f"the results are right, but {_block_text(k, cols)} flags a union with "
                    f"{name} although {name} touches {parent_dir}, the block it links to "
                    f"(through pixels {through[pair[0]]} and {through[pair[1]]} in "
                    f"{'-'.join(pair)}): the forest joins them anyway; skip that union")
        hit = flagged & (direction == name)
        if hit.any():
            k = np.flatnonzero(hit)[0]
            raise Mismatch(f"the results are right, but {_block_text(k, cols)} flags a union "
                           f"with {name}, the block it already links to")
        hit = flagged & (direction == "") & inside[name]
        if hit.any():
            k = np.flatnonzero(hit)[0]
            raise Mismatch(
                f"the results are right, but {_block_text(k, cols)} flags a union with {name} "
                f"although {name} lies inside its tile and the block links to nothing: link "
                "to the first touching neighbour inside the tile (a plain store) instead of "
                "leaving it to an atomic union")
