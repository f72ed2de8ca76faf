"""Lesson 05 (connected-component labelling): test images, references, checks and tests.

Labels are compared with ``scipy.ndimage.label``. Until the compaction exercise,
a GPU labelling is right when it induces the same partition of the foreground
*and* every pixel holds the linear index of its blob's first pixel (raster
order), the blob's smallest index: that is what a union-find that always links
the larger root below the smaller one produces, and what label propagation
converges to. After compaction the labels must equal scipy's exactly.

Test images: random pixels at several densities (around the percolation
thresholds, about 0.59 for 4- and 0.41 for 8-connectivity), spirals and mazes
(long chains), combs (blobs that meet only at the far end), checkerboards
(where 4 and 8 differ), staircases and diagonal lines (links between 2x2 blocks in
every direction, across the corners of tiles), frames touching every border, empty
and full images, a single pixel, single rows and columns, odd sizes and sizes one
pixel around the edges of thread blocks and tiles. Simulator sizes stay tiny because
every CUDA thread is a Python thread there.

The block-based labelling (exercises 11 and 12) is checked against scipy and against
the rules of ``workbook.ccl_blocks``, which the lesson states.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence

import numpy as np

from grader import launch as L
from grader.exercise import Case, Exercise, Mismatch, with_metric_rules
from grader.metric_rules import MetricRule
from workbook import ccl_blocks as cb

LESSON = "05_ccl"
BLOCK = {"sim": (8, 4), "gpu": (32, 8)}  # threads per block (x, y) unless the notebook says
INT32_MAX = np.iinfo(np.int32).max


# --- test images -------------------------------------------------------------------------------

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


# --- references --------------------------------------------------------------------------------

def structure(connectivity: int) -> np.ndarray:
    from scipy import ndimage

    return ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)


def scipy_labels(image: np.ndarray, connectivity: int) -> tuple[np.ndarray, int]:
    """scipy.ndimage.label: blobs numbered 1..K in raster order of their first pixel."""
    from scipy import ndimage

    labels, count = ndimage.label(image, structure(connectivity))
    return labels.astype(np.int32), int(count)


def first_pixel_labels(image: np.ndarray, connectivity: int) -> np.ndarray:
    """Flat int32 array: each foreground pixel holds the linear index of its blob's first
    pixel (its smallest index); background holds -1."""
    labels, count = scipy_labels(image, connectivity)
    flat = labels.ravel()
    first = np.full(count + 1, -1, np.int32)
    values, index = np.unique(flat, return_index=True)  # index of each label's first pixel
    first[values] = index
    first[0] = -1
    return first[flat]


def runs_reference(image: np.ndarray) -> np.ndarray:
    """(row, start, stop) of every horizontal run of foreground, raster order, stop exclusive."""
    h, w = image.shape
    padded = np.zeros((h, w + 2), np.int8)
    padded[:, 1:-1] = image != 0
    edges = np.diff(padded, axis=1)  # +1 where a run starts, -1 one past its end
    rows, starts = np.nonzero(edges == 1)
    _, stops = np.nonzero(edges == -1)
    return np.stack([rows, starts, stops], axis=1).astype(np.int32).reshape(-1, 3)


STAT_NAMES = ("area", "xmin", "xmax", "ymin", "ymax", "xsum", "ysum")
STAT_FILL = {"area": 0, "xmin": INT32_MAX, "xmax": -1, "ymin": INT32_MAX, "ymax": -1,
             "xsum": 0, "ysum": 0}
STAT_DTYPE = {"xsum": np.int64, "ysum": np.int64}


def stats_reference(labels: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """Area, bounding box and coordinate sums of blobs 1..count (index k-1 for blob k)."""
    h, w = labels.shape
    ys, xs = np.nonzero(labels)
    k = labels[ys, xs] - 1
    out = {name: np.full(count, STAT_FILL[name], STAT_DTYPE.get(name, np.int32))
           for name in STAT_NAMES}
    out["area"] = np.bincount(k, minlength=count).astype(np.int32)
    np.minimum.at(out["xmin"], k, xs.astype(np.int32))
    np.maximum.at(out["xmax"], k, xs.astype(np.int32))
    np.minimum.at(out["ymin"], k, ys.astype(np.int32))
    np.maximum.at(out["ymax"], k, ys.astype(np.int32))
    out["xsum"] = np.bincount(k, weights=xs, minlength=count).astype(np.int64)
    out["ysum"] = np.bincount(k, weights=ys, minlength=count).astype(np.int64)
    return out


# --- diagnostics -------------------------------------------------------------------------------

FORWARD = {4: ((0, 1), (1, 0)), 8: ((0, 1), (1, 0), (1, 1), (1, -1))}


def _pix(flat_index: int, width: int) -> str:
    return f"({flat_index // width},{flat_index % width})"


def _block_of(y: int, x: int, block) -> tuple[int, int]:
    return (int(x) // block[0], int(y) // block[1])


def _where(p, q, block) -> str:
    if block is None:
        return ""
    bp, bq = _block_of(*p, block), _block_of(*q, block)
    if bp != bq:
        return (f" (they lie in different thread blocks, {bp} and {bq} as (x, y) with "
                f"BLOCK = {tuple(block)}: a merge lost at a block boundary?)")
    return f" (both in thread block {bp} with BLOCK = {tuple(block)})"


def explain_partition(got: np.ndarray, image: np.ndarray, connectivity: int, background: int,
                      block=None, missing_hint: str = "a missing merge") -> None:
    """Raise Mismatch unless ``got`` (2-D) groups the foreground exactly like scipy does.

    ``background`` is the value background pixels must hold.
    """
    fg = image != 0
    h, w = image.shape
    bad = np.argwhere(~fg & (got != background))
    if bad.size:
        y, x = bad[0]
        raise Mismatch(f"background pixel ({y},{x}) got label {int(got[y, x])}; background must "
                       f"stay {background} ({len(bad)} such pixels)")
    bad = np.argwhere(fg & (got == background))
    if bad.size:
        y, x = bad[0]
        raise Mismatch(f"foreground pixel ({y},{x}) holds {background}, the background value: "
                       f"it was never labelled ({len(bad)} such pixels)")
    for dy, dx in FORWARD[connectivity]:
        ys = slice(0, h - dy)
        xa = slice(max(0, -dx), w - max(0, dx))
        xb = slice(max(0, dx), w - max(0, -dx))
        a, b = got[ys, xa], got[dy:, xb]
        both = fg[ys, xa] & fg[dy:, xb]
        split = np.argwhere(both & (a != b))
        if split.size:
            y, x = (int(v) for v in split[0])
            x += max(0, -dx)
            p, q = (y, x), (y + dy, x + dx)
            raise Mismatch(
                f"pixels {p} and {q} (row, column) are both foreground and "
                f"{connectivity}-adjacent but got labels {int(got[p])} and {int(got[q])}: "
                f"{missing_hint}{_where(p, q, block)}")
    ref, _ = scipy_labels(image, connectivity)
    values = got[fg].astype(np.int64)
    refs = ref[fg].astype(np.int64)
    pairs = np.unique(np.stack([values, refs], axis=1), axis=0)
    shared, counts = np.unique(pairs[:, 0], return_counts=True)
    if (counts > 1).any():
        label = shared[counts > 1][0]
        blobs = pairs[pairs[:, 0] == label, 1][:2]
        p = tuple(int(v) for v in np.argwhere((ref == blobs[0]) & (got == label))[0])
        q = tuple(int(v) for v in np.argwhere((ref == blobs[1]) & (got == label))[0])
        why = "a merge across background, or one label given to two roots?"
        if connectivity == 4:
            ref8, _ = scipy_labels(image, 8)
            if ref8[p] == ref8[q]:
                why = ("they connect only through diagonal steps: 8-neighbours used under "
                       "4-connectivity?")
        raise Mismatch(f"pixels {p} and {q} are in different blobs under {connectivity}-"
                       f"connectivity but both got label {int(label)}: {why}")


UNRESOLVED = ("after the final resolve every label must point straight at its root "
              "({count} pixels do not; is the last resolve/compress pass missing?)")


def explain_roots(labels: np.ndarray, image: np.ndarray, connectivity: int, block=None,
                  missing_hint: str = "a missing merge", unresolved: str = UNRESOLVED) -> None:
    """Check union-find style labels: flat, -1 for background, each foreground pixel holding
    the index of its blob's first pixel."""
    h, w = image.shape
    n = h * w
    flat = np.asarray(labels).reshape(-1)
    fg = image.reshape(-1) != 0
    out_of_range = np.flatnonzero(fg & ((flat < 0) | (flat >= n)))
    if out_of_range.size:
        i = out_of_range[0]
        raise Mismatch(f"foreground pixel {_pix(i, w)} holds {flat[i]}, not a pixel index in "
                       f"0..{n - 1}: it was never labelled ({out_of_range.size} such pixels)")
    safe = np.where(fg, flat, 0)
    not_root = np.flatnonzero(fg & (flat[safe] != safe))
    if not_root.size:
        i = not_root[0]
        v = flat[i]
        raise Mismatch(
            f"pixel {_pix(i, w)} holds {v}, but pixel {v} {_pix(v, w)} holds {flat[v]}: "
            + unresolved.format(count=not_root.size))
    explain_partition(flat.reshape(h, w), image, connectivity, -1, block, missing_hint)
    want = first_pixel_labels(image, connectivity)
    wrong = np.flatnonzero(flat != want)
    if wrong.size:
        i = wrong[0]
        raise Mismatch(
            f"pixel {_pix(i, w)}: its blob's root is pixel {flat[i]} {_pix(flat[i], w)}, but the "
            f"blob's first pixel (smallest index) is {want[i]} {_pix(want[i], w)}: link the larger "
            "root below the smaller one, so that the root is always the smallest index")


