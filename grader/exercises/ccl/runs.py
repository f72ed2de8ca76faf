"""Each exercise's ``run(namespace, inputs, mode)``: launches the student's code on a case's
inputs, as the lesson's Goal states the launch, and returns what it wrote."""

from __future__ import annotations

import contextlib

import numpy as np

from grader import launch as L
from grader.exercise import Mismatch
from grader.exercises.ccl.block_checks import GONE
from grader.exercises.ccl.cases import BLOCK
from grader.exercises.ccl.references import STAT_DTYPE, STAT_FILL, STAT_NAMES
from grader.exercises.ccl.sim_watch import counting_atomic_adds, watching
from workbook import ccl_blocks as cb


def device_image(image):
    return L.cuda().to_device(np.ascontiguousarray(image.reshape(-1)))


def notebook_block(ns, mode):
    """The notebook's BLOCK (threads per block, x and y), else the lesson's for ``mode``."""
    block = ns.get("BLOCK", BLOCK[mode])
    try:
        return tuple(int(v) for v in block)[:2]
    except TypeError:
        return BLOCK[mode]


def notebook_threads(ns, mode) -> int:
    """The notebook's THREADS for 1-D launches, else as many as a BLOCK holds."""
    block = notebook_block(ns, mode)
    try:
        return int(ns.get("THREADS", block[0] * block[1]))
    except (TypeError, ValueError):
        return block[0] * block[1]


def stat_outputs(count):
    """The statistics' output arrays, each filled with its neutral value."""
    return {name: L.output(max(count, 1), STAT_FILL[name], STAT_DTYPE.get(name, np.int32), name)
            for name in STAT_NAMES}


# --- exercises 1-3: CPU references -------------------------------------------------------------

def check_label_pair(result, what: str):
    if not (isinstance(result, tuple) and len(result) == 2):
        raise Mismatch(f"{what} must return a tuple (labels, count), got {type(result).__name__}")
    return np.asarray(result[0]), result[1]


def run_flood(ns, inputs, mode):
    image = inputs["image"].copy()
    result = ns["flood_fill_label"](image, inputs["connectivity"])
    if not np.array_equal(image, inputs["image"]):
        raise Mismatch("flood_fill_label modified its input image")
    return check_label_pair(result, "flood_fill_label")


def run_run_labels(ns, inputs, mode):
    image = inputs["image"].copy()
    return check_label_pair(ns["label_runs"](image, inputs["connectivity"]), "label_runs")


def run_runs(ns, inputs, mode):
    return np.asarray(ns["extract_runs"](inputs["image"].copy()))


# --- exercises 4-6: label propagation, union-find ----------------------------------------------

def run_propagation(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, -7, np.int32))
    sweeps = ns["propagation_label"](device_image(image), d_labels, h, w,
                                     inputs["connectivity"])
    inputs["block"] = notebook_block(ns, mode)
    inputs["sweeps"] = sweeps
    return d_labels.copy_to_host()


def run_uf_init(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    n = h * w
    block = notebook_block(ns, mode)
    parents = L.output(n, -7, np.int32, "parents")
    roots = L.output(n, -7, np.int32, "roots")
    L.launch(ns["uf_init_kernel"], (L.blocks_for(w, block[0]), L.blocks_for(h, block[1])),
             block, device_image(image), parents, h, w, inputs["connectivity"])
    got_parents = parents.copy_to_host()
    threads = notebook_threads(ns, mode)
    L.launch(ns["uf_compress_kernel"], L.blocks_for(n, threads), threads, parents, roots, n)
    if not np.array_equal(parents.copy_to_host(), got_parents):
        raise Mismatch("uf_compress_kernel changed parents: it reads parents and writes roots")
    return got_parents, roots.copy_to_host()


def run_union_find(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, -7, np.int32))
    with watching(ns, "uf_merge_kernel", mode):
        ns["union_find_label"](device_image(image), d_labels, h, w, inputs["connectivity"])
    inputs["block"] = notebook_block(ns, mode)
    return d_labels.copy_to_host()


