"""Benchmark lesson 05's blob analysis on a GPU, next to cupyx and OpenCV.

    python benchmarks/ccl.py [--size 8192] [--densities 0.3,0.5,0.59] [--out FILE]

For each density and connectivity (4 and 8): a random size x size binary image. The
lesson's pipeline (``BlobAnalysis`` of the solution notebook: union-find labelling,
compaction to 1..K, statistics from per-block partials) is first checked -- labels equal
to scipy.ndimage.label's and to cupyx's, statistics equal to numpy's -- then timed phase
by phase and end to end, next to ``cupyx.scipy.ndimage.label`` (labels only) and OpenCV's
``connectedComponentsWithStats`` on the CPU, all in the same run. The same pipeline with
its labelling tile by tile (``BlobAnalysis(..., labelling="tiles")``: ``label_tiles``,
tiles labelled in shared memory, then unions across tile borders only) is checked and
timed beside it, as an extra row per image (", tiles").

Parts of workbook/data/05_ccl.json:
  phases       label, relabel, stats, pipeline vs cupyx label and OpenCV (ms); a row per
               image for each labelling (per pixel, and ", tiles")
  stats        per-pixel atomics (exercise 8) vs per-block partials (exercise 9)
  propagation  label propagation (exercise 4) vs union-find on --propagation-size images

In simulator mode (WORKBOOK_MODE=sim) the same code runs on tiny images (e.g. --size 16)
with a wall-clock timer, to test the checks and the JSON; it writes a file only where
--out says.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import workbook  # noqa: E402  (selects the mode before numba.cuda is imported)
from grader.exercises.ccl import scipy_labels, stats_reference  # noqa: E402
from grader.runner import definitions_namespace  # noqa: E402
from workbook.bench import device_name, time_gpu  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "05_ccl" / "ccl.ipynb"
DEFAULT_OUT = ROOT / "workbook" / "data" / "05_ccl.json"
STAT_FIELDS = ("area", "xmin", "xmax", "ymin", "ymax", "xsum", "ysum")
TARGET = 0.5  # the lesson's goal: the whole blob analysis in at most half of cupyx's label


class CheckFailed(SystemExit):
    """A result disagrees with the reference: nothing is timed or written."""


def random_image(size: int, p: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = np.empty((size, size), np.uint8)
    for row in range(0, size, 1024):  # in bands: no 8192 x 8192 float64 temporary
        band = rng.random((min(1024, size - row), size), dtype=np.float32)
        image[row:row + band.shape[0]] = band < p
    return image


def milliseconds(fn, repeat: int) -> float:
    """Median time of fn() in ms: CUDA events on a GPU, one wall-clock run in the simulator."""
    if workbook.MODE == "gpu":
        return time_gpu(fn, warmup=2, repeat=repeat).median_ms
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def host_milliseconds(fn, repeat: int) -> tuple[float, object]:
    """Median wall-clock time of a CPU function in ms, and its last result."""
    times, result = [], None
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times)), result


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

def cupyx_baseline(image: np.ndarray, connectivity: int, want: np.ndarray, repeat: int):
    """(ms, note) for cupyx.scipy.ndimage.label, after checking its labels; None if absent."""
    try:
        import cupy
        from cupyx.scipy import ndimage as cupy_ndimage
    except ImportError:
        return None
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    c_image = cupy.asarray(image)
    labels, count = cupy_ndimage.label(c_image, structure=structure)
    cupy.cuda.Device().synchronize()
    host = cupy.asnumpy(labels)
    note = "" if np.array_equal(host, want) else "cupyx labels differ from scipy's"
    del labels, host
    start = time.perf_counter()
    cupy_ndimage.label(c_image, structure=structure)
    cupy.cuda.Device().synchronize()
    once = time.perf_counter() - start
    runs = repeat if once < 0.5 else 3
    ms = milliseconds(lambda: cupy_ndimage.label(c_image, structure=structure), runs)
    return ms, note


def opencv_baseline(image: np.ndarray, connectivity: int, areas: np.ndarray, repeat: int):
    """(ms, note) for OpenCV's connectedComponentsWithStats on the CPU; None if absent."""
    try:
        import cv2
    except ImportError:
        return None

    def run():
        return cv2.connectedComponentsWithStats(image, connectivity=connectivity,
                                                ltype=cv2.CV_32S)

    ms, (count, _labels, stats, _centroids) = host_milliseconds(run, repeat)
    note = ""
    if count - 1 != len(areas) or not np.array_equal(
            np.sort(stats[1:, cv2.CC_STAT_AREA]), np.sort(areas)):
        note = f"OpenCV found {count - 1} blobs, the others {len(areas)}"
    return ms, note