def explain_consecutive(got: np.ndarray, count, image: np.ndarray, connectivity: int) -> None:
    """Check compacted labels: exactly scipy's (1..K in raster order of the first pixel)."""
    ref, want_count = scipy_labels(image, connectivity)
    h, w = image.shape
    got = np.asarray(got).reshape(h, w)
    fg = image != 0
    if fg.any() and np.array_equal(got[fg], ref[fg] - 1):
        raise Mismatch("every label is one less than scipy's: blob labels start at 1 "
                       "(0 is the background), i.e. rank + 1")
    if fg.any() and np.array_equal(got[fg], ref[fg] + 1):
        raise Mismatch("every label is one more than scipy's: an inclusive scan where the "
                       "exclusive one is needed (a root's rank counts the roots before it)?")
    explain_partition(got, image, connectivity, 0)
    wrong = np.argwhere(got != ref)
    if wrong.size:
        y, x = wrong[0]
        raise Mismatch(
            f"pixel ({y},{x}): expected label {ref[y, x]}, got {got[y, x]} "
            f"({len(wrong)} pixels differ). Blobs are numbered 1..K in raster order of their "
            "first pixel: the rank of each root among all roots, plus one")
    if int(count) != want_count:
        raise Mismatch(f"the labels are right but the returned count is {count}, expected "
                       f"{want_count} blobs")


def explain_stats(got: dict, want: dict, labels: np.ndarray) -> None:
    count = len(want["area"])
    for name in STAT_NAMES:
        g = np.asarray(got[name]).reshape(-1)
        if g.shape != want[name].shape:
            raise Mismatch(f"{name}: expected {count} entries, got {g.shape}")
        wrong = np.flatnonzero(g != want[name])
        if wrong.size:
            k = wrong[0]
            ys, xs = np.nonzero(labels == k + 1)
            hint = ""
            if name in ("area", "xsum", "ysum") and (g[wrong] < want[name][wrong]).all():
                hint = (" Every wrong value is too small: lost updates (a plain += where "
                        "cuda.atomic.add is needed, or a partial never added)?")
            elif name in ("xmin", "ymin", "xmax", "ymax") and \
                    (g[wrong] == STAT_FILL[name]).all():
                hint = " The value was never updated."
            raise Mismatch(
                f"{name} of blob {k + 1} (first pixel ({ys[0]},{xs[0]}), {len(ys)} pixels): "
                f"expected {want[name][k]}, got {g[k]} ({wrong.size} of {count} blobs "
                f"wrong).{hint}")


# --- simulator: race checks between blocks ---------------------------------------------------

class _WatchedKernel:
    """Stands in for a kernel in the notebook namespace while the student's host code runs:
    each launch watches every device array it is given for races between blocks."""

    def __init__(self, kernel):
        self._kernel = kernel
        try:
            self._names = list(inspect.signature(kernel.py_func).parameters)
        except (AttributeError, TypeError, ValueError):
            self._names = []

    def __getitem__(self, config):
        from workbook.sim.global_races import watch

        launcher = self._kernel[config]

        def launch(*args):
            watched = []
            for k, arg in enumerate(args):
                if hasattr(arg, "copy_to_host") and hasattr(arg, "__dict__"):
                    name = self._names[k] if k < len(self._names) else f"argument {k}"
                    watched.append((arg, arg.__dict__.get("_wb_log")))
                    watch(arg, name)
            try:
                return launcher(*args)
            finally:
                for arg, previous in watched:
                    if previous is None:
                        arg.__dict__.pop("_wb_log", None)
                    else:
                        arg.__dict__["_wb_log"] = previous

        return launch

    def __getattr__(self, attr):
        return getattr(self._kernel, attr)


@contextlib.contextmanager
def _watching(ns, kernel_names, mode: str):
    """While the student's host code runs, launches of ``kernel_names`` (a name or several)
    are race-checked."""
    names = [kernel_names] if isinstance(kernel_names, str) else list(kernel_names)
    names = [name for name in names if name in ns] if mode == "sim" else []
    originals = {name: ns[name] for name in names}
    for name, kernel in originals.items():
        ns[name] = _WatchedKernel(kernel)
    try:
        yield
    finally:
        ns.update(originals)


@contextlib.contextmanager
def _counting_atomic_adds(array, counter: list):
    """Count the cuda.atomic.add calls on ``array`` (simulator only)."""
    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAAtomic
    add = cls.add

    def counted(self, ary, index, val):
        if getattr(ary, "__dict__", {}).get("_item") is array:  # shared arrays: numpy
            counter[0] += 1
        return add(self, ary, index, val)

    cls.add = counted
    try:
        yield
    finally:
        cls.add = add


# --- cases -------------------------------------------------------------------------------------

def _image_cases(specs: Sequence[tuple[str, tuple[int, int], int]]) -> tuple[Case, ...]:
    return tuple(Case(h * w, kind, note=f"{h}x{w}, {conn}-connectivity")
                 for kind, (h, w), conn in specs)


def _both(kind, shape):
    return [(kind, shape, 4), (kind, shape, 8)]


# The lesson's tile of the per-block statistics (TILE; its threads cover TILE // PIXELS
# runs of PIXELS pixels in each of TILE rows) in each mode.
STATS_TILE = {"sim": 8, "gpu": 32}


def edge_images(block: tuple[int, int]) -> list[tuple[str, tuple[int, int], int]]:
    """Two images at the edges of a 2-D launch whose blocks (or tiles) cover ``block`` =
    (x, y) pixels: one pixel row past one block row and one pixel short of two block
    columns (the last block's last thread column has no pixel; a bound ``x <= width``
    reads the next row's first pixel), and the transpose of that."""
    bx, by = block
    return [("random 0.5", (by + 1, 2 * bx - 1), 8), ("frame", (2 * by - 1, bx + 1), 4)]


SIM_EDGES = edge_images(BLOCK["sim"]) + edge_images((STATS_TILE["sim"],) * 2)

SIM_IMAGES = [
    ("random 0.3", (16, 16), 4), ("random 0.3", (12, 16), 8), ("random 0.41", (16, 16), 8),
    ("random 0.59", (16, 16), 4), ("random 0.59", (13, 11), 8), ("spiral", (12, 12), 4),
    ("maze", (13, 13), 8), *_both("checker", (8, 9)), ("comb", (9, 10), 4),
    ("frame", (12, 13), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8),
    ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8), ("full", (1, 1), 4),
    *SIM_EDGES,
]
# fewer images where every case launches several scans or uses many barriers
SIM_FEW = [
    ("random 0.3", (16, 16), 4), ("random 0.59", (13, 11), 8), ("spiral", (12, 12), 4),
    ("checker", (8, 9), 8), ("frame", (12, 13), 4), ("empty", (5, 7), 4),
    ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8), ("full", (1, 1), 4),
    *SIM_EDGES,
]
GPU_IMAGES = [
    *_both("random 0.3", (1024, 1024)), ("random 0.41", (1024, 1024), 8),
    ("random 0.5", (777, 1023), 4), ("random 0.59", (2048, 2048), 4),
    ("random 0.59", (1001, 999), 8), ("random 0.75", (1024, 1000), 4),
    *_both("spiral", (255, 255)), ("maze", (511, 511), 4), ("maze", (300, 401), 8),
    *_both("checker", (1000, 1001)), *_both("comb", (300, 301)), ("frame", (777, 555), 4),
    ("frame", (512, 512), 8), ("empty", (100, 100), 4), ("full", (1024, 1024), 8),
    ("random 0.6", (1, 100_000), 4), ("random 0.6", (100_000, 1), 8), ("full", (1, 1), 4),
]
# label propagation needs one sweep per pixel of the longest path through a blob
SIM_PROPAGATION = [
    ("random 0.3", (12, 12), 4), ("random 0.41", (10, 10), 8), ("random 0.59", (8, 9), 4),
    ("spiral", (6, 6), 4), ("maze", (7, 7), 8), *_both("checker", (6, 7)), ("comb", (5, 6), 4),
    ("frame", (7, 8), 8), ("empty", (3, 4), 4), ("random 0.6", (1, 12), 4),
    ("random 0.6", (12, 1), 8), ("full", (1, 1), 4), *edge_images(BLOCK["sim"]),
]
GPU_PROPAGATION = [
    *_both("random 0.3", (512, 512)), ("random 0.41", (512, 512), 8),
    ("random 0.59", (256, 256), 4), ("spiral", (63, 63), 4), ("maze", (127, 127), 8),
    *_both("checker", (300, 301)), ("comb", (100, 101), 4), ("frame", (300, 200), 8),
    ("empty", (100, 100), 4), ("random 0.6", (1, 10_000), 4), ("random 0.6", (10_000, 1), 8),
    ("full", (1, 1), 4),
]
# under compute-sanitizer every sweep is slow: the small images, and long single rows/columns
SANITIZER_PROPAGATION = [*SIM_PROPAGATION, ("random 0.6", (1, 10_000), 4),
                         ("random 0.6", (10_000, 1), 8)]
