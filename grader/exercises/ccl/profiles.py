"""The launches that ncu profiles for the metric rules (GPU only), one per exercise with rules.

Each runs the student's code twice: first on a tiny input, a warm-up outside ncu's profiled
range (:func:`grader.profiled_range.unprofiled`), then on a GPU-sized input, whose first launch
of the exercise's profiled kernel is compared with the reference solution's, profiled in the
same run.
"""

from __future__ import annotations

import numpy as np

from grader import launch as L
from grader import profiled_range as R
from grader.exercise import Case
from grader.exercises.ccl.images import random_image
from grader.exercises.ccl.inputs import make_scan
from grader.exercises.ccl.references import STAT_NAMES, first_pixel_labels, scipy_labels
from grader.exercises.ccl.runs import device_image, notebook_block, notebook_threads, stat_outputs
from workbook import ccl_blocks as cb

# (shape, density, connectivity) of each profiled image, random pixels of seed 0.
# Statistics: dense enough for one blob to span the image under 8-connectivity (threshold
# about 0.41): per-pixel atomics then all hit the same few addresses.
STATS_PROFILE = ((2048, 2048), 0.6, 8)
# The block init: every step of a compress walk over its forest is a global load.
BLOCK_PROFILE = ((2048, 2048), 0.75, 8)
# Union-find: dense enough (as BLOCK_PROFILE) for the init's trees to hold hundreds of pixels.
UF_PROFILE = ((2048, 2048), 0.75, 8)
SCAN_PROFILE = 1 << 24  # int32 flags: 64 MiB, a memory-bound pass on any GPU
COMPACTION_PROFILE = ((2048, 2048), 0.6, 8)


def profile_stats_block(ns):
    shape, p, connectivity = STATS_PROFILE
    labels, count = scipy_labels(random_image(np.random.default_rng(0), shape, p), connectivity)
    tile = int(ns["TILE"])
    threads = tuple(int(v) for v in ns["STATS_THREADS"])
    kernel = ns["blob_stats_block_kernel"]
    d_labels = L.cuda().to_device(labels.reshape(-1))

    def run(h, w):
        out = stat_outputs(count)
        grid = (L.blocks_for(w, tile), L.blocks_for(h, tile))
        L.launch(kernel, grid, threads, d_labels, h, w, *(out[name] for name in STAT_NAMES))

    with R.unprofiled():  # a warm-up
        run(tile, tile)
    run(*shape)


def profile_block_init(ns):
    """The student's init, then exercise 5's compress on its forest (the profiled kernel)."""
    shape, p, connectivity = BLOCK_PROFILE
    image = random_image(np.random.default_rng(0), shape, p)
    block, threads = notebook_block(ns, "gpu"), notebook_threads(ns, "gpu")

    def run(h, w):
        rows, cols, cells = cb.sizes((h, w))
        forest, roots = (L.cuda().device_array(cells, np.int32) for _ in range(2))
        links = L.cuda().device_array(rows * cols, np.uint8)
        L.launch(ns["block_init_kernel"], (L.blocks_for(cols, block[0]),
                                           L.blocks_for(rows, block[1])), block,
                 device_image(np.ascontiguousarray(image[:h, :w])), forest, links, h, w,
                 connectivity)
        L.launch(ns["uf_compress_kernel"], L.blocks_for(cells, threads), threads, forest, roots,
                 cells)

    with R.unprofiled():  # a warm-up on 8 x 8 pixels
        run(8, 8)
    run(*shape)  # the profiled compress


# Exercises 6-8: through the student's own host function (its launch configuration included).

def profile_union_find(ns):
    shape, p, connectivity = UF_PROFILE
    image = random_image(np.random.default_rng(0), shape, p)

    def run(h, w):
        labels = L.cuda().device_array(h * w, np.int32)
        ns["union_find_label"](device_image(image[:h, :w]), labels, h, w, connectivity)

    with R.unprofiled():  # a warm-up on 8 x 8 pixels
        run(8, 8)
    run(*shape)  # its merge is profiled


def profile_scan(ns):
    x = make_scan(np.random.default_rng(0), Case(SCAN_PROFILE, "flags"))["x"]

    def run(size):
        ns["exclusive_scan"](L.cuda().to_device(x[:size]), L.cuda().device_array(size, np.int32))

    with R.unprofiled():  # a warm-up on one tile
        run(1)
    run(x.size)  # its first block scan, over the whole array, is profiled


def profile_compaction(ns):
    shape, p, connectivity = COMPACTION_PROFILE
    roots = first_pixel_labels(random_image(np.random.default_rng(0), shape, p), connectivity)

    def run(size):
        ns["compact_labels"](L.cuda().to_device(roots[:size]),
                             L.cuda().device_array(size, np.int32))

    with R.unprofiled():  # a warm-up: a root is its blob's first pixel, roots[:8] is valid input
        run(8)
    run(roots.size)
