"""Benchmark lesson 05's blob analysis on a GPU, next to cupyx (and OpenCV's CUDA labelling).

    python benchmarks/ccl.py OUT_DIR [--sizes 2048,8192] [--densities 0.1,0.3,0.5,0.59,0.9]
                             [--wall-loops 5] [--wall-calls 20]
                             [--record] [--opencv-cpu] [--sim-smoke]

For each size, density and connectivity (4 and 8): a random size x size binary image. Both
labellings of the solution notebook's ``BlobAnalysis`` ("blocks": section 7's block-based
union-find, the default; "pixels": exercises 5 and 6 with the compaction of exercise 8) are
first checked -- labels and count equal to scipy.ndimage.label's, statistics equal to numpy's
(up to 2048^2: numpy's reference is slow beyond) -- then timed phase by phase and end to end,
next to ``cupyx.scipy.ndimage.label`` (labels only) and, where the machine's OpenCV has it,
``cv2.cuda.connectedComponents`` (8-connectivity only), all in the same process.

Results go to OUT_DIR as they come: ``ccl.json`` (the parts below, in the format of
workbook/data/05_ccl.json) and ``ccl.md`` (the same tables), rewritten after each image,
and ``ccl.log`` (what was printed). ``--record`` also merges the parts into
workbook/data/05_ccl.json, keeping the parts this script does not write (``tiles``,
``end_to_end``, each with its own device and date).

Parts:
  phases       label, number, write + stats, pipeline ms per image and labelling (both
               labellings write the labels, then run exercise 10's statistics with the packed
               table, BlobAnalysis's default); cupyx label ms
               and x cupyx (cupyx's time over the pipeline's: above 1 is faster); wall ms,
               cupyx wall ms and x cupyx wall: the same as wall time per call in a loop
  memory       the block labelling (label, number, write the labels) against the memory
               floor: an image in (1 byte a pixel) and its labels out (4 bytes) at the GPU's
               peak bandwidth
  stats        per-pixel atomics (exercise 9) vs per-block partials (exercise 10) vs exercise
               10 with the packed table on given labels, and the block labelling's write: the
               labels alone, then the packed statistics (the default), and the fused write +
               statistics, largest size
  launches     the block labelling's label phase launch by launch (init + compress, merge,
               resolve + rank), largest size
  propagation  label propagation (exercise 4) vs the block labelling, --propagation-size

Times: the median of --repeat runs between CUDA events, L2 flushed before each (the label
phase's launches: the differences of the times of its first one, two and three launches,
each run after the ones before it as in a run). Wall times
(the host's Python included): ``run()`` called --wall-calls times in a loop, on two device
copies of the image in turn, the GPU synchronised at the end of the loop; the median over
--wall-loops loops, per call (cupyx's label likewise). The whole run takes about 3 minutes
on an H100. ``--sim-smoke`` runs the same code in the CUDA simulator on tiny images with a
wall-clock timer (to test the checks and the files).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--sim-smoke" in sys.argv:
    os.environ["WORKBOOK_MODE"] = "sim"

import numpy as np  # noqa: E402

import workbook  # noqa: E402  (selects the mode before numba.cuda is imported)
from grader.exercises.ccl import first_pixel_labels, scipy_labels, stats_reference  # noqa: E402
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import device_name, time_gpu  # noqa: E402
from workbook.recorded import format_table  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "05_ccl" / "ccl.ipynb"
RECORDED = ROOT / "workbook" / "data" / "05_ccl.json"
STAT_FIELDS = ("area", "xmin", "xmax", "ymin", "ymax", "xsum", "ysum")
LABELLINGS = ("blocks", "pixels")
BYTES_PER_PIXEL = 1 + 4  # a uint8 pixel in, an int32 label out
STATS_CHECK_LIMIT = 2048 * 2048  # numpy's statistics reference is slow beyond
PROPAGATION_DENSITIES = (0.3, 0.5, 0.59)
# one density: p = 0.5 is past 8-connectivity's percolation threshold (one large blob) and
# short of 4-connectivity's (many); an image, both labellings, costs the simulator about 15 s
SMOKE = {"sizes": "16,23", "densities": "0.5", "propagation_size": 9, "repeat": 1,
         "wall_loops": 1, "wall_calls": 1}


class CheckFailed(SystemExit):
    """A result disagrees with the reference: the run stops (what was written stays)."""


def random_image(size: int, p: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = np.empty((size, size), np.uint8)
    for row in range(0, size, 1024):  # in bands: no 8192 x 8192 float64 temporary
        band = rng.random((min(1024, size - row), size), dtype=np.float32)
        image[row:row + band.shape[0]] = band < p
    return image


WARM_UP_S = 1.0  # seconds of GPU work before the first measurement


def warm_up(ns, size: int, seconds: float = WARM_UP_S) -> None:
    """Keeps the GPU busy with blob analyses of a ``size`` x ``size`` image for ``seconds``:
    an idle GPU's clocks take a while to ramp up. Without this, two recorded runs timed the
    run of their first image (2048^2, p = 0.1) 2.9x and 1.5x as long as other runs did."""
    from numba import cuda

    image = cuda.to_device(random_image(size, 0.5, seed=99).reshape(-1))
    analysis = ns["BlobAnalysis"](size, size)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        analysis.run(image, 8)
    cuda.synchronize()


def milliseconds(fn, repeat: int) -> float:
    """Median time of fn() in ms: CUDA events on a GPU, one wall-clock run in the simulator."""
    if workbook.MODE == "gpu":
        return time_gpu(fn, warmup=2, repeat=repeat).median_ms
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def wall_ms(fn, sync, loops: int, calls: int) -> float:
    """Wall time per call of ``fn()`` in ms, the host's Python included: ``calls`` calls in a
    row, then ``sync()`` (the GPU's work done); the median over ``loops`` such loops, after
    one call and sync to warm up (on a GPU: the simulator has nothing to warm)."""
    if workbook.MODE == "gpu":
        fn()
        sync()
    times = []
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3 / calls)
    return float(np.median(times))


def peak_bandwidth() -> float | None:
    """The GPU's peak memory bandwidth in bytes per second (memory clock x bus width x 2)."""
    if workbook.MODE != "gpu":
        return None
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        return 2.0 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8
    except Exception:  # noqa: BLE001  (no cupy, or no such property: say n/a)
        pass
    try:
        from numba import cuda

        device = cuda.get_current_device()
        return 2.0 * device.MEMORY_CLOCK_RATE * 1e3 * device.GLOBAL_MEMORY_BUS_WIDTH / 8
    except Exception:  # noqa: BLE001
        return None


def first_difference(got: np.ndarray, want: np.ndarray) -> str:
    wrong = np.argwhere(got != want)
    y, x = wrong[0]
    return (f"{len(wrong)} pixels differ; first at ({y},{x}): got {got[y, x]}, "
            f"expected {want[y, x]}")


def check_labels(what: str, got: np.ndarray, want: np.ndarray) -> None:
    if not np.array_equal(got, want):
        raise CheckFailed(f"{what}: labels differ from scipy.ndimage.label: "
                          f"{first_difference(got, want)}")


def check_stats(what: str, stats: dict, want: dict, count: int) -> None:
    for name in STAT_FIELDS:
        got = stats[name].copy_to_host()[:count]
        if not np.array_equal(got, want[name]):
            k = int(np.flatnonzero(got != want[name])[0])
            raise CheckFailed(f"{what}: {name} of blob {k + 1} is {got[k]}, expected "
                              f"{want[name][k]}")


# --- baselines: each returns None where the library is missing --------------------------------

def cupyx_baseline(image: np.ndarray, connectivity: int, want: np.ndarray, repeat: int,
                   wall: tuple[int, int]):
    """(ms, wall ms, note) for cupyx.scipy.ndimage.label, after checking its labels; None if
    absent. ``wall``: (loops, calls) for :func:`wall_ms`."""
    try:
        import cupy
        from cupyx.scipy import ndimage as cupy_ndimage
    except ImportError:
        return None
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    c_image = cupy.asarray(image)
    labels, _ = cupy_ndimage.label(c_image, structure=structure)
    cupy.cuda.Device().synchronize()
    same = bool(cupy.array_equal(labels, cupy.asarray(want)))
    del labels
    ms = milliseconds(lambda: cupy_ndimage.label(c_image, structure=structure), repeat)
    wall = wall_ms(lambda: cupy_ndimage.label(c_image, structure=structure),
                   cupy.cuda.Device().synchronize, *wall)
    return ms, wall, "" if same else "cupyx labels differ from scipy's"


def opencv_cuda_baseline(image: np.ndarray, connectivity: int, count: int, repeat: int):
    """(ms, note) for OpenCV's cv2.cuda.connectedComponents (BKE, 8-connectivity only), or
    None where this OpenCV has no CUDA labelling or no CUDA device."""
    try:
        import cv2

        if not hasattr(cv2, "cuda") or cv2.cuda.getCudaEnabledDeviceCount() == 0 or \
                not hasattr(cv2.cuda, "connectedComponents"):
            return None
    except Exception:  # noqa: BLE001  (a CPU-only OpenCV raises on CUDA calls)
        return None
    if connectivity != 8:
        return "n/a", ""
    try:
        source = cv2.cuda_GpuMat()
        source.upload(image)
        labels = cv2.cuda.connectedComponents(source, connectivity=8, ltype=cv2.CV_32S)
        found = len(np.unique(labels.download())) - 1  # its labels are not consecutive
        stream = cv2.cuda.Stream_Null()

        def run():
            cv2.cuda.connectedComponents(source, connectivity=8, ltype=cv2.CV_32S)
            stream.waitForCompletion()

        ms = milliseconds(run, repeat)
    except Exception as exc:  # noqa: BLE001  (a binding that differs: say so, go on)
        return "n/a", f"cv2.cuda.connectedComponents failed: {type(exc).__name__}: {exc}"
    return ms, "" if found == count else f"OpenCV CUDA found {found} blobs, scipy {count}"


def opencv_cpu_ms(image: np.ndarray, connectivity: int) -> float | None:
    try:
        import cv2
    except ImportError:
        return None
    start = time.perf_counter()
    cv2.connectedComponentsWithStats(image, connectivity=connectivity, ltype=cv2.CV_32S)
    return (time.perf_counter() - start) * 1e3


def library_versions() -> str:
    versions = []
    for module in ("numba_cuda", "cupy", "cv2", "scipy"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except (ImportError, AttributeError):
            versions.append(f"{module} not installed")
    return ", ".join(versions)


# --- the measurements --------------------------------------------------------------------------

LABEL_LAUNCHES = ("init + compress", "merge", "resolve + rank")


def label_launches(analysis, d_image, connectivity, want, repeat) -> dict:
    """The block labelling's label phase launch by launch, in ms: the differences of the
    times of its first one, two and three launches (``BlobAnalysis.label_launches``: the
    launches of ``label``), after checking that the three, numbered and written, give
    scipy's labels ``want``."""
    a = analysis
    steps = a.label_launches(d_image, connectivity)
    for step in steps:
        step()
    a.number()
    a.write_labels()
    check_labels("the label phase's launches one by one",
                 a.labels.copy_to_host().reshape(want.shape), want)
    before, times = 0.0, {}
    for k, name in enumerate(LABEL_LAUNCHES):
        upto = milliseconds(lambda k=k: [step() for step in steps[:k + 1]], repeat)
        times[f"launch {name}"], before = upto - before, upto
    return times


def measure_image(ns, image, connectivity, repeat, wall=(5, 20), largest=None):
    """Check, then time, one image with both labellings; returns a dict of results. ``wall``:
    (loops, calls) for the wall times (:func:`wall_ms`); at side ``largest`` also the label
    phase's launches one by one (:func:`label_launches`)."""
    import itertools

    from numba import cuda

    size = image.shape[0]
    want, count = scipy_labels(image, connectivity)
    reference = stats_reference(want, count) if image.size <= STATS_CHECK_LIMIT else None
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    d_images = (d_image, cuda.to_device(np.ascontiguousarray(image.reshape(-1))))
    what = f"{size}x{size}, p={image.mean():.2f}, {connectivity}-connectivity"
    result = {"count": count, "largest": int(np.bincount(want.ravel())[1:].max()) if count else 0,
              "notes": []}
    for labelling in LABELLINGS:
        analysis = ns["BlobAnalysis"](size, size, labelling)
        got = analysis.run(d_image, connectivity)
        if got != count:
            raise CheckFailed(f"{what}, labelling {labelling!r}: {got} blobs, scipy finds {count}")
        check_labels(f"{what}, labelling {labelling!r}",
                     analysis.labels.copy_to_host().reshape(size, size), want)
        if reference is not None:
            check_stats(f"{what}, labelling {labelling!r}", analysis.stats, reference, count)
        times = {
            "label": milliseconds(lambda a=analysis: a.label(d_image, connectivity), repeat),
            "number": milliseconds(analysis.number, repeat),
            "write": milliseconds(lambda a=analysis: a.write(count), repeat),
            "pipeline": milliseconds(lambda a=analysis: a.run(d_image, connectivity), repeat),
        }
        # as a user calls it: in a loop, another image buffer each call (two, in turn)
        turn = itertools.cycle(d_images)
        times["wall"] = wall_ms(lambda a=analysis, t=turn: a.run(next(t), connectivity),
                                cuda.synchronize, *wall)
        if labelling == "blocks":
            analysis.label(d_image, connectivity)  # the labels alone: label, number, write
            analysis.number()
            analysis.write_labels()
            check_labels(f"{what}, the labels alone", analysis.labels.copy_to_host().reshape(
                size, size), want)
            times["labels"] = milliseconds(
                lambda a=analysis: (a.label(d_image, connectivity), a.number(),
                                    a.write_labels()), repeat)
            times["write_labels"] = milliseconds(analysis.write_labels, repeat)
            # section 8's fused write + statistics, checked as the default write is
            analysis.write(count, fused=True)
            check_labels(f"{what}, the fused write", analysis.labels.copy_to_host().reshape(
                size, size), want)
            if reference is not None:
                check_stats(f"{what}, the fused write", analysis.stats, reference, count)
            times["write_fused"] = milliseconds(
                lambda a=analysis: a.write(count, fused=True), repeat)
            # exercises 9 and 10 on the labels just written, and the default: exercise 10's
            # kernel with the packed table
            for kernel, key in ((ns["blob_stats_kernel"], "stats_pixel"),
                                (ns["blob_stats_block_kernel"], "stats_block"),
                                (None, "stats_packed")):
                if reference is not None:
                    analysis.statistics(count, kernel)
                    check_stats(f"{what}, {key}", analysis.stats, reference, count)
                times[key] = milliseconds(
                    lambda a=analysis, k=kernel: a.statistics(count, k), repeat)
            if size == largest:  # last: the launches leave the forest in the labels
                times.update(label_launches(analysis, d_image, connectivity, want,
                                            repeat))
        result[labelling] = times
        del analysis
    cupyx = cupyx_baseline(image, connectivity, want, repeat, wall)
    opencv = opencv_cuda_baseline(image, connectivity, count, repeat)
    result["cupyx"] = cupyx[0] if cupyx else None
    result["cupyx_wall"] = cupyx[1] if cupyx else None
    result["opencv_cuda"] = opencv[0] if opencv else None
    result["notes"] += [b[-1] for b in (cupyx, opencv) if b and b[-1]]
    return result


def measure_propagation(ns, image, connectivity, repeat):
    """Sweeps and time of propagation_label against the block labelling on one image."""
    from numba import cuda

    size = image.shape[0]
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    d_labels = cuda.device_array(image.size, np.int32)
    sweeps = ns["propagation_label"](d_image, d_labels, size, size, connectivity)
    if not np.array_equal(d_labels.copy_to_host(), first_pixel_labels(image, connectivity)):
        raise CheckFailed(f"propagation_label is wrong on a {size}x{size} image")
    analysis = ns["BlobAnalysis"](size, size)
    propagation = milliseconds(
        lambda: ns["propagation_label"](d_image, d_labels, size, size, connectivity),
        min(repeat, 3))
    blocks = milliseconds(lambda: (analysis.label(d_image, connectivity), analysis.number(),
                                   analysis.write_labels()), repeat)
    return sweeps, propagation, blocks


def ratio(a, b):
    return round(a / b, 3) if isinstance(a, int | float) and isinstance(b, int | float) and b \
        else "n/a"


def or_missing(value):
    return "n/a" if value is None else value


def build_parts(results, propagation, prop_size, repeat, bandwidth, wall=(5, 20)) -> dict:
    """The parts of the record from the results so far: (size, p, connectivity) -> result."""
    phase_rows, memory_rows, stat_rows, launch_rows = [], [], [], []
    largest = max((key[0] for key in results), default=0)
    for (size, p, connectivity), r in results.items():
        image = f"p={p:.2f}, {connectivity}-conn"
        for labelling in LABELLINGS:
            t = r[labelling]
            phase_rows.append([size, image, labelling, r["count"], t["label"], t["number"],
                               t["write"], t["pipeline"], or_missing(r["cupyx"]),
                               ratio(r["cupyx"], t["pipeline"]), t["wall"],
                               or_missing(r["cupyx_wall"]), ratio(r["cupyx_wall"], t["wall"]),
                               or_missing(r["opencv_cuda"])])
        labels_ms = r["blocks"]["labels"]
        nbytes = BYTES_PER_PIXEL * size * size
        floor_ms = nbytes / bandwidth * 1e3 if bandwidth else None
        memory_rows.append([size, image, round(nbytes / 1e6, 1), labels_ms,
                            or_missing(floor_ms), ratio(labels_ms, floor_ms),
                            round(nbytes / (labels_ms * 1e-3) / 1e9, 1)])
        if size == largest:
            b = r["blocks"]
            stat_rows.append([image, r["count"], r["largest"], b["stats_pixel"],
                              b["stats_block"], ratio(b["stats_pixel"], b["stats_block"]),
                              b["stats_packed"], b["write_labels"], b["write"],
                              b["write_fused"]])
            if f"launch {LABEL_LAUNCHES[0]}" in b:
                launch_rows.append([image, r["count"], b["label"]]
                                   + [b[f"launch {name}"] for name in LABEL_LAUNCHES])
    notes = sorted({n for r in results.values() for n in r["notes"]})
    timer = (f"median of {repeat} runs between CUDA events, L2 flushed before each"
             if workbook.MODE == "gpu" else "one wall-clock run in the CUDA simulator")
    loops, calls = wall
    peak = f"{bandwidth / 1e12:.2f} TB/s" if bandwidth else "unknown"
    parts = {
        "phases": {
            "title": "blob analysis of random binary images: labels 1..K with area, bounding "
                     f"box and centroid sums; ms, {timer}",
            "columns": ["size", "image", "labelling", "blobs", "label ms", "number ms",
                        "write + stats ms", "pipeline ms", "cupyx label ms", "x cupyx", "wall ms",
                        "cupyx wall ms", "x cupyx wall", "OpenCV CUDA ms"],
            "rows": phase_rows,
            "note": "pipeline: BlobAnalysis.run: label (union-find), number (the scan to "
                    "scipy's numbering; one host sync to read K), write + stats (the labels "
                    "1..K, then exercise 10's statistics with the packed table on them). "
                    "labelling 'blocks': "
                    "section 7's block-based union-find in section 8's fused launches (the "
                    "default; the write adds the scan's tile offsets); 'pixels': exercises 5 "
                    "and 6, numbered as in exercise 8, the relabel. cupyx label: "
                    "cupyx.scipy.ndimage.label alone (labels 1..K, no statistics); x cupyx: "
                    "cupyx's time over the pipeline's (above 1 is faster). wall ms: wall time "
                    "per call of BlobAnalysis.run in a loop (the "
                    f"host's Python included; {calls} calls on two image buffers in turn, the "
                    f"GPU synchronised at the end, median of {loops} loops); cupyx wall ms: "
                    "cupyx's label timed the same way; x cupyx wall: their ratio. "
                    "OpenCV CUDA: cv2.cuda.connectedComponents (BKE, 8-connectivity "
                    "only, labels not consecutive, no statistics), n/a where not installed."
                    + (" " + "; ".join(notes) if notes else ""),
        },
        "memory": {
            "title": "the block labelling (label, number, write the labels) against the "
                     "memory floor: each pixel read once (uint8) and its label written once "
                     f"(int32); peak {peak}",
            "columns": ["size", "image", "MB in + out", "labels ms", "floor ms", "x floor",
                        "GB/s"],
            "rows": memory_rows,
            "note": "floor ms: the image in and the labels out at the GPU's peak memory "
                    "bandwidth (memory clock x bus width x 2); x floor: labels ms over floor "
                    "ms; GB/s: the image and the labels over the measured time.",
        },
        "stats": {
            "title": f"blob statistics of {'an' if str(largest)[0] == '8' else 'a'} "
                     f"{largest}x{largest} image (labels 1..K given), ms",
            "columns": ["image", "blobs", "largest blob", "per-pixel atomics ms",
                        "per-block partials ms", "speed-up", "packed table ms",
                        "write labels ms", "write + stats ms", "fused write + stats ms"],
            "rows": stat_rows,
            "note": "per-pixel: blob_stats_kernel, seven global atomics per foreground pixel. "
                    "per-block: blob_stats_block_kernel, a shared-memory hash table per tile, "
                    "one global atomic per blob, tile and field; speed-up: per-pixel over "
                    "per-block. packed table: exercise 10's kernel with the table's fields packed "
                    "in 32-bit words (area and x sum in one, y sum, and the bounding box as a "
                    "mask of columns and one of rows: four shared-memory atomics per run), in "
                    "the thread shape that packed_stats_for picks for the image's blobs per "
                    "pixel. All "
                    "read the labels written before and include the kernel that resets the "
                    "statistics arrays. write labels: the block labelling's "
                    "last pass alone (block_write_kernel); write + stats: BlobAnalysis.write, "
                    "the default: the labels, then the reset and the packed table; "
                    "fused write + stats: write(count, fused=True), "
                    "the statistics computed in the labels' pass (block_write_stats_kernel, "
                    "exercise 10's table), with the reset.",
        },
    }
    if launch_rows:
        parts["launches"] = {
            "title": f"the block labelling's launches: the label phase of "
                     f"{'an' if str(largest)[0] == '8' else 'a'} {largest}x{largest} image "
                     "launch by launch, ms",
            "columns": ["image", "blobs", "label ms"]
                       + [f"{name} ms" for name in LABEL_LAUNCHES],
            "rows": launch_rows,
            "note": "label: BlobAnalysis.label (block_init_compress_kernel, block_merge_kernel, "
                    "resolve_rank_kernel). Each launch's time is the difference of the times "
                    "of the first one, two and three launches, each timed on its own after an "
                    "L2 flush: a launch runs after the ones before it, as in a run.",
        }
    if propagation:
        parts["propagation"] = {
            "title": f"label propagation vs the block labelling on {prop_size}x{prop_size} "
                     "random images, 4-connectivity",
            "columns": ["image", "sweeps", "propagation ms", "union-find ms", "ratio"],
            "rows": [[f"p={p:.2f}", sweeps, prop, uf, ratio(prop, uf)]
                     for p, (sweeps, prop, uf) in propagation.items()],
            "note": "propagation_label: one launch and one flag read-back per sweep. "
                    "union-find: BlobAnalysis.label, number and write_labels (labelling "
                    "'blocks').",
        }
    return parts


def markdown(record: dict) -> str:
    lines = [f"# Lesson 05 blob analysis: {record['device']}, {record['date']}", "",
             f"`{record['command']}`; {record['versions']}", ""]
    for part in record["parts"].values():
        lines += [f"## {part['title']}", "",
                  "| " + " | ".join(part["columns"]) + " |",
                  "|" + " --- |" * len(part["columns"])]
        for row in part["rows"]:
            cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", part.get("note", ""), ""]
    return "\n".join(lines)


def write_outputs(out: Path, record: dict) -> None:
    """ccl.json and ccl.md in ``out``, each written whole (to a temporary file, then renamed)."""
    for name, text in (("ccl.json", json.dumps(record, indent=1) + "\n"),
                       ("ccl.md", markdown(record))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)


def record_into(path: Path, record: dict) -> None:
    """Merge the run's parts into the lesson's recorded file, keeping its other parts (each of
    which carries its own device and date)."""
    old = json.loads(path.read_text()) if path.exists() else {"parts": {}}
    kept = {name: part for name, part in old["parts"].items()
            if name not in record["parts"] and "device" in part}
    path.write_text(json.dumps({**record, "parts": {**record["parts"], **kept}}, indent=1)
                    + "\n")


class Log:
    """Print and append to OUT_DIR/ccl.log (opened for each line: no file is left open when
    main() returns or raises, as tests/test_ccl_exercises.py calls it in its process)."""

    def __init__(self, path: Path):
        self.path = path
        path.write_text("")

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        with self.path.open("a") as file:
            file.write(text + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for ccl.json, ccl.md and ccl.log")
    parser.add_argument("--sizes", default="2048,8192", help="image sides (comma-separated)")
    parser.add_argument("--densities", default="0.1,0.3,0.5,0.59,0.9",
                        help="foreground densities (comma-separated)")
    parser.add_argument("--connectivities", default="4,8")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per measurement")
    parser.add_argument("--wall-loops", type=int, default=5,
                        help="loops of run() calls for the wall times (their median is kept)")
    parser.add_argument("--wall-calls", type=int, default=20,
                        help="run() calls per loop for the wall times")
    parser.add_argument("--propagation-size", type=int, default=2048,
                        help="image side for the propagation part (0: skip it)")
    parser.add_argument("--record", action="store_true",
                        help=f"also merge the parts into {RECORDED.relative_to(ROOT)}")
    parser.add_argument("--opencv-cpu", action="store_true",
                        help="also time OpenCV's connectedComponentsWithStats on the CPU, once "
                             "per image (seconds each at 8192^2: not by default)")
    parser.add_argument("--sim-smoke", action="store_true",
                        help="the CUDA simulator, tiny images: tests the checks and the files")
    args = parser.parse_args(argv)
    if args.sim_smoke:
        args.sizes, args.densities = SMOKE["sizes"], SMOKE["densities"]
        args.propagation_size, args.repeat = SMOKE["propagation_size"], SMOKE["repeat"]
        args.wall_loops, args.wall_calls = SMOKE["wall_loops"], SMOKE["wall_calls"]
    elif workbook.MODE != "gpu":
        parser.error("this benchmark needs a GPU (or --sim-smoke)")
    args.out.mkdir(parents=True, exist_ok=True)
    log = Log(args.out / "ccl.log")
    sizes = [int(s) for s in args.sizes.split(",")]
    densities = [float(p) for p in args.densities.split(",")]
    connectivities = [int(c) for c in args.connectivities.split(",")]
    bandwidth = peak_bandwidth()
    started = time.monotonic()
    log(f"{device_name()}; {library_versions()}; peak memory bandwidth "
        f"{'n/a' if bandwidth is None else f'{bandwidth / 1e12:.2f} TB/s'}")
    ns = definitions_namespace(NOTEBOOK)
    record = {"device": device_name(), "date": datetime.date.today().isoformat(),
              "command": "python benchmarks/ccl.py " + " ".join(argv or sys.argv[1:]),
              "versions": library_versions(), "parts": {}}
    results, propagation = {}, {}
    prop_size = min(args.propagation_size, max(sizes))
    if workbook.MODE == "gpu":
        warm_up(ns, sizes[0])
    wall = (args.wall_loops, args.wall_calls)
    for size in sizes:
        for k, p in enumerate(densities):
            image = random_image(size, p, seed=k)
            for connectivity in connectivities:
                r = measure_image(ns, image, connectivity, args.repeat, wall, max(sizes))
                if args.opencv_cpu:
                    cpu = opencv_cpu_ms(image, connectivity)
                    r["notes"].append(f"{size}^2 p={p} {connectivity}-conn: OpenCV CPU "
                                      f"{'n/a' if cpu is None else f'{cpu:.0f} ms'}")
                results[(size, p, connectivity)] = r
                b, px = r["blocks"], r["pixels"]
                log(f"{size}^2 p={p:.2f} {connectivity}-conn: {r['count']:,} blobs; blocks "
                    f"label {b['label']:.3f} number {b['number']:.3f} write + stats "
                    f"{b['write']:.3f} (fused {b['write_fused']:.3f}) "
                    f"pipeline {b['pipeline']:.3f} ms, wall {b['wall']:.3f} ms per run; pixels "
                    f"pipeline {px['pipeline']:.3f} ms, wall {px['wall']:.3f} ms; cupyx "
                    f"{or_missing(r['cupyx'])} ms, wall {or_missing(r['cupyx_wall'])} ms; "
                    "OpenCV CUDA "
                    f"{or_missing(r['opencv_cuda'])} ms; {time.monotonic() - started:.0f} s")
                record["parts"] = build_parts(results, propagation, prop_size, args.repeat,
                                              bandwidth, wall)
                write_outputs(args.out, record)
    if prop_size > 0:
        for k, p in enumerate(PROPAGATION_DENSITIES):
            image = random_image(prop_size, p, seed=100 + k)
            propagation[p] = sweeps, prop, blocks = measure_propagation(ns, image, 4,
                                                                        args.repeat)
            log(f"propagation {prop_size}^2 p={p:.2f}: {sweeps} sweeps, {prop:.2f} ms vs block "
                f"labelling {blocks:.3f} ms")
    record["parts"] = build_parts(results, propagation, prop_size, args.repeat, bandwidth, wall)
    write_outputs(args.out, record)
    for part in record["parts"].values():
        log(f"\n{part['title']}\n\n{format_table(part['columns'], part['rows'])}\n\n{part['note']}")
    if args.record:
        record_into(RECORDED, record)
        log(f"\nmerged into {RECORDED}")
    log(f"\ndone in {time.monotonic() - started:.0f} s; wrote {args.out / 'ccl.json'}, "
        f"{args.out / 'ccl.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