# the block labelling: a thread per 2x2 block, tiles of BLOCK blocks (16 x 8 pixels in the
# simulator, 64 x 16 on a GPU): images one pixel around a tile's edges, staircases and
# diagonals across tile corners, every density, a single pixel
TILE_PIXELS = {mode: (2 * bx, 2 * by) for mode, (bx, by) in BLOCK.items()}
SIM_BLOCKS = [
    ("random 0.1", (16, 16), 8), ("random 0.3", (17, 16), 4), ("random 0.41", (16, 17), 8),
    ("random 0.5", (13, 11), 4), ("random 0.59", (16, 16), 4), ("random 0.59", (15, 13), 8),
    ("random 0.9", (12, 17), 8), ("random 0.9", (11, 12), 4), *_both("staircase", (17, 33)),
    *_both("diagonals", (13, 18)), ("spiral", (12, 12), 4), ("spiral", (13, 14), 8),
    ("maze", (13, 13), 8), *_both("checker", (8, 9)), ("comb", (9, 10), 4),
    ("frame", (12, 13), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8), ("full", (9, 34), 4),
    ("dot", (7, 7), 8), ("random 0.6", (1, 16), 4), ("random 0.6", (16, 1), 8),
    ("full", (1, 1), 4), ("full", (1, 1), 8), ("random 0.7", (1, 33), 8),
    ("random 0.7", (2, 3), 8), *_both("elbows", (17, 33)), *edge_images(TILE_PIXELS["sim"]),
]
GPU_BLOCKS = [
    ("random 0.1", (1024, 1024), 8), ("random 0.3", (1024, 1024), 4),
    ("random 0.41", (1024, 1024), 8), ("random 0.5", (777, 1023), 4),
    ("random 0.59", (2048, 2048), 4), ("random 0.59", (1001, 999), 8),
    *_both("random 0.9", (1023, 1025)), *_both("staircase", (513, 1029)),
    *_both("diagonals", (700, 333)), ("spiral", (255, 255), 4), ("maze", (300, 401), 8),
    *_both("checker", (1000, 1001)), ("comb", (300, 301), 4), ("frame", (777, 555), 8),
    ("empty", (100, 100), 4), ("full", (1024, 1024), 8), ("dot", (99, 77), 8),
    ("random 0.6", (1, 100_000), 4), ("random 0.6", (100_000, 1), 8), ("full", (1, 1), 4),
    ("full", (1, 1), 8), *_both("elbows", (100, 300)), *edge_images(TILE_PIXELS["gpu"]),
]
# pure-Python exercises: the same moderate sizes in both modes
CPU_IMAGES = [
    *_both("random 0.3", (24, 24)), ("random 0.41", (20, 21), 8), ("random 0.59", (32, 32), 4),
    ("random 0.59", (17, 19), 8), *_both("spiral", (15, 15)), ("maze", (21, 21), 4),
    ("maze", (18, 17), 8), *_both("checker", (9, 10)), *_both("comb", (10, 11)),
    ("frame", (12, 13), 4), ("frame", (11, 16), 8), ("empty", (5, 7), 4), ("full", (7, 9), 8),
    ("random 0.6", (1, 40), 4), ("random 0.6", (40, 1), 8), ("full", (1, 1), 4),
]


def _parse(case: Case) -> tuple[tuple[int, int], int]:
    dims, conn = case.note.split(", ")
    h, w = (int(v) for v in dims.split("x"))
    return (h, w), int(conn.split("-")[0])


def make_image_inputs(rng: np.random.Generator, case: Case) -> dict:
    shape, conn = _parse(case)
    return {"image": make_image(rng, case.kind, shape), "connectivity": conn}


def _block(ns, mode):
    block = ns.get("BLOCK", BLOCK[mode])
    try:
        return tuple(int(v) for v in block)[:2]
    except TypeError:
        return BLOCK[mode]


# --- exercises 1-3: CPU references -------------------------------------------------------------

def _check_label_pair(result, what: str):
    if not (isinstance(result, tuple) and len(result) == 2):
        raise Mismatch(f"{what} must return a tuple (labels, count), got {type(result).__name__}")
    return np.asarray(result[0]), result[1]


def _run_flood(ns, inputs, mode):
    image = inputs["image"].copy()
    result = ns["flood_fill_label"](image, inputs["connectivity"])
    if not np.array_equal(image, inputs["image"]):
        raise Mismatch("flood_fill_label modified its input image")
    return _check_label_pair(result, "flood_fill_label")


def _run_run_labels(ns, inputs, mode):
    image = inputs["image"].copy()
    return _check_label_pair(ns["label_runs"](image, inputs["connectivity"]), "label_runs")


def _verify_cpu_labels(got, expected, inputs, mode):
    labels, count = got
    image = inputs["image"]
    if labels.shape != image.shape:
        raise Mismatch(f"labels have shape {labels.shape}, expected the image's {image.shape}")
    explain_consecutive(labels, count, image, inputs["connectivity"])


def _run_runs(ns, inputs, mode):
    return np.asarray(ns["extract_runs"](inputs["image"].copy()))


def _verify_runs(got, expected, inputs, mode):
    if got.size == 0 and expected.size == 0:
        return
    got = got.reshape(-1, 3) if got.size % 3 == 0 else got
    if got.ndim != 2 or got.shape[1] != 3:
        raise Mismatch(f"expected an array of shape (runs, 3), got shape {got.shape}")
    if len(got) != len(expected):
        raise Mismatch(f"expected {len(expected)} runs, got {len(got)}; first expected runs "
                       f"{expected[:3].tolist()}, got {got[:3].tolist()}")
    wrong = np.flatnonzero((got != expected).any(axis=1))
    if wrong.size:
        k = wrong[0]
        hint = ""
        if got[k, 2] == expected[k, 2] - 1:
            hint = " The stop is one short: stop is exclusive (one past the last pixel)."
        raise Mismatch(f"run {k}: expected (row, start, stop) = {tuple(expected[k].tolist())}, "
                       f"got {tuple(got[k].tolist())}.{hint}")


def _ref_none(inputs):
    return None


def _ref_runs(inputs):
    return runs_reference(inputs["image"])


# --- exercise 4: label propagation -------------------------------------------------------------

def _device_image(image):
    return L.cuda().to_device(np.ascontiguousarray(image.reshape(-1)))


def _run_propagation(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, -7, np.int32))
    sweeps = ns["propagation_label"](_device_image(image), d_labels, h, w,
                                     inputs["connectivity"])
    inputs["block"] = _block(ns, mode)
    inputs["sweeps"] = sweeps
    return d_labels.copy_to_host()


def _verify_propagation(got, expected, inputs, mode):
    explain_roots(got, inputs["image"], inputs["connectivity"], None,
                  "labels have not finished spreading (did the loop stop before a sweep "
                  "changed nothing?), or a neighbour was not examined",
                  "when nothing changes any more, every pixel of a blob holds the blob's "
                  "smallest index ({count} pixels do not: did the loop stop before a sweep "
                  "that changed nothing?)")
    sweeps = inputs["sweeps"]
    if not isinstance(sweeps, int | np.integer) or sweeps < 1:
        raise Mismatch(f"propagation_label must return the number of sweeps it launched "
                       f"(at least 1), got {sweeps!r}")


# --- exercise 5: union-find init and compress ---------------------------------------------------

def _threads(ns, mode) -> int:
    block = _block(ns, mode)
    try:
        return int(ns.get("THREADS", block[0] * block[1]))
    except (TypeError, ValueError):
        return block[0] * block[1]


def _run_uf_init(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    n = h * w
    block = _block(ns, mode)
    parents = L.output(n, -7, np.int32, "parents")
    roots = L.output(n, -7, np.int32, "roots")
    L.launch(ns["uf_init_kernel"], (L.blocks_for(w, block[0]), L.blocks_for(h, block[1])),
             block, _device_image(image), parents, h, w, inputs["connectivity"])
    got_parents = parents.copy_to_host()
    threads = _threads(ns, mode)
    L.launch(ns["uf_compress_kernel"], L.blocks_for(n, threads), threads, parents, roots, n)
    if not np.array_equal(parents.copy_to_host(), got_parents):
        raise Mismatch("uf_compress_kernel changed parents: it reads parents and writes roots")
    return got_parents, roots.copy_to_host()


def _ref_uf_init(inputs):
    parents = cb.pixel_parents(inputs["image"], inputs["connectivity"])
    return parents, cb.walks(parents)[0]


def _verify_uf_init(got, expected, inputs, mode):
    (parents, roots), (want_parents, want_roots) = got, expected
    w = inputs["image"].shape[1]
    wrong = np.flatnonzero(parents != want_parents)
    if wrong.size:
        i = wrong[0]
        got_i, want_i = int(parents[i]), int(want_parents[i])
        if got_i == -7:
            why = "it was never written (a bound too strict, or a thread that returns early?)"
        elif want_i == -1:
            why = "it is background: -1"
        elif want_i == i:
            why = "no back neighbour is connected: the pixel is its own root"
        else:
            why = (f"its connected back neighbour with the smallest index is {want_i} "
                   f"{_pix(want_i, w)}")
            if got_i >= 0 and got_i != i and got_i > want_i:
                why += " (a larger one was chosen)"
        raise Mismatch(f"uf_init_kernel: parents[{i}] (pixel {_pix(i, w)}) is {got_i}; {why} "
                       f"({wrong.size} pixels wrong)")
    wrong = np.flatnonzero(roots != want_roots)
    if wrong.size:
        i = wrong[0]
        got_i, want_i = int(roots[i]), int(want_roots[i])
        hint = ""
        if got_i == int(parents[i]) and got_i != want_i:
            hint = ": that is its parent; follow parents until parents[r] == r"
        elif want_i == -1:
            hint = ": background stays -1"
        raise Mismatch(f"uf_compress_kernel: roots[{i}] (pixel {_pix(i, w)}) is {got_i}, but its "
                       f"chain of parents ends at {want_i}{hint} ({wrong.size} pixels wrong)")


# --- exercise 6: union-find merge --------------------------------------------------------------

def _run_union_find(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, -7, np.int32))
    with _watching(ns, "uf_merge_kernel", mode):
        ns["union_find_label"](_device_image(image), d_labels, h, w, inputs["connectivity"])
    inputs["block"] = _block(ns, mode)
    return d_labels.copy_to_host()