# --- exercises 7-8: scan, compaction ------------------------------------------------------------

def run_scan(ns, inputs, mode):
    x = inputs["x"]
    d_x = L.cuda().to_device(x)
    out = L.output(x.size, -99, np.int32, "out")
    ns["exclusive_scan"](d_x, out)
    after = d_x.copy_to_host()
    if not np.array_equal(after, x):
        raise Mismatch("exclusive_scan modified its input array")
    return out.copy_to_host()


def run_compaction(ns, inputs, mode):
    roots = inputs["roots"]
    d_roots = L.cuda().to_device(roots)
    out = L.output(roots.size, -99, np.int32, "out")
    count = ns["compact_labels"](d_roots, out)
    if not np.array_equal(d_roots.copy_to_host(), roots):
        raise Mismatch("compact_labels modified its input labels (write the result to out)")
    return out.copy_to_host(), count


# --- exercises 9-10: blob statistics -----------------------------------------------------------

def run_stats(ns, inputs, mode):
    labels, count = inputs["labels"], inputs["count"]
    h, w = labels.shape
    out = stat_outputs(count)
    block = notebook_block(ns, mode)
    grid = (L.blocks_for(w, block[0]), L.blocks_for(h, block[1]))
    L.launch(ns["blob_stats_kernel"], grid, block, L.cuda().to_device(labels.reshape(-1)), h, w,
             *(out[name] for name in STAT_NAMES))
    return {name: out[name].copy_to_host()[:count] for name in STAT_NAMES}


def run_stats_block(ns, inputs, mode):
    labels, count = inputs["labels"], inputs["count"]
    h, w = labels.shape
    tile = int(ns["TILE"])
    threads = tuple(int(v) for v in ns["STATS_THREADS"])
    out = stat_outputs(count)
    grid = (L.blocks_for(w, tile), L.blocks_for(h, tile))
    args = (L.cuda().to_device(labels.reshape(-1)), h, w, *(out[name] for name in STAT_NAMES))
    counter = [0]
    with counting_atomic_adds(out["area"], counter) if mode == "sim" else \
            contextlib.nullcontext():
        L.launch(ns["blob_stats_block_kernel"], grid, threads, *args)
    inputs["area_adds"] = counter[0] if mode == "sim" else None
    inputs["tile"] = tile
    return {name: out[name].copy_to_host()[:count] for name in STAT_NAMES}


# --- exercises 11-13: block labelling, run extraction on the GPU -------------------------------

def run_block_init(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    rows, cols, cells = cb.sizes(image.shape)
    block = notebook_block(ns, mode)
    forest = L.output(cells, GONE, np.int32, "forest")
    links = L.output(rows * cols, L.poison_value(np.uint8), np.uint8, "links")
    L.launch(ns["block_init_kernel"], (L.blocks_for(cols, block[0]), L.blocks_for(rows, block[1])),
             block, device_image(image), forest, links, h, w, inputs["connectivity"])
    inputs["tile"] = block
    return forest.copy_to_host(), links.copy_to_host()


BLOCK_LABEL_KERNELS = ("block_init_kernel", "block_merge_kernel", "resolve_roots_kernel",
                       "resolve_cells_kernel", "block_final_kernel")


def run_block_label(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    d_labels = L.cuda().to_device(np.full(h * w, GONE, np.int32))
    with watching(ns, BLOCK_LABEL_KERNELS, mode):
        count = ns["block_label"](device_image(image), d_labels, h, w, inputs["connectivity"])
    return d_labels.copy_to_host(), count


def run_gpu_runs(ns, inputs, mode):
    image = inputs["image"]
    h, w = image.shape
    runs = ns["gpu_extract_runs"](device_image(image), h, w)
    if hasattr(runs, "copy_to_host"):
        runs = runs.copy_to_host()
    return np.asarray(runs)
