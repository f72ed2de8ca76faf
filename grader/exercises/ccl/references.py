"""Lesson 05's expected results, computed with scipy and numpy, and each exercise's
``reference(inputs)``.

Until the compaction exercise, a GPU labelling is right when it induces the same partition of
the foreground *and* every pixel holds the linear index of its blob's first pixel (raster
order), the blob's smallest index; after compaction the labels must equal scipy's exactly.
"""

from __future__ import annotations

import numpy as np

from workbook import ccl_blocks as cb

INT32_MAX = np.iinfo(np.int32).max


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


def tile_label_pairs(labels: np.ndarray, tile: int) -> int:
    """Distinct (tile, label) pairs: the global atomics per field that per-block partials need."""
    h, w = labels.shape
    ys, xs = np.nonzero(labels)
    tiles = (ys // tile) * (-(-w // tile)) + xs // tile
    return int(np.unique(np.stack([tiles, labels[ys, xs]], axis=1), axis=0).shape[0]) \
        if ys.size else 0


# --- each exercise's reference(inputs) -----------------------------------------------------------

def nothing_expected(inputs):
    """For the checks that compare with scipy themselves."""
    return None


def expected_runs(inputs):
    return runs_reference(inputs["image"])


def expected_uf_init(inputs):
    parents = cb.pixel_parents(inputs["image"], inputs["connectivity"])
    return parents, cb.walks(parents)[0]


def expected_scan(inputs):
    x = inputs["x"]
    out = np.zeros_like(x)
    np.cumsum(x[:-1], out=out[1:])
    return out


def expected_stats(inputs):
    return stats_reference(inputs["labels"], inputs["count"])