def _verify_union_find(got, expected, inputs, mode):
    explain_roots(got, inputs["image"], inputs["connectivity"], inputs["block"],
                  "a missing merge (or merged roots never resolved back into labels)")


# --- exercise 7: exclusive scan ----------------------------------------------------------------

def _scan_cases(sizes):
    kinds = ("flags", "small integers")
    return tuple(Case(n, kinds[k % 2]) for k, n in enumerate(sizes))


SCAN_CASES = {
    "sim": _scan_cases((1, 5, 255, 256, 257, 1100)),
    "gpu": _scan_cases((1, 5, 1000, 4096, 4097, 100_000, 1 << 24, 64 * 1024 * 1024 + 3)),
}


def _make_scan(rng, case):
    if case.kind == "flags":
        x = (rng.random(case.size) < 0.3).astype(np.int32)
    else:
        x = rng.integers(0, 10, size=case.size).astype(np.int32)
    return {"x": x}


def _ref_scan(inputs):
    x = inputs["x"]
    out = np.zeros_like(x)
    np.cumsum(x[:-1], out=out[1:])
    return out


def _run_scan(ns, inputs, mode):
    x = inputs["x"]
    d_x = L.cuda().to_device(x)
    out = L.output(x.size, -99, np.int32, "out")
    ns["exclusive_scan"](d_x, out)
    after = d_x.copy_to_host()
    if not np.array_equal(after, x):
        raise Mismatch("exclusive_scan modified its input array")
    return out.copy_to_host()


def _verify_scan(got, expected, inputs, mode):
    x = inputs["x"]
    n = x.size
    if np.array_equal(got, expected):
        return
    if np.array_equal(got, np.cumsum(x)):
        raise Mismatch("got the inclusive scan (out[i] includes x[i]); the exclusive scan "
                       "starts at 0 and stops before x[i]: out[i] = x[0] + ... + x[i-1]")
    wrong = np.flatnonzero(got != expected)
    i = wrong[0]
    msg = f"out[{i}]: expected {expected[i]}, got {got[i]} ({wrong.size} of {n} wrong)"
    if got[i] == -99:
        msg += "; it was never written (a bounds check too strict, or a block missing?)"
    elif i > 0 and i % 32 == 0:
        msg += (f"; elements 0..{i - 1} are right and element {i} is the first wrong one: "
                "does a new block start there, without the scanned block sums (offsets) "
                "added to it?")
    raise Mismatch(msg)


# --- exercise 8: compaction to 1..K ------------------------------------------------------------

def _make_compaction(rng, case):
    inputs = make_image_inputs(rng, case)
    inputs["roots"] = first_pixel_labels(inputs["image"], inputs["connectivity"])
    return inputs


def _run_compaction(ns, inputs, mode):
    roots = inputs["roots"]
    d_roots = L.cuda().to_device(roots)
    out = L.output(roots.size, -99, np.int32, "out")
    count = ns["compact_labels"](d_roots, out)
    if not np.array_equal(d_roots.copy_to_host(), roots):
        raise Mismatch("compact_labels modified its input labels (write the result to out)")
    return out.copy_to_host(), count


def _verify_numbered(function: str):
    def verify(got, expected, inputs, mode):
        labels, count = got
        try:
            count = int(count)
        except (TypeError, ValueError):
            raise Mismatch(f"{function} must return the number of blobs, got {count!r}") \
                from None
        explain_consecutive(labels, count, inputs["image"], inputs["connectivity"])
    return verify


_verify_compaction = _verify_numbered("compact_labels")
_verify_block_label = _verify_numbered("block_label")


# --- exercises 9-10: blob statistics -----------------------------------------------------------

def _make_stats(rng, case):
    inputs = make_image_inputs(rng, case)
    labels, count = scipy_labels(inputs["image"], inputs["connectivity"])
    inputs.update(labels=labels, count=count)
    return inputs


def _ref_stats(inputs):
    return stats_reference(inputs["labels"], inputs["count"])


def _stat_outputs(count):
    return {name: L.output(max(count, 1), STAT_FILL[name], STAT_DTYPE.get(name, np.int32), name)
            for name in STAT_NAMES}


def _run_stats(ns, inputs, mode):
    labels, count = inputs["labels"], inputs["count"]
    h, w = labels.shape
    out = _stat_outputs(count)
    block = _block(ns, mode)
    grid = (L.blocks_for(w, block[0]), L.blocks_for(h, block[1]))
    L.launch(ns["blob_stats_kernel"], grid, block, L.cuda().to_device(labels.reshape(-1)), h, w,
             *(out[name] for name in STAT_NAMES))
    return {name: out[name].copy_to_host()[:count] for name in STAT_NAMES}


def _verify_stats(got, expected, inputs, mode):
    explain_stats(got, expected, inputs["labels"])