def library_versions() -> str:
    versions = []
    for module in ("numba_cuda", "cupy", "cv2", "scipy"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except (ImportError, AttributeError):
            versions.append(f"{module} not installed")
    return ", ".join(versions)


# --- the measurements --------------------------------------------------------------------------

def measure_image(ns, image, connectivity, repeat, opencv_repeat):
    """Check, then time, one image; returns a dict of results."""
    from numba import cuda

    size = image.shape[0]
    want, count_want = scipy_labels(image, connectivity)
    analysis = ns["BlobAnalysis"](size, size)
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    count = analysis.run(d_image, connectivity)
    what = f"{size}x{size}, p={image.mean():.2f}, {connectivity}-connectivity"
    if count != count_want:
        raise CheckFailed(f"{what}: {count} blobs, scipy finds {count_want}")
    check_labels(what, analysis.labels.copy_to_host().reshape(size, size), want)
    reference = stats_reference(want, count)
    check_stats(f"{what}, per-block statistics", analysis.stats, reference, count)
    analysis.statistics(count, ns["blob_stats_kernel"])
    check_stats(f"{what}, per-pixel statistics", analysis.stats, reference, count)
    tiles = ns["BlobAnalysis"](size, size, labelling="tiles")
    count_tiles = tiles.run(d_image, connectivity)
    if count_tiles != count:
        raise CheckFailed(f"{what}, labelling tile by tile: {count_tiles} blobs, scipy finds "
                          f"{count_want}")
    check_labels(f"{what}, labelling tile by tile",
                 tiles.labels.copy_to_host().reshape(size, size), want)
    check_stats(f"{what}, labelling tile by tile", tiles.stats, reference, count)

    result = {
        "count": count,
        "largest": int(reference["area"].max()) if count else 0,
        "label": milliseconds(lambda: analysis.label(d_image, connectivity), repeat),
        "relabel": milliseconds(analysis.relabel, repeat),
        "stats": milliseconds(lambda: analysis.statistics(count), repeat),
        "stats_pixel": milliseconds(lambda: analysis.statistics(count, ns["blob_stats_kernel"]),
                                    repeat),
        "pipeline": milliseconds(lambda: analysis.run(d_image, connectivity), repeat),
        "label_tiles": milliseconds(lambda: tiles.label_tiles(d_image, connectivity), repeat),
        "pipeline_tiles": milliseconds(lambda: tiles.run(d_image, connectivity), repeat),
    }
    notes = []
    cupyx = cupyx_baseline(image, connectivity, want, repeat)
    result["cupyx"] = cupyx[0] if cupyx else None
    opencv = opencv_baseline(image, connectivity, reference["area"], opencv_repeat)
    result["opencv"] = opencv[0] if opencv else None
    for baseline in (cupyx, opencv):
        if baseline and baseline[1]:
            notes.append(baseline[1])
    result["notes"] = notes
    return result


def measure_propagation(ns, image, connectivity, repeat):
    """Sweeps and time of propagation_label against BlobAnalysis.label on one image."""
    from numba import cuda

    size = image.shape[0]
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    d_labels = cuda.device_array(image.size, np.int32)
    sweeps = ns["propagation_label"](d_image, d_labels, size, size, connectivity)
    analysis = ns["BlobAnalysis"](size, size)
    analysis.label(d_image, connectivity)
    if not np.array_equal(d_labels.copy_to_host(), analysis.roots.copy_to_host()):
        raise CheckFailed(f"propagation and union-find disagree on a {size}x{size} image")
    propagation = milliseconds(
        lambda: ns["propagation_label"](d_image, d_labels, size, size, connectivity),
        min(repeat, 3))
    union_find = milliseconds(lambda: analysis.label(d_image, connectivity), repeat)
    return sweeps, propagation, union_find


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def or_missing(value):
    return "n/a" if value is None else value


def shown(ms) -> str:
    return "n/a" if ms is None else f"{ms:.3f}"


def build_parts(size, results, propagation, prop_size, repeat, opencv_threads, tile) -> dict:
    phase_rows, stat_rows = [], []
    for (p, connectivity), r in results.items():
        name = f"p={p:.2f}, {connectivity}-conn"
        phase_rows.append([name, r["count"], r["label"], r["relabel"], r["stats"],
                           r["pipeline"], or_missing(r["cupyx"]),
                           or_missing(ratio(r["pipeline"], r["cupyx"])),
                           or_missing(r["opencv"])])
        # the same image, labelled tile by tile (relabel and stats do not depend on it)
        phase_rows.append([f"{name}, tiles", r["count"], r["label_tiles"], r["relabel"],
                           r["stats"], r["pipeline_tiles"], or_missing(r["cupyx"]),
                           or_missing(ratio(r["pipeline_tiles"], r["cupyx"])),
                           or_missing(r["opencv"])])
        stat_rows.append([name, r["count"], r["largest"], r["stats_pixel"], r["stats"],
                          ratio(r["stats_pixel"], r["stats"])])
    notes = sorted({n for r in results.values() for n in r["notes"]})
    timer = (f"median of {repeat} runs between CUDA events, L2 flushed before each"
             if workbook.MODE == "gpu" else "one wall-clock run in the CUDA simulator")
    parts = {
        "phases": {
            "title": f"blob analysis of a {size}x{size} random binary image: labels 1..K "
                     f"with area, bounding box and centroid sums; ms, {timer}",
            "columns": ["image", "blobs", "label ms", "relabel ms", "stats ms", "pipeline ms",
                        "cupyx label ms", "pipeline / cupyx", "OpenCV ms"],
            "rows": phase_rows,
            "note": "pipeline: BlobAnalysis.run (union-find, compaction to scipy's numbering, "
                    "per-block statistics; one host sync to read K). cupyx label: "
                    "cupyx.scipy.ndimage.label alone (labels 1..K, no statistics). OpenCV: "
                    f"connectedComponentsWithStats on the CPU ({opencv_threads} threads), "
                    "labels and statistics. Rows ', tiles': BlobAnalysis(labelling='tiles'), "
                    "label_tiles (tiles labelled in shared memory, unions across tile borders "
                    "only) in label and pipeline; relabel and stats as in the row above. "
                    f"Target: pipeline / cupyx <= {TARGET}."
                    + (" " + "; ".join(notes) if notes else ""),
        },
        "stats": {
            "title": f"blob statistics of a {size}x{size} image (labels 1..K given), ms",
            "columns": ["image", "blobs", "largest blob", "per-pixel atomics ms",
                        "per-block partials ms", "speed-up"],
            "rows": stat_rows,
            "note": "per-pixel: blob_stats_kernel, seven global atomics per foreground pixel. "
                    f"per-block: blob_stats_block_kernel, a shared-memory hash table per "
                    f"{tile}x{tile} tile, one global atomic per blob, tile and field. Both include "
                    "the kernel that resets the statistics arrays.",
        },
    }
    if propagation:
        parts["propagation"] = {
            "title": f"label propagation vs union-find on {prop_size}x{prop_size} random "
                     "images, 4-connectivity",
            "columns": ["image", "sweeps", "propagation ms", "union-find ms", "ratio"],
            "rows": [[f"p={p:.2f}", sweeps, prop, uf, ratio(prop, uf)]
                     for p, (sweeps, prop, uf) in propagation.items()],
            "note": "propagation_label: one launch and one flag read-back per sweep. "
                    "union-find: BlobAnalysis.label, four kernels and a copy.",
        }
    return parts


def print_table(part: dict) -> None:
    from workbook.recorded import format_table

    print(f"\n{part['title']}\n")
    print(format_table(part["columns"], part["rows"]))
    print(f"\n{part['note']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8192, help="image side (default 8192)")
    parser.add_argument("--densities", default="0.3,0.5,0.59",
                        help="comma-separated foreground densities")
    parser.add_argument("--connectivities", default="4,8")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per measurement")
    parser.add_argument("--opencv-repeat", type=int, default=3)
    parser.add_argument("--propagation-size", type=int, default=2048,
                        help="image side for the propagation part (0: skip it)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"JSON file (default on a GPU: {DEFAULT_OUT.relative_to(ROOT)}; "
                             "in the simulator: none)")
    args = parser.parse_args()
    out = args.out or (DEFAULT_OUT if workbook.MODE == "gpu" else None)
    densities = [float(p) for p in args.densities.split(",")]
    connectivities = [int(c) for c in args.connectivities.split(",")]
    print(f"{device_name()}; {library_versions()}", flush=True)

    ns = definitions_namespace(NOTEBOOK)
    results = {}
    for k, p in enumerate(densities):
        image = random_image(args.size, p, seed=k)
        for connectivity in connectivities:
            r = measure_image(ns, image, connectivity, args.repeat, args.opencv_repeat)
            results[(p, connectivity)] = r
            print(f"p={p:.2f} {connectivity}-conn: {r['count']:,} blobs; label "
                  f"{r['label']:.3f} relabel {r['relabel']:.3f} stats {r['stats']:.3f} "
                  f"(per pixel {r['stats_pixel']:.3f}) pipeline {r['pipeline']:.3f} ms; "
                  f"tiles: label {r['label_tiles']:.3f} pipeline {r['pipeline_tiles']:.3f} ms; "
                  f"cupyx {shown(r['cupyx'])} ms; OpenCV {shown(r['opencv'])} ms", flush=True)

    propagation = {}
    prop_size = min(args.propagation_size, args.size)
    if prop_size > 0:
        for k, p in enumerate(densities):
            image = random_image(prop_size, p, seed=100 + k)
            propagation[p] = measure_propagation(ns, image, 4, args.repeat)
            sweeps, prop, uf = propagation[p]
            print(f"propagation {prop_size}x{prop_size} p={p:.2f}: {sweeps} sweeps, "
                  f"{prop:.2f} ms vs union-find {uf:.3f} ms", flush=True)

    try:
        import cv2

        opencv_threads = cv2.getNumThreads()
    except ImportError:
        opencv_threads = "n/a"
    parts = build_parts(args.size, results, propagation, prop_size, args.repeat,
                        opencv_threads, ns["TILE"])
    for part in parts.values():
        print_table(part)
    record = {
        "device": device_name(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/ccl.py" + ("" if args.size == 8192 else
                                                 f" --size {args.size}"),
        "versions": library_versions(),
        "parts": parts,
    }
    if out is None:
        print("\nsimulator run: no JSON written (pass --out FILE to write one)")
        return
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
