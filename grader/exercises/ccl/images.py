"""Lesson 05's test images: random pixels at several densities, spirals and mazes (long
chains), combs (blobs that meet only at the far end), checkerboards (where 4 and 8 differ),
staircases and diagonal lines (links between 2x2 blocks in every direction, across the
corners of tiles), frames touching every border, tile-corner elbows, a single pixel, empty
and full images."""

from __future__ import annotations

import numpy as np


def random_image(rng: np.random.Generator, shape, p: float) -> np.ndarray:
    """Each pixel foreground with probability p."""
    return (rng.random(shape) < p).astype(np.uint8)


def spiral_image(shape) -> np.ndarray:
    """A one-pixel-wide path spiralling inwards from the top-left corner.

    The path keeps one background pixel between its turns, so it is a single
    blob under both connectivities whose two ends are as far apart as possible.
    """
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    y, x, dy, dx = 0, 0, 0, 1
    img[0, 0] = 1

    def free(yy, xx):
        return not (0 <= yy < h and 0 <= xx < w) or img[yy, xx] == 0

    def can_step(y, x, dy, dx):
        ny, nx = y + dy, x + dx
        if not (0 <= ny < h and 0 <= nx < w) or img[ny, nx]:
            return False
        # keep a gap: the pixel beyond, and the side pixels beyond, must be background
        return free(ny + dy, nx + dx) and free(ny + dy + dx, nx + dx + dy) and \
            free(ny + dy - dx, nx + dx - dy)

    turned = False
    while True:
        if can_step(y, x, dy, dx):
            y, x = y + dy, x + dx
            img[y, x] = 1
            turned = False
        elif not turned:
            dy, dx = dx, -dy  # turn clockwise
            turned = True
        else:
            break
    return img


def maze_image(rng: np.random.Generator, shape) -> np.ndarray:
    """A perfect maze: corridors (foreground) form one tree through the whole image."""
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    cells_y, cells_x = (h + 1) // 2, (w + 1) // 2
    seen = np.zeros((cells_y, cells_x), bool)
    stack = [(0, 0)]
    seen[0, 0] = True
    img[0, 0] = 1
    while stack:
        cy, cx = stack[-1]
        options = [(cy + dy, cx + dx) for dy, dx in ((0, 1), (1, 0), (0, -1), (-1, 0))
                   if 0 <= cy + dy < cells_y and 0 <= cx + dx < cells_x
                   and not seen[cy + dy, cx + dx]]
        if not options:
            stack.pop()
            continue
        ny, nx = options[rng.integers(len(options))]
        seen[ny, nx] = True
        img[cy + ny, cx + nx] = 1  # the wall between the two cells (2*cy + (ny - cy))
        img[2 * ny, 2 * nx] = 1
        stack.append((ny, nx))
    return img


def checker_image(shape) -> np.ndarray:
    """A checkerboard: single pixels under 4-connectivity, one blob under 8."""
    h, w = shape
    return ((np.add.outer(np.arange(h), np.arange(w)) % 2) == 0).astype(np.uint8)


def comb_image(shape) -> np.ndarray:
    """Teeth hanging down from nothing, joined only by the bottom row."""
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    img[:, ::2] = 1
    img[-1, :] = 1
    return img


def staircase_image(shape) -> np.ndarray:
    """A one-pixel-wide 4-connected staircase from the bottom-left corner up and right,
    again from the left border wherever it leaves the image: steps of one pixel right,
    then one up. One blob per stair under both connectivities."""
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    for start in range(h - 1, -1, -max(2, min(h, w))):
        y, x = start, 0
        while y >= 0 and x < w:
            img[y, x] = 1
            if x + 1 < w:
                img[y, x + 1] = 1
            y, x = y - 1, x + 1
    return img


def diagonals_image(shape) -> np.ndarray:
    """Diagonal lines in both directions, one pixel wide: blobs under 8-connectivity only
    (under 4-connectivity every pixel off a crossing is alone)."""
    h, w = shape
    y, x = np.mgrid[0:h, 0:w]
    return (((x + y) % 5 == 0) | ((x - y) % 7 == 0)).astype(np.uint8)


def elbows_image(shape) -> np.ndarray:
    """Three-pixel elbows (y - 1, x - 1), (y - 1, x), (y, x) at every y multiple of 8 and x
    multiple of 16: (y, x) is the first pixel of a tile of the block labelling (16 x 8 pixels
    in the simulator, 64 x 16 on a GPU), so its block links nowhere inside the tile and
    needs a union with the blocks up-left and up, which touch each other."""
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    for y in range(8, h, 8):
        for x in range(16, w, 16):
            img[y - 1, x - 1] = img[y - 1, x] = img[y, x] = 1
    return img


def dot_image(shape) -> np.ndarray:
    """A single foreground pixel, off the centre."""
    h, w = shape
    img = np.zeros((h, w), np.uint8)
    img[(2 * h) // 3, w // 3] = 1
    return img


def frame_image(rng: np.random.Generator, shape) -> np.ndarray:
    """A one-pixel frame touching every border around random pixels (p = 0.45)."""
    img = random_image(rng, shape, 0.45)
    img[0, :] = img[-1, :] = 1
    img[:, 0] = img[:, -1] = 1
    return img


def make_image(rng: np.random.Generator, kind: str, shape) -> np.ndarray:
    """The test image of ``kind``: "random P", "spiral", "maze", "checker", ..."""
    if kind.startswith("random"):
        return random_image(rng, shape, float(kind.split()[1]))
    if kind == "spiral":
        return spiral_image(shape)
    if kind == "maze":
        return maze_image(rng, shape)
    if kind == "checker":
        return checker_image(shape)
    if kind == "comb":
        return comb_image(shape)
    if kind == "frame":
        return frame_image(rng, shape)
    if kind == "staircase":
        return staircase_image(shape)
    if kind == "diagonals":
        return diagonals_image(shape)
    if kind == "dot":
        return dot_image(shape)
    if kind == "elbows":
        return elbows_image(shape)
    if kind == "empty":
        return np.zeros(shape, np.uint8)
    if kind == "full":
        return np.ones(shape, np.uint8)
    raise ValueError(f"unknown image kind {kind!r}")