def tile_label_pairs(labels: np.ndarray, tile: int) -> int:
    """Distinct (tile, label) pairs: the global atomics per field that per-block partials need."""
    h, w = labels.shape
    ys, xs = np.nonzero(labels)
    tiles = (ys // tile) * (-(-w // tile)) + xs // tile
    return int(np.unique(np.stack([tiles, labels[ys, xs]], axis=1), axis=0).shape[0]) \
        if ys.size else 0


def _run_stats_block(ns, inputs, mode):
    labels, count = inputs["labels"], inputs["count"]
    h, w = labels.shape
    tile = int(ns["TILE"])
    threads = tuple(int(v) for v in ns["STATS_THREADS"])
    out = _stat_outputs(count)
    grid = (L.blocks_for(w, tile), L.blocks_for(h, tile))
    args = (L.cuda().to_device(labels.reshape(-1)), h, w, *(out[name] for name in STAT_NAMES))
    counter = [0]
    with _counting_atomic_adds(out["area"], counter) if mode == "sim" else \
            contextlib.nullcontext():
        L.launch(ns["blob_stats_block_kernel"], grid, threads, *args)
    inputs["area_adds"] = counter[0] if mode == "sim" else None
    inputs["tile"] = tile
    return {name: out[name].copy_to_host()[:count] for name in STAT_NAMES}


def _verify_stats_block(got, expected, inputs, mode):
    explain_stats(got, expected, inputs["labels"])
    adds = inputs["area_adds"]
    if adds is None:
        return
    pairs = tile_label_pairs(inputs["labels"], inputs["tile"])
    pixels = int(np.count_nonzero(inputs["labels"]))
    if adds > pairs:
        raise Mismatch(
            f"the results are right, but the kernel made {adds} cuda.atomic.add calls on area "
            f"for {pixels} foreground pixels; per-block partials need one per blob per "
            f"{inputs['tile']}x{inputs['tile']} tile ({pairs} here): accumulate in the block's "
            "shared table first, then flush each slot once")


# --- exercises 11-12: block-based labelling ----------------------------------------------------

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


def _run_block_init(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    rows, cols, cells = cb.sizes(image.shape)
    block = _block(ns, mode)
    forest = L.output(cells, GONE, np.int32, "forest")
    links = L.output(rows * cols, L.poison_value(np.uint8), np.uint8, "links")
    L.launch(ns["block_init_kernel"], (L.blocks_for(cols, block[0]), L.blocks_for(rows, block[1])),
             block, _device_image(image), forest, links, h, w, inputs["connectivity"])
    inputs["tile"] = block
    return forest.copy_to_host(), links.copy_to_host()


def _verify_block_init(got, expected, inputs, mode):
    forest, links = got
    explain_block_links(forest, links, inputs["image"], inputs["connectivity"],
                        inputs["tile"] if mode == "sim" else None)


BLOCK_LABEL_KERNELS = ("block_init_kernel", "block_merge_kernel", "resolve_roots_kernel",
                       "resolve_cells_kernel", "block_final_kernel")


def _run_block_label(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, GONE, np.int32))
    with _watching(ns, BLOCK_LABEL_KERNELS, mode):
        count = ns["block_label"](_device_image(image), d_labels, h, w, inputs["connectivity"])
    return d_labels.copy_to_host(), count


# --- exercise 13 (stretch): run extraction on the GPU ------------------------------------------

def _run_gpu_runs(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    runs = ns["gpu_extract_runs"](_device_image(image), h, w)
    if hasattr(runs, "copy_to_host"):
        runs = runs.copy_to_host()
    return np.asarray(runs)


# --- the catalogue -----------------------------------------------------------------------------

def _cases(sim, gpu):
    return {"sim": _image_cases(sim), "gpu": _image_cases(gpu)}


CPU_CASES = {"sim": _image_cases(CPU_IMAGES), "gpu": _image_cases(CPU_IMAGES)}


def _exercise(id_, title, entry, run, verify, cases, make=make_image_inputs,
              reference=_ref_none, needs=(), **more):
    return Exercise(id=f"ccl.{id_}", lesson=LESSON, title=title, entry=entry, make_inputs=make,
                    run=run, reference=reference, verify=verify, cases=cases, needs=needs,
                    **more)


EXERCISES = (
    _exercise("flood_fill", "CPU reference: flood-fill labelling (4 and 8 connectivity)",
              "flood_fill_label", _run_flood, _verify_cpu_labels, CPU_CASES, points=2),
    _exercise("runs", "run-length encoding of the rows", "extract_runs", _run_runs,
              _verify_runs, CPU_CASES, reference=_ref_runs, points=1),
    _exercise("run_labels", "labelling by linking the runs of adjacent rows", "label_runs",
              _run_run_labels, _verify_cpu_labels, CPU_CASES, needs=("extract_runs",), points=2),
    _exercise("propagation", "GPU label propagation: sweep until nothing changes",
              "propagation_label", _run_propagation, _verify_propagation,
              _cases(SIM_PROPAGATION, GPU_PROPAGATION),
              needs=("init_labels_kernel", "propagate_kernel"),
              sanitizer_cases=_image_cases(SANITIZER_PROPAGATION), points=2),
    _exercise("uf_init", "GPU union-find, first launches: init links and compress",
              "uf_init_kernel", _run_uf_init, _verify_uf_init, _cases(SIM_IMAGES, GPU_IMAGES),
              reference=_ref_uf_init, needs=("find_root", "uf_compress_kernel"), points=2),
    _exercise("union_find", "GPU union-find: atomic merge and resolve",
              "union_find_label", _run_union_find, _verify_union_find,
              _cases(SIM_IMAGES, GPU_IMAGES),
              needs=("find_root", "uf_init_kernel", "uf_compress_kernel", "find_root_atomic",
                     "union", "uf_merge_kernel"),
              points=2),
    _exercise("scan", "exclusive prefix scan: block scan + scanned block sums",
              "exclusive_scan", _run_scan, _verify_scan, SCAN_CASES, make=_make_scan,
              reference=_ref_scan, needs=("block_scan_kernel", "add_offsets_kernel"), points=2),
    _exercise("compaction", "consecutive labels 1..K: flag roots, scan, relabel",
              "compact_labels", _run_compaction, _verify_compaction,
              _cases(SIM_FEW, GPU_IMAGES), make=_make_compaction,
              needs=("flag_roots_kernel", "relabel_kernel", "exclusive_scan"), points=1),
    _exercise("stats", "blob statistics with one atomic per pixel and field",
              "blob_stats_kernel", _run_stats, _verify_stats, _cases(SIM_IMAGES, GPU_IMAGES),
              make=_make_stats, reference=_ref_stats, points=1),
    _exercise("stats_block", "blob statistics from per-block partials (shared hash table)",
              "blob_stats_block_kernel", _run_stats_block, _verify_stats_block,
              _cases(SIM_FEW, GPU_IMAGES), make=_make_stats, reference=_ref_stats,
              needs=("TILE", "STATS_THREADS"), points=3),
    _exercise("block_init", "block labelling, init: a node per 2x2 block, links inside the "
              "tile, unions only where missing", "init_block_8", _run_block_init,
              _verify_block_init, _cases(SIM_BLOCKS, GPU_BLOCKS),
              needs=("block_init_kernel", "pixel"), points=3),
    _exercise("block_label", "block labelling: merge, resolve, number and write the labels",
              "block_label", _run_block_label, _verify_block_label,
              _cases(SIM_BLOCKS, GPU_BLOCKS),
              needs=("join", "block_merge_kernel", "resolve_roots_kernel", "resolve_cells_kernel",
                     "block_final_kernel", "block_init_kernel", "init_block_8", "union",
                     "uf_compress_kernel", "exclusive_scan"), points=3),
    _exercise("gpu_runs", "stretch: run extraction on the GPU (count, scan, write)",
              "gpu_extract_runs", _run_gpu_runs, _verify_runs, _cases(SIM_FEW, GPU_IMAGES),
              reference=_ref_runs, needs=("count_runs_kernel", "write_runs_kernel"), points=2),
)


# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---

TUNED_ON = "NVIDIA H200 (cc 9.0), 2026-11-22"
# Dense enough for one blob to span the image under 8-connectivity (threshold about 0.41):
# per-pixel atomics then all hit the same few addresses.
STATS_PROFILE = ((2048, 2048), 0.6, 8)
DURATION = "gpu__time_duration.sum"
# No counter of atomics here: on the H200, ncu's
# l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum read 0 for numba's global atomics
# (SASS ATOMG) in both kernels, so it separates nothing.


def _profile_stats_block(ns):
    shape, p, connectivity = STATS_PROFILE
    labels, count = scipy_labels(random_image(np.random.default_rng(0), shape, p), connectivity)
    tile = int(ns["TILE"])
    threads = tuple(int(v) for v in ns["STATS_THREADS"])
    kernel = ns["blob_stats_block_kernel"]
    d_labels = L.cuda().to_device(labels.reshape(-1))
    for h, w in ((tile, tile), shape):  # the first launch compiles and is not profiled
        out = _stat_outputs(count)
        grid = (L.blocks_for(w, tile), L.blocks_for(h, tile))
        L.launch(kernel, grid, threads, d_labels, h, w, *(out[name] for name in STAT_NAMES))


def _rule(metric, label, why, **bound):
    return MetricRule(metric=metric, label=label, why=why, tuned_on=TUNED_ON, **bound)


# The block init, graded by what its links cost the compress that follows it: every step of a
# walk is a global load, and links that leave the tile let walks cross the image.
BLOCK_PROFILE = ((2048, 2048), 0.75, 8)
GLOBAL_LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
BLOCK_INIT_BASIS = ("NVIDIA H100 80GB HBM3, 2026-11-25: links to S first 1.60x the "
                    "reference's load requests, links leaving the tile 14.1x (the model of "
                    "workbook.ccl_blocks predicted 1.54x and 12.9x)")


def _profile_block_init(ns):
    shape, p, connectivity = BLOCK_PROFILE
    image = random_image(np.random.default_rng(0), shape, p)
    block, threads = _block(ns, "gpu"), _threads(ns, "gpu")
    for h, w in ((8, 8), shape):  # the first launches compile: the second compress is profiled
        rows, cols, cells = cb.sizes((h, w))
        forest, roots = (L.cuda().device_array(cells, np.int32) for _ in range(2))
        links = L.cuda().device_array(rows * cols, np.uint8)
        L.launch(ns["block_init_kernel"], (L.blocks_for(cols, block[0]),
                                           L.blocks_for(rows, block[1])), block,
                 _device_image(np.ascontiguousarray(image[:h, :w])), forest, links, h, w,
                 connectivity)
        L.launch(ns["uf_compress_kernel"], L.blocks_for(cells, threads), threads, forest, roots,
                 cells)


# Exercises 6-8, each graded on the launch that carries its point, on a GPU-sized input,
# through the student's own host function (its launch configuration included). Their bounds
# come from counts derived by hand or with a numpy model of the reference and the slow
# variant on the profiled input, not yet from a GPU run.
# Union-find: dense enough (as BLOCK_PROFILE) for the init's trees to hold hundreds of pixels.
UF_PROFILE = ((2048, 2048), 0.75, 8)
UF_BASIS = ("NVIDIA H100 80GB HBM3, 2026-11-25: a union for every connected pair 8.0x the "
            "reference's duration, union by compare-and-swap 2.97x (a numpy count on "
            "UF_PROFILE's image gives the former 7.4x the reference's unions and 13x the "
            "unions that reach the busiest root, 84528 against 6502)")
SCAN_PROFILE = 1 << 24  # int32 flags: 64 MiB, a memory-bound pass on any GPU
SCAN_BASIS = ("NVIDIA H100 80GB HBM3, 2026-11-25: one thread scanning its block's tile "
              "16.4x the reference's duration (estimated by hand at about 1 ms against "
              "45-65 us), correct variants 1.06x and 1.85x (Hillis-Steele in shared memory)")
COMPACTION_PROFILE = ((2048, 2048), 0.6, 8)
GLOBAL_LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
COMPACTION_BASIS = ("NVIDIA H100 80GB HBM3, 2026-11-25: 16 consecutive pixels per thread "
                    "6.58x the reference's sectors, the coalesced forms 1.00x, as a numpy "
                    "count of the 32-byte sectors each warp's loads touch on "
                    "COMPACTION_PROFILE's labels predicted (658236 for the reference, 4328788)")


def _profile_union_find(ns):
    shape, p, connectivity = UF_PROFILE
    image = random_image(np.random.default_rng(0), shape, p)
    for h, w in ((8, 8), shape):  # the first call compiles: the second merge is profiled
        labels = L.cuda().device_array(h * w, np.int32)
        ns["union_find_label"](_device_image(image[:h, :w]), labels, h, w, connectivity)


def _profile_scan(ns):
    x = _make_scan(np.random.default_rng(0), Case(SCAN_PROFILE, "flags"))["x"]
    for size in (1, x.size):  # one tile compiles: the big array's first block scan is profiled
        ns["exclusive_scan"](L.cuda().to_device(x[:size]), L.cuda().device_array(size, np.int32))


def _profile_compaction(ns):
    shape, p, connectivity = COMPACTION_PROFILE
    roots = first_pixel_labels(random_image(np.random.default_rng(0), shape, p), connectivity)
    for size in (8, roots.size):  # a root is its blob's first pixel: roots[:8] is valid input
        ns["compact_labels"](L.cuda().to_device(roots[:size]),
                             L.cuda().device_array(size, np.int32))


METRICS = {
    "block_init": dict(
        rules=(MetricRule(GLOBAL_LOADS, "global load requests of the compress after your init",
                          "compress walks each cell's chain of links to its root, a load per "
                          "step: links inside the tile keep every walk within a few dozen "
                          "steps, links that leave it let walks cross the image",
                          tuned_on=BLOCK_INIT_BASIS, max_ratio=3.0),),
        profile=_profile_block_init, kernels=("uf_compress_kernel",)),
    "stats_block": dict(
        rules=(_rule(DURATION, "duration", "atomics on one address serialise: one global "
                     "atomic per field for each blob of a tile, not one per pixel, lets the "
                     "kernel run at the speed of its loads (correct kernels measured up to "
                     "1.44x on an H100, 2026-11-25; one atomic per pixel 22.8x)",
                     max_ratio=2.0),),
        profile=_profile_stats_block, kernels=("blob_stats_block_kernel",)),
    "union_find": dict(
        rules=(MetricRule(DURATION, "duration of the merge",
                          "the merge skips a neighbour whose root is already the pixel's "
                          "(on a dense image about 6 connected pairs in 7): a union for every "
                          "pair walks to the tree's root with atomic loads, thousands of them "
                          "on the same root's address, and atomics on one address serialise",
                          tuned_on=UF_BASIS, max_ratio=4.0),),
        profile=_profile_union_find, kernels=("uf_merge_kernel",)),
    "scan": dict(
        rules=(MetricRule(DURATION, "duration of the block scan",
                          "every thread of a block scans its own elements and the warps "
                          "combine their totals with shuffles, so the block streams its tile "
                          "at the speed of memory; a tile scanned serially by one thread "
                          "leaves the other threads of the block waiting",
                          tuned_on=SCAN_BASIS, max_ratio=3.0),),
        profile=_profile_scan, kernels=("block_scan_kernel",)),
    "compaction": dict(
        rules=(MetricRule(GLOBAL_LOAD_SECTORS, "global load sectors of the relabel",
                          "consecutive threads relabel consecutive pixels, so a warp's 32 "
                          "labels share four 32-byte sectors; a thread that relabels a run "
                          "of consecutive pixels makes each load of its warp touch 32 sectors",
                          tuned_on=COMPACTION_BASIS, max_ratio=2.0),),
        profile=_profile_compaction, kernels=("relabel_kernel",)),
}

NO_METRIC_RULE = {
    "flood_fill": "CPU-only: plain Python",
    "runs": "CPU-only: plain Python",
    "run_labels": "CPU-only: plain Python",
    "propagation": "the lesson's baseline, slow by design: its launches number the pixels of "
                   "the longest path through a blob, which the check counts; union-find is "
                   "what improves on it",
    "uf_init": "the per-pixel stepping stone: the Goal fixes its output pixel by pixel (each "
               "pixel's parent by the smallest-neighbour rule, each root by its chain), which "
               "the check compares; what those chains cost the compress is section 7's subject, "
               "measured by exercise 11's rule",
    "stats": "the lesson's baseline for exercise 10, seven global atomics per pixel by design: "
             "exercise 10's rule measures what per-block partials save",
    "gpu_runs": "stretch: the Goal's own design, one thread reading each row in turn, is "
                "the uncoalesced form the text calls slow, so no plausible slower submission "
                "is left for a rule against it to catch; the warp-per-row version is an aside",
    "block_label": "what its launches cost follows from exercise 11's links (the unions they "
                   "ask for, the roots of the init's forest that walk), which exercise 11 "
                   "checks and its rule measures; its own steps (unions from the compressed "
                   "roots, walks from the init's roots only) are the Goal's, and checked for "
                   "races in the simulator",
}

EXERCISES = with_metric_rules(EXERCISES, METRICS, NO_METRIC_RULE)

# Slow but correct submissions, each (description, text in the solution cell, replacement):
# with no text, the replacement is the whole cell. Each must fail every metric rule of its
# exercise on a GPU (benchmarks/metric_rules.py checks this). In the simulator the atomic
# count check of the exercise rejects it already.
SLOW_VARIANTS = {
    "ccl.stats_block": ("global atomics for every pixel, no shared table", None, '''
TILE = 32 if workbook.MODE == "gpu" else 8
PIXELS = 8 if workbook.MODE == "gpu" else 4
STATS_THREADS = (TILE // PIXELS, TILE)


@cuda.jit
def blob_stats_block_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TILE + cuda.threadIdx.x * PIXELS
    if y >= height:
        return
    for x in range(x0, min(x0 + PIXELS, width)):
        k = labels[y * width + x] - 1
        if k < 0:
            continue
        cuda.atomic.add(area, k, 1)
        cuda.atomic.min(xmin, k, x)
        cuda.atomic.max(xmax, k, x)
        cuda.atomic.min(ymin, k, y)
        cuda.atomic.max(ymax, k, y)
        cuda.atomic.add(xsum, k, x)
        cuda.atomic.add(ysum, k, y)
'''),
    "ccl.block_init": (
        "links that leave the tile: the parent is the first touching neighbour, wherever it "
        "lies (right partition; in the simulator the tile check rejects it)",
        """    if to_p and not first_row and not first_col:
        parent, done_p = top - cols - 1, True
    elif to_q and not first_row:
        parent, done_q = top - cols, True
    elif to_r and not first_row and not last_col:
        parent, done_r = top - cols + 1, True
    elif to_s and not first_col and (sb or node == bottom):""",
        """    if to_p:
        parent, done_p = top - cols - 1, True
    elif to_q:
        parent, done_q = top - cols, True
    elif to_r:
        parent, done_r = top - cols + 1, True
    elif to_s and (sb or node == bottom):"""),
}

# Correct submissions written differently from the reference, each (description, text in
# the solution cell, replacement) as above. Each must be graded correct on its output and
# pass every metric rule of its exercise on a GPU: benchmarks/metric_rules.py profiles them
# beside the slow variants and records both groups' ratios, the evidence the rules'
# thresholds are set from. All of them read each label once and make one global atomic per
# field for each blob of a tile, as the reference does.
_STATS_TABLE = '''
    keys = cuda.shared.array(TABLE, int32)
    t_area = cuda.shared.array(TABLE, int32)
    t_xmin = cuda.shared.array(TABLE, int32)
    t_xmax = cuda.shared.array(TABLE, int32)
    t_ymin = cuda.shared.array(TABLE, int32)
    t_ymax = cuda.shared.array(TABLE, int32)
    t_xsum = cuda.shared.array(TABLE, int64)
    t_ysum = cuda.shared.array(TABLE, int64)
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    threads = cuda.blockDim.x * cuda.blockDim.y
    for s in range(t, TABLE, threads):
        keys[s] = EMPTY
        t_area[s] = 0
        t_xmin[s] = BIG
        t_xmax[s] = -1
        t_ymin[s] = BIG
        t_ymax[s] = -1
        t_xsum[s] = 0
        t_ysum[s] = 0
    cuda.syncthreads()
'''

_STATS_FLUSH = '''
    cuda.syncthreads()
    for s in range(t, TABLE, threads):
        k = keys[s]
        if k != EMPTY:
            cuda.atomic.add(area, k, t_area[s])
            cuda.atomic.min(xmin, k, t_xmin[s])
            cuda.atomic.max(xmax, k, t_xmax[s])
            cuda.atomic.min(ymin, k, t_ymin[s])
            cuda.atomic.max(ymax, k, t_ymax[s])
            cuda.atomic.add(xsum, k, t_xsum[s])
            cuda.atomic.add(ysum, k, t_ysum[s])
'''

_STATS_FIELDS = "keys, t_area, t_xmin, t_xmax, t_ymin, t_ymax, t_xsum, t_ysum"

CORRECT_VARIANTS = {
    "ccl.stats_block": (
        ("multiplicative hash, triangular probing", None, '''
TILE = 32 if workbook.MODE == "gpu" else 8
PIXELS = 8 if workbook.MODE == "gpu" else 4
STATS_THREADS = (TILE // PIXELS, TILE)
TABLE_BITS = 2 * (TILE.bit_length() - 1)
TABLE = 1 << TABLE_BITS  # TILE * TILE slots, a power of two
EMPTY = -1
BIG = 2**31 - 1


@cuda.jit(device=True)
def table_add(''' + _STATS_FIELDS + ''',
              k, n, first, last, xs, y):
    s = ((int64(k) * 2654435761) & 0xFFFFFFFF) >> (32 - TABLE_BITS)  # the top bits (Knuth)
    step = 0
    while True:
        old = cuda.atomic.cas(keys, s, EMPTY, k)
        if old == EMPTY or old == k:
            break
        step += 1
        s = (s + step) & (TABLE - 1)  # offsets 1, 3, 6, 10, ... visit every slot
    cuda.atomic.add(t_area, s, n)
    cuda.atomic.min(t_xmin, s, first)
    cuda.atomic.max(t_xmax, s, last)
    cuda.atomic.min(t_ymin, s, y)
    cuda.atomic.max(t_ymax, s, y)
    cuda.atomic.add(t_xsum, s, xs)
    cuda.atomic.add(t_ysum, s, n * y)


@cuda.jit
def blob_stats_block_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
''' + _STATS_TABLE + '''
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TILE + cuda.threadIdx.x * PIXELS
    current = -1
    n = first = last = xs = 0
    if y < height:
        for x in range(x0, min(x0 + PIXELS, width)):
            k = labels[y * width + x] - 1
            if k < 0:
                continue
            if k != current:
                if current >= 0:
                    table_add(''' + _STATS_FIELDS + ''',
                              current, n, first, last, xs, y)
                current, n, first, xs = k, 0, x, 0
            n += 1
            last = x
            xs += x
    if current >= 0:
        table_add(''' + _STATS_FIELDS + ''',
                  current, n, first, last, xs, y)
''' + _STATS_FLUSH),
        ("warp-aggregated: match_any_sync, the lowest peer adds the warp's sums", None, '''
TILE = 32 if workbook.MODE == "gpu" else 8
PIXELS = 8 if workbook.MODE == "gpu" else 4
STATS_THREADS = (TILE // PIXELS, TILE)
TABLE = TILE * TILE
EMPTY = -1
BIG = 2**31 - 1


@cuda.jit(device=True)
def table_add(''' + _STATS_FIELDS + ''',
              k, n, x_lo, x_hi, y_lo, y_hi, xs, ys):
    s = k % TABLE
    while True:
        old = cuda.atomic.cas(keys, s, EMPTY, k)
        if old == EMPTY or old == k:
            break
        s = (s + 1) % TABLE
    cuda.atomic.add(t_area, s, n)
    cuda.atomic.min(t_xmin, s, x_lo)
    cuda.atomic.max(t_xmax, s, x_hi)
    cuda.atomic.min(t_ymin, s, y_lo)
    cuda.atomic.max(t_ymax, s, y_hi)
    cuda.atomic.add(t_xsum, s, xs)
    cuda.atomic.add(t_ysum, s, ys)


@cuda.jit
def blob_stats_block_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
''' + _STATS_TABLE + '''
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TILE + cuda.threadIdx.x * PIXELS
    current = -1
    n = first = last = xs = 0
    if y < height:
        for x in range(x0, min(x0 + PIXELS, width)):
            k = labels[y * width + x] - 1
            if k < 0:
                continue
            if k != current:
                if current >= 0:  # a run that ends inside the thread's pixels: add it now
                    table_add(''' + _STATS_FIELDS + ''',
                              current, n, first, last, y, y, xs, n * y)
                current, n, first, xs = k, 0, x, 0
            n += 1
            last = x
            xs += x
    # The last runs: the lanes of a warp that hold the same blob sum them first.
    lanes = min(32, threads - (t - t % 32))  # the last warp of a small block is partial
    mask = FULL_MASK if lanes == 32 else (1 << lanes) - 1
    peers = cuda.match_any_sync(mask, current)
    if current >= 0:
        total = total_xs = total_ys = 0
        x_lo = y_lo = BIG
        x_hi = y_hi = -1
        rest = peers & 0xFFFFFFFF  # peers is an int32 whose sign bit is lane 31
        while rest != 0:
            src = cuda.ffs(rest) - 1
            rest &= rest - 1
            total += cuda.shfl_sync(peers, n, src)
            x_lo = min(x_lo, cuda.shfl_sync(peers, first, src))
            x_hi = max(x_hi, cuda.shfl_sync(peers, last, src))
            other_y = cuda.shfl_sync(peers, y, src)
            y_lo = min(y_lo, other_y)
            y_hi = max(y_hi, other_y)
            total_xs += cuda.shfl_sync(peers, xs, src)
            total_ys += cuda.shfl_sync(peers, n * y, src)
        if (peers & cuda.lanemask_lt()) == 0:  # no lower peer: this lane is the leader
            table_add(''' + _STATS_FIELDS + ''',
                      current, total, x_lo, x_hi, y_lo, y_hi, total_xs, total_ys)
''' + _STATS_FLUSH),
        ("1-D block, runs ended at every label change, 2-D shared tables", None, '''
TILE = 32 if workbook.MODE == "gpu" else 8
PIXELS = 8 if workbook.MODE == "gpu" else 4
SEGMENTS = TILE // PIXELS  # runs of PIXELS pixels in a row of the tile
STATS_THREADS = (SEGMENTS * TILE,)  # thread t: segment t % SEGMENTS of row t // SEGMENTS
TABLE = TILE * TILE
EMPTY = -1
BIG = 2**31 - 1
X_MIN, X_MAX, Y_MIN, Y_MAX = 0, 1, 2, 3  # rows of the bounds table
X_SUM, Y_SUM = 0, 1  # rows of the sums table


@cuda.jit(device=True)
def add_run(keys, counts, bounds, sums, k, first, last, y):
    """Pixels first..last of row y, all of blob k, into the block's table."""
    s = k % TABLE
    while True:
        old = cuda.atomic.cas(keys, s, EMPTY, k)
        if old == k or old == EMPTY:
            break
        s = (s + 1) % TABLE
    n = last - first + 1
    cuda.atomic.add(counts, s, n)
    cuda.atomic.min(bounds, (X_MIN, s), first)
    cuda.atomic.max(bounds, (X_MAX, s), last)
    cuda.atomic.min(bounds, (Y_MIN, s), y)
    cuda.atomic.max(bounds, (Y_MAX, s), y)
    cuda.atomic.add(sums, (X_SUM, s), (first + last) * n // 2)
    cuda.atomic.add(sums, (Y_SUM, s), n * y)


@cuda.jit
def blob_stats_block_kernel(labels, height, width, area, xmin, xmax, ymin, ymax, xsum, ysum):
    keys = cuda.shared.array(TABLE, int32)
    counts = cuda.shared.array(TABLE, int32)
    bounds = cuda.shared.array((4, TABLE), int32)
    sums = cuda.shared.array((2, TABLE), int64)
    t = cuda.threadIdx.x
    for s in range(t, TABLE, cuda.blockDim.x):
        keys[s] = EMPTY
        counts[s] = 0
        bounds[X_MIN, s] = BIG
        bounds[X_MAX, s] = -1
        bounds[Y_MIN, s] = BIG
        bounds[Y_MAX, s] = -1
        sums[X_SUM, s] = 0
        sums[Y_SUM, s] = 0
    cuda.syncthreads()
    y = cuda.blockIdx.y * TILE + t // SEGMENTS
    x0 = cuda.blockIdx.x * TILE + t % SEGMENTS * PIXELS
    x1 = min(x0 + PIXELS, width)
    if y < height:
        current = -1  # the background is a run too, one that is never added
        first = x0
        for x in range(x0, x1):
            k = labels[y * width + x] - 1
            if k != current:
                if current >= 0:
                    add_run(keys, counts, bounds, sums, current, first, x - 1, y)
                current = k
                first = x
        if current >= 0:
            add_run(keys, counts, bounds, sums, current, first, x1 - 1, y)
    cuda.syncthreads()
    for s in range(t, TABLE, cuda.blockDim.x):
        k = keys[s]
        if k != EMPTY:
            cuda.atomic.add(area, k, counts[s])
            cuda.atomic.min(xmin, k, bounds[X_MIN, s])
            cuda.atomic.max(xmax, k, bounds[X_MAX, s])
            cuda.atomic.min(ymin, k, bounds[Y_MIN, s])
            cuda.atomic.max(ymax, k, bounds[Y_MAX, s])
            cuda.atomic.add(xsum, k, sums[X_SUM, s])
            cuda.atomic.add(ysum, k, sums[Y_SUM, s])
'''),
        ("half the slots: two 4-neighbours share a blob, so a tile holds at most TILE^2/2",
         "TABLE = TILE * TILE                            # hash slots: one per pixel, so it "
         "never fills",
         "TABLE = TILE * TILE // 2  # slots: blobs of a tile never touch, so at most every "
         "other pixel starts one"),
    ),
}


# The block init written two other ways: the parent chosen in another order, and the block's
# 3 x 4 window of pixels read into one bit mask first (as BKE does). Both keep their links
# inside the tile and flag the same kind of unions.
_LINK_P_FIRST = """    if to_p and not first_row and not first_col:
        parent, done_p = top - cols - 1, True
    elif to_q and not first_row:
        parent, done_q = top - cols, True
    elif to_r and not first_row and not last_col:
        parent, done_r = top - cols + 1, True
    elif to_s and not first_col and (sb or node == bottom):
        parent, done_s = (top - 1 if sb else bottom - 1), True
"""
CORRECT_VARIANTS["ccl.block_init"] = (
    ("links to S first (along the row), then P, Q, R", _LINK_P_FIRST,
     """    if to_s and not first_col and (sb or node == bottom):
        parent, done_s = (top - 1 if sb else bottom - 1), True
    elif to_p and not first_row and not first_col:
        parent, done_p = top - cols - 1, True
    elif to_q and not first_row:
        parent, done_q = top - cols, True
    elif to_r and not first_row and not last_col:
        parent, done_r = top - cols + 1, True
"""),
    # the new function goes first; the reference's stays below it under another name, unused
    ("the 3 x 4 window read into one bit mask, bits tested against masks",
     "@cuda.jit(device=True)\ndef init_block_8(", """@cuda.jit(device=True)
def init_block_8(image, forest, height, width, by, bx, first_col, first_row, last_col):
    cols = (width + 1) // 2
    y, x = 2 * by, 2 * bx
    top = y * cols + bx
    bottom = top + cols
    window = 0  # bit 4 * row + column: rows y - 1 .. y + 1, columns x - 1 .. x + 2
    for r in range(3):
        for q in range(4):
            window |= pixel(image, y - 1 + r, x - 1 + q, height, width) << (4 * r + q)
    if window & 0x660 == 0:  # a b (bits 5, 6), c d (bits 9, 10)
        forest[top] = -1
        if y + 1 < height:
            forest[bottom] = -1
        return 0
    node = top if window & 0x060 else bottom
    touches_p = window & 0x020 != 0 and window & 0x001 != 0
    touches_q = window & 0x060 != 0 and window & 0x006 != 0
    touches_r = window & 0x040 != 0 and window & 0x008 != 0
    touches_s = window & 0x220 != 0 and window & 0x110 != 0
    s_top = window & 0x010 != 0  # sb
    qc, qd = window & 0x002 != 0, window & 0x004 != 0
    joined = 0  # UNION_* bits of the neighbours already joined to this block
    parent = node
    if touches_p and not (first_row or first_col):
        parent, joined = top - cols - 1, UNION_P
    elif touches_q and not first_row:
        parent, joined = top - cols, UNION_Q
    elif touches_r and not (first_row or last_col):
        parent, joined = top - cols + 1, UNION_R
    elif touches_s and not first_col and (s_top or node == bottom):
        parent, joined = (top - 1 if s_top else bottom - 1), UNION_S
    unions = 0
    if touches_p and joined & UNION_P == 0:
        if not ((joined & UNION_Q != 0 and qc) or (joined & UNION_S != 0 and s_top)):
            unions |= UNION_P
        joined |= UNION_P
    if touches_q and joined & UNION_Q == 0:
        if not ((joined & UNION_P != 0 and qc) or (joined & UNION_R != 0 and qd)
                or (joined & UNION_S != 0 and qc and s_top)):
            unions |= UNION_Q
        joined |= UNION_Q
    if touches_r and joined & UNION_R == 0:
        if not (joined & UNION_Q != 0 and qd):
            unions |= UNION_R
    if touches_s and joined & UNION_S == 0:
        if not (s_top and (joined & UNION_P != 0 or (joined & UNION_Q != 0 and qc))):
            unions |= UNION_S
    forest[node] = parent
    if node == top:
        if y + 1 < height:
            forest[bottom] = top if window & 0x600 else -1
    else:
        forest[top] = -1
    return ((window >> 5) & 3) | ((window >> 7) & 12) | unions  # a b, c d, unions


@cuda.jit(device=True)
def reference_init_block_8("""),
)


# Exercises 6-8: the merge, the block scan and the relabel, each written slowly (SLOW_VARIANTS)
# and differently (CORRECT_VARIANTS), as replacements of the solution cell's text.
_MERGE_TEST = """                if j >= 0 and roots[j] != roots[i]:
                    union(forest, roots[i], roots[j])"""
_UNION_LOOP = """    while a != b:
        if a < b:
            a, b = b, a
        old = cuda.atomic.min(forest, a, b)
        if old == a:
            return
        a = old
"""
_SCAN_TOTALS = """    inclusive = warp_inclusive_scan(total, lane)
    if lane == 31:
        warp_totals[warp] = inclusive
    cuda.syncthreads()
    if warp == 0:
        warp_total = warp_totals[lane] if lane < cuda.blockDim.x // 32 else 0
        warp_totals[lane] = warp_inclusive_scan(warp_total, lane)
    cuda.syncthreads()
    running = inclusive - total
    if warp > 0:
        running += warp_totals[warp - 1]
"""
_SCAN_BODY = """    total = 0
    for j in range(SCAN_ITEMS):
        if base + j < n:
            total += values[base + j]
""" + _SCAN_TOTALS + """    for j in range(SCAN_ITEMS):
        if base + j < n:
            value = values[base + j]
            out[base + j] = running
            running += value
    if t == cuda.blockDim.x - 1:
        block_sums[cuda.blockIdx.x] = running
"""


def _relabel(indent: str) -> str:
    """The reference's relabel of pixel i, indented by ``indent``."""
    return (f"{indent}root = labels[i]\n"
            f"{indent}out[i] = ranks[root] + 1 if root >= 0 else 0\n")


def _compaction_cell(relabel_body: str, relabel_blocks: str) -> str:
    """Exercise 8's cell with another relabel kernel, launched on ``relabel_blocks`` blocks."""
    return '''
@cuda.jit
def flag_roots_kernel(labels, flags, n):
    i = cuda.grid(1)
    if i < n:
        flags[i] = 1 if labels[i] == i else 0


@cuda.jit
def relabel_kernel(labels, ranks, out, n):
''' + relabel_body + '''

def compact_labels(d_labels, d_out):
    n = d_labels.size
    flags = cuda.device_array(n, np.int32)
    ranks = cuda.device_array(n, np.int32)
    flag_roots_kernel[grid_1d(n), THREADS](d_labels, flags, n)
    exclusive_scan(flags, ranks)
    relabel_kernel[''' + relabel_blocks + ''', THREADS](d_labels, ranks, d_out, n)
    return int(ranks[n - 1]) + int(flags[n - 1])
'''


SLOW_VARIANTS.update({
    "ccl.union_find": (
        "a union for every connected neighbour, from the pixels, without the roots test",
        _MERGE_TEST, """                if j >= 0:
                    union(forest, i, j)"""),
    "ccl.scan": ("the tile scanned serially by its block's first thread", _SCAN_BODY, """\
    if t == 0:  # one thread scans the block's whole tile; the others have nothing to do
        start = cuda.blockIdx.x * SCAN_TILE
        running = 0
        for i in range(start, min(start + SCAN_TILE, n)):
            value = values[i]
            out[i] = running
            running += value
        block_sums[cuda.blockIdx.x] = running
"""),
    "ccl.compaction": ("each thread relabels 16 consecutive pixels", None, _compaction_cell(
        """    first = cuda.grid(1) * 16
    for i in range(first, min(first + 16, n)):
""" + _relabel(" " * 8), "(n + 16 * THREADS - 1) // (16 * THREADS)")),
})

CORRECT_VARIANTS.update({
    "ccl.union_find": (
        ("union by compare-and-swap: the larger root is linked only while it is a root",
         _UNION_LOOP, """    while a != b:
        if a < b:
            a, b = b, a
        old = cuda.atomic.cas(forest, a, a, b)
        if old == a:
            return
        a = find_root_atomic(forest, old)  # a was linked meanwhile: start again from roots
        b = find_root_atomic(forest, b)
"""),
        ("the pixel's root read once, the four back neighbours listed by index",
         """    for dy in range(-1, 1):
        for dx in range(-1, 2):
            if dy < 0 or dx < 0:
                j = neighbour(image, y, x, dy, dx, height, width, connectivity)
""" + _MERGE_TEST, """    mine = roots[i]
    for k in range(4):  # left, up-left, up, up-right
        dy = 0 if k == 0 else -1
        dx = -1 if k == 0 else k - 2
        j = neighbour(image, y, x, dy, dx, height, width, connectivity)
        if j >= 0:
            theirs = roots[j]
            if theirs != mine:
                union(forest, mine, theirs)"""),
    ),
    "ccl.scan": (
        ("eight elements per thread", "SCAN_ITEMS = 4", "SCAN_ITEMS = 8"),
        ("the thread totals scanned in shared memory (Hillis-Steele with barriers), no shuffles",
         _SCAN_TOTALS, """\
    sums = cuda.shared.array((2, SCAN_THREADS), int32)  # two buffers: read one, write the other
    sums[0, t] = total
    cuda.syncthreads()
    src = 0
    offset = 1
    while offset < SCAN_THREADS:
        value = sums[src, t]
        if t >= offset:
            value += sums[src, t - offset]
        sums[1 - src, t] = value
        src = 1 - src
        offset *= 2
        cuda.syncthreads()
    running = sums[src, t] - total
"""),
    ),
    "ccl.compaction": (
        ("a grid-stride loop over 256 blocks", None, _compaction_cell(
            """    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
""" + _relabel(" " * 8), "256")),
        ("four pixels per thread, a block's threads side by side in each quarter", None,
         _compaction_cell("""    base = cuda.blockIdx.x * 4 * cuda.blockDim.x + cuda.threadIdx.x
    for k in range(4):
        i = base + k * cuda.blockDim.x
        if i < n:
""" + _relabel(" " * 12), "(n + 4 * THREADS - 1) // (4 * THREADS)")),
    ),
})
