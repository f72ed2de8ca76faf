"""Lesson 05: the solutions pass, known-buggy variants are rejected, and the test images and
references behave as the checks assume."""

import numpy as np
import pytest
from solution_cells import bug_id, namespace_with, namespace_with_variant, solution_notebook

import workbook
from grader.exercise import Case, Mismatch, check_exercise
from grader.exercises import ccl
from grader.exercises import get as get_exercise
from grader.runner import exec_cell

LESSON = "05_ccl"

def _sanitizer():
    try:
        from workbook.sim import sanitizer
    except ImportError:
        return None
    return sanitizer


def _checks_races_within_blocks() -> bool:
    sanitizer = _sanitizer()
    return sanitizer is not None and sanitizer.is_enabled()


def _checks_races_between_blocks() -> bool:
    sanitizer = _sanitizer()  # where there is a sanitizer, it also runs the watch between blocks
    return sanitizer is None or sanitizer.is_enabled()


# on a GPU a race may happen to give the right answer on one run: simulator only
RACE = [pytest.mark.sim_only,
        pytest.mark.skipif(not _checks_races_between_blocks(),
                           reason="the simulator's race checks are turned off")]
# races between threads of one block: only a simulator with a race checker sees them
BLOCK_RACE = [pytest.mark.sim_only,
              pytest.mark.skipif(not _checks_races_within_blocks(),
                                 reason="the simulator does not check races within a block")]

MERGE_NEIGHBOURS = ("        for dx in range(-1, 2):\n            if dy < 0 or dx < 0:\n"
                    "                j = neighbour(image, y, x, dy, dx, height, width, "
                    "connectivity)\n                if j >= 0 and roots[j]")

# Bounds one past the image at the edges of a block or tile: the simulator raises
# IndexError ("... is out of bounds ...") where the index leaves the image. On a GPU a
# thread one column past a row reads the next row's first pixel as its own, and the last
# row's reads leave the image's allocation: what they read is undefined, and an atomic on
# an index read there may fault and take the test process's GPU context with it. They are
# checked in the simulator (in gpu mode the grader's simulator pass and memcheck, on the
# exact-size images, report them).
STATS_RUN = "for x in range(x0, min(x0 + PIXELS, width)):"
STATS_ROWS = "    if y < height:\n        " + STATS_RUN
STATS_BOUND = "    if x >= width or y >= height:\n        return\n    k = labels"
INIT_BOUND = "    if x >= width or y >= height:\n        return\n    i = y * width + x\n    parent"
PAST_IMAGE = pytest.mark.sim_only

# (exercise, bug, text in the solution, replacement, words expected in the message: a
# string, or a tuple of alternatives)
BUGGY = [
    pytest.param("stats", "column bound one past the row (x > width)", STATS_BOUND,
                 STATS_BOUND.replace("x >= width", "x > width"), "out of bounds",
                 marks=PAST_IMAGE),
    pytest.param("stats_block", "a thread's pixels not clamped at the row's end", STATS_RUN,
                 "for x in range(x0, x0 + PIXELS):", "out of bounds", marks=PAST_IMAGE),
    pytest.param("stats_block", "tile rows past the image (y <= height)", STATS_ROWS,
                 STATS_ROWS.replace("y < height", "y <= height"), "out of bounds",
                 marks=PAST_IMAGE),
    pytest.param("union_find", "init kernel's column bound one past the row (x > width)",
                 INIT_BOUND, INIT_BOUND.replace("x >= width", "x > width"), "out of bounds",
                 marks=PAST_IMAGE),
    ("flood_fill", "4-neighbours under 8-connectivity", "NEIGHBOURS[connectivity]:",
     "NEIGHBOURS[4]:", "8-adjacent"),
    ("runs", "stop inclusive", "runs.append((y, start, x))", "runs.append((y, start, x - 1))",
     "stop is exclusive"),
    ("run_labels", "no diagonal contact under 8-connectivity",
     "reach = 1 if connectivity == 8 else 0", "reach = 0", "8-adjacent"),
    ("propagation", "8-neighbours under 4-connectivity",
     "j = neighbour(image, y, x, dy, dx, height, width, connectivity)\n"
     "                if j >= 0 and labels_in[j] < best:",
     "j = neighbour(image, y, x, dy, dx, height, width, 8)\n"
     "                if j >= 0 and labels_in[j] < best:", "diagonal"),
    ("propagation", "stops after one sweep", "        if changed[0] == 0:\n            break",
     "        break", "smallest index"),
    pytest.param("union_find", "missing atomic in the merge",
                 "old = cuda.atomic.min(forest, a, b)",
                 "old = forest[a]\n        forest[a] = min(old, b)", "race", marks=RACE),
    ("union_find", "no final resolve",
     "    uf_compress_kernel[grid_1d(n), THREADS](forest, d_labels, n)\n", "", "missing merge"),
    ("union_find", "merge misses the up-right neighbour", MERGE_NEIGHBOURS,
     MERGE_NEIGHBOURS.replace("range(-1, 2)", "range(-1, 1)"), "8-adjacent"),
    ("union_find", "smaller root linked below the larger", "        if a < b:\n",
     "        if a > b:\n", ""),
    ("scan", "off by one (inclusive scan)",
     "            out[base + j] = running\n            running += value",
     "            running += value\n            out[base + j] = running", "inclusive"),
    ("scan", "block offsets never added",
     "        add_offsets_kernel[blocks, SCAN_THREADS](d_out, offsets, n)\n", "", "offsets"),
    ("compaction", "labels start at 0", "out[i] = ranks[root] + 1 if root >= 0 else 0",
     "out[i] = ranks[root] if root >= 0 else 0", "one less"),
    ("compaction", "every foreground pixel flagged", "flags[i] = 1 if labels[i] == i else 0",
     "flags[i] = 1 if labels[i] >= 0 else 0", "expected label"),
    pytest.param("stats", "plain += on area", "cuda.atomic.add(area, k, 1)", "area[k] += 1",
                 "race", marks=RACE),
    ("stats", "min where max is meant", "cuda.atomic.max(xmax, k, x)",
     "cuda.atomic.min(xmax, k, x)", "xmax"),
    pytest.param("stats_block", "plain += when flushing the table",
                 "cuda.atomic.add(area, k, t_area[s])", "area[k] += t_area[s]", "race",
                 marks=RACE),
    pytest.param("stats_block", "slot claimed without compare-and-swap",
                 "        old = cuda.atomic.cas(keys, s, EMPTY, k)\n",
                 "        old = keys[s]\n        keys[s] = k if old == EMPTY else old\n",
                 "race", marks=BLOCK_RACE),
    ("gpu_runs", "run at the end of a row lost", "for x in range(width + 1):",
     "for x in range(width):", "run"),
]

# blob_stats_block_kernel that covers the tile correctly but sends every pixel straight to
# the global arrays: right results, no saving in atomic traffic
@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in ccl.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"ccl.{exercise}")
    before = dict(ns)
    result = check_exercise(get_exercise(f"ccl.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()
    # the grader swaps the merge kernel for a watched stand-in while it runs: restored after
    assert all(ns[name] is value for name, value in before.items())


@pytest.mark.parametrize("exercise,bug,old,new,words", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, words):
    ns = namespace_with(LESSON, f"ccl.{exercise}", old, new)
    result = check_exercise(get_exercise(f"ccl.{exercise}"), ns, workbook.MODE)
    assert not result.passed, f"{bug} was not caught: {result.summary()}"
    alternatives = (words,) if isinstance(words, str) else words
    assert any(w in result.summary() for w in alternatives), result.summary()


def _slow_stats_block_namespace():
    return namespace_with_variant(LESSON, "ccl.stats_block", ccl.SLOW_VARIANTS["ccl.stats_block"])


@pytest.mark.sim_only  # the atomics are counted in the simulator; on a GPU ncu counts them
def test_per_pixel_atomics_rejected_by_block_statistics():
    """The metric rules' slow variant: right numbers, but one atomic per pixel."""
    ns = _slow_stats_block_namespace()
    result = check_exercise(get_exercise("ccl.stats_block"), ns, workbook.MODE)
    assert not result.passed
    assert "cuda.atomic.add calls on area" in result.summary()
    assert "results are right" in result.summary()


@pytest.mark.sim_only
def test_profile_launch_runs_for_the_solution_and_the_slow_variant(monkeypatch):
    """The GPU profile launch, at a simulator size: both kernels give the same statistics."""
    monkeypatch.setattr(ccl, "STATS_PROFILE", ((12, 20), 0.6, 8))
    outputs = []
    monkeypatch.setattr(ccl, "_stat_outputs", lambda count, real=ccl._stat_outputs:
                        outputs.append(real(count)) or outputs[-1])
    exercise = get_exercise("ccl.stats_block")
    results = []
    for ns in (namespace_with(LESSON, "ccl.stats_block"), _slow_stats_block_namespace()):
        outputs.clear()
        exercise.profile(ns)
        assert len(outputs) == 2  # the warm-up launch and the profiled one
        results.append({k: v.copy_to_host() for k, v in outputs[-1].items()})
    labels, count = ccl.scipy_labels(
        ccl.random_image(np.random.default_rng(0), (12, 20), 0.6), 8)
    want = ccl.stats_reference(labels, count)
    for got in results:
        for name in ccl.STAT_NAMES:
            np.testing.assert_array_equal(got[name][:count], want[name], err_msg=name)


# --- test images and references ----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(12, 12), (10, 13), (1, 7), (7, 1), (2, 2)])
def test_spiral_is_one_path(shape):
    image = ccl.spiral_image(shape)
    for connectivity in (4, 8):
        assert ccl.scipy_labels(image, connectivity)[1] == 1


@pytest.mark.parametrize("shape", [(15, 15), (14, 13), (1, 6), (6, 1)])
def test_maze_is_one_tree(rng, shape):
    image = ccl.maze_image(rng, shape)
    assert ccl.scipy_labels(image, 4)[1] == 1
    # a tree: (pixels - 1) edges between 4-adjacent foreground pixels
    edges = int((image[:, 1:] & image[:, :-1]).sum() + (image[1:] & image[:-1]).sum())
    assert edges == int(image.sum()) - 1


def test_checkerboard_differs_between_connectivities():
    image = ccl.checker_image((6, 7))
    assert ccl.scipy_labels(image, 4)[1] == int(image.sum())
    assert ccl.scipy_labels(image, 8)[1] == 1


def test_scipy_numbers_blobs_in_raster_order_of_first_pixel(rng):
    for _ in range(20):
        image = ccl.random_image(rng, (20, 23), rng.uniform(0.2, 0.8))
        for connectivity in (4, 8):
            labels, count = ccl.scipy_labels(image, connectivity)
            flat = labels.ravel()
            values, first = np.unique(flat[flat > 0], return_index=True)
            assert values.tolist() == list(range(1, count + 1))
            assert (np.diff(first) > 0).all()


def test_first_pixel_labels_and_runs_reference(rng):
    image = ccl.random_image(rng, (9, 11), 0.5)
    roots = ccl.first_pixel_labels(image, 4)
    labels, _ = ccl.scipy_labels(image, 4)
    flat = labels.ravel()
    for i in np.flatnonzero(flat):
        assert roots[i] == np.flatnonzero(flat == flat[i])[0]
    assert (roots[flat == 0] == -1).all()
    runs = ccl.runs_reference(image)
    painted = np.zeros_like(image)
    for y, start, stop in runs:
        painted[y, start:stop] = 1
    assert np.array_equal(painted, image)


def test_stats_reference_matches_a_loop(rng):
    labels, count = ccl.scipy_labels(ccl.random_image(rng, (10, 12), 0.5), 8)
    stats = ccl.stats_reference(labels, count)
    for k in range(1, count + 1):
        ys, xs = np.nonzero(labels == k)
        assert stats["area"][k - 1] == len(ys)
        assert (stats["xmin"][k - 1], stats["xmax"][k - 1]) == (xs.min(), xs.max())
        assert (stats["ymin"][k - 1], stats["ymax"][k - 1]) == (ys.min(), ys.max())
        assert (stats["xsum"][k - 1], stats["ysum"][k - 1]) == (xs.sum(), ys.sum())


def test_partition_messages_name_pixels_and_blocks():
    image = np.ones((4, 8), np.uint8)
    got = np.zeros((4, 8), np.int64)
    got[:, 4:] = 4  # the right half labelled apart: a merge missing across x = 3 | 4
    with pytest.raises(Mismatch, match=r"pixels \(0, 3\) and \(0, 4\).*different thread "
                                       r"blocks, \(0, 0\) and \(1, 0\)"):
        ccl.explain_partition(got, image, 4, -1, block=(4, 4))
    checker = ccl.checker_image((4, 4))
    merged = np.where(checker == 1, 0, -1)
    with pytest.raises(Mismatch, match="8-neighbours used under 4-connectivity"):
        ccl.explain_partition(merged, checker, 4, -1)


def test_image_cases_parse():
    case = Case(143, "random 0.59", note="13x11, 8-connectivity")
    inputs = ccl.make_image_inputs(np.random.default_rng(0), case)
    assert inputs["image"].shape == (13, 11)
    assert inputs["connectivity"] == 8


# --- BlobAnalysis: labelling tile by tile (the example cell) -----------------------------------

def example_namespace(after: str = "", old: str = "", new: str = "") -> dict:
    """The solution's setup, exercise and example cells executed, as the benchmarks run them;
    in the example cell, the first ``old`` after the text ``after`` becomes ``new``."""
    namespace: dict = {"__name__": "__main__"}
    for cell in solution_notebook(LESSON).definitions():
        source = cell.source
        if cell.role == "example" and old:
            start = source.index(after)
            assert old in source[start:], f"mutation {old!r} not found after {after!r}"
            source = source[:start] + source[start:].replace(old, new, 1)
        exec_cell({"index": cell.index, "source": source}, namespace)
    return namespace


@pytest.fixture(scope="module")
def example_ns():
    return example_namespace()


def staircase_image(tile, tiles: int) -> np.ndarray:
    """``tiles`` tiles of size ``tile`` = (x, y) along the anti-diagonal of a tiles x tiles
    grid of tiles, each crossed by a 4-connected staircase from its bottom-left pixel to its
    top-right one; from there a diagonal step up and right, across the tiles' corners, leads
    to the next tile's bottom-left pixel. The corners are the only contacts between tiles:
    one blob under 8-connectivity, one per tile under 4."""
    tw, th = tile
    image = np.zeros((tiles * th, tiles * tw), np.uint8)
    for t in range(tiles):
        y0, x0 = (tiles - 1 - t) * th, t * tw
        y, x, step = th - 1, 0, 0
        image[y0 + y, x0 + x] = 1
        while (y, x) != (0, tw - 1):
            if x < tw - 1 and (y == 0 or step % 2 == 0):
                x += 1
            else:
                y -= 1
            step += 1
            image[y0 + y, x0 + x] = 1
    return image


def snake_image(shape) -> np.ndarray:
    """Rows of foreground every other row, joined alternately at the right and left ends:
    one path through the whole image, back and forth across every tile border."""
    h, w = shape
    image = np.zeros((h, w), np.uint8)
    image[::2] = 1
    for y in range(1, h, 2):
        image[y, w - 1 if y % 4 == 1 else 0] = 1
    return image


def tile_cases(tile) -> dict:
    """Images for the tile path, by name; their sizes depend on the tile (x, y) = ``tile``."""
    tw, th = tile
    rng = np.random.default_rng(2024)
    cases = {f"random {p}": ccl.random_image(rng, (2 * th + 3, 3 * tw - 2), p)
             for p in (0.2, 0.41, 0.5, 0.59, 0.8)}
    for h, w, size in ((th + 1, tw + 1, "tile+1 x tile+1"), (th - 1, tw - 1, "tile-1 x tile-1"),
                       (th + 1, tw - 1, "tile+1 x tile-1"), (th - 1, tw + 1, "tile-1 x tile+1"),
                       (2 * th - 1, 2 * tw + 1, "2tile-1 x 2tile+1")):
        cases[f"random 0.6 {size}"] = ccl.random_image(rng, (h, w), 0.6)
        cases[f"frame {size}"] = ccl.frame_image(rng, (h, w))
    cases.update({
        "spiral": ccl.spiral_image((2 * th + 1, 2 * tw + 3)),
        "snake": snake_image((2 * th + 3, 2 * tw + 1)),
        "maze": ccl.maze_image(rng, (2 * th + 1, 2 * tw + 1)),
        "checker": ccl.checker_image((th + 2, 2 * tw + 1)),
        "staircase up-right": staircase_image(tile, 3),
        "staircase up-left": staircase_image(tile, 3)[:, ::-1].copy(),
        "single row": ccl.random_image(rng, (1, 3 * tw + 1), 0.6),
        "single column": ccl.random_image(rng, (3 * th + 1, 1), 0.6),
        "full": np.ones((th + 1, 2 * tw - 1), np.uint8),
        "empty": np.zeros((th - 1, tw + 1), np.uint8),
        "one pixel": np.ones((1, 1), np.uint8),
    })
    return cases


def label_tiles(ns, image: np.ndarray, connectivity: int) -> np.ndarray:
    """``BlobAnalysis.label_tiles`` on ``image``: the roots, flat. In the simulator the roots
    and the forest are watched for races between blocks."""
    from numba import cuda

    h, w = image.shape
    analysis = ns["BlobAnalysis"](h, w, labelling="tiles")
    if workbook.MODE == "sim":
        from workbook.sim.global_races import watch

        watch(analysis.roots, "roots")
        watch(analysis.forest, "forest")
    analysis.roots.copy_to_device(np.full(h * w, -7, np.int32))
    analysis.label_tiles(cuda.to_device(np.ascontiguousarray(image.reshape(-1))), connectivity)
    return analysis.roots.copy_to_host()


def test_staircase_and_snake_images(example_ns):
    """The staircase meets other tiles only at corners; the snake is one path."""
    tile = example_ns["LABEL_TILE"]
    image = staircase_image(tile, 3)
    assert ccl.scipy_labels(image, 8)[1] == 1
    assert ccl.scipy_labels(image, 4)[1] == 3
    assert ccl.scipy_labels(snake_image((7, 5)), 4)[1] == 1


@pytest.mark.parametrize("name", list(tile_cases((8, 12))))  # the names, whatever the tile
def test_label_tiles_gives_first_pixel_roots(example_ns, name):
    """label_tiles: every foreground pixel holds its blob's first pixel, as label does."""
    image = tile_cases(example_ns["LABEL_TILE"])[name]
    for connectivity in (4, 8):
        got = label_tiles(example_ns, image, connectivity)
        want = ccl.first_pixel_labels(image, connectivity)
        wrong = np.flatnonzero(got != want)
        assert wrong.size == 0, (
            f"{name} {image.shape}, {connectivity}-connectivity: {wrong.size} pixels wrong, "
            f"first at {divmod(int(wrong[0]), image.shape[1])}: got {got[wrong[0]]}, "
            f"expected {want[wrong[0]]}")


@pytest.mark.parametrize("name", ["random 0.59", "spiral", "staircase", "edge"])
def test_run_with_tiles_matches_scipy_and_the_pixel_path(example_ns, name):
    from numba import cuda

    tw, th = example_ns["LABEL_TILE"]
    image = {"random 0.59": ccl.random_image(np.random.default_rng(3), (2 * th + 1, 3 * tw), 0.59),
             "spiral": ccl.spiral_image((th + 3, 2 * tw - 1)),
             "staircase": staircase_image((tw, th), 2),
             "edge": ccl.random_image(np.random.default_rng(4), (th + 1, tw - 1), 0.5)}[name]
    h, w = image.shape
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    for connectivity in (4, 8):
        want, count = ccl.scipy_labels(image, connectivity)
        tiles = example_ns["BlobAnalysis"](h, w, labelling="tiles")
        assert tiles.run(d_image, connectivity) == count
        np.testing.assert_array_equal(tiles.labels.copy_to_host().reshape(h, w), want)
        pixels = example_ns["BlobAnalysis"](h, w)
        assert pixels.labelling == "pixels"  # the measured path stays the default
        pixels.label(d_image, connectivity)
        np.testing.assert_array_equal(tiles.roots.copy_to_host(), pixels.roots.copy_to_host())
        stats = ccl.stats_reference(want, count)
        for field in ccl.STAT_NAMES:
            np.testing.assert_array_equal(tiles.stats[field].copy_to_host()[:count],
                                          stats[field], err_msg=field)


def test_unknown_labelling_is_refused(example_ns):
    with pytest.raises(ValueError, match="labelling"):
        example_ns["BlobAnalysis"](4, 4, labelling="tile")


BORDER_NEIGHBOURS = "        for dx in range(-1, 2):"


def test_border_merge_missing_the_corner_diagonal_is_caught():
    """A border merge that skips the up-right neighbour loses the diagonal step across a
    tile's top-right corner: the staircase falls apart under 8-connectivity."""
    ns = example_namespace("def border_merge_kernel", BORDER_NEIGHBOURS,
                           BORDER_NEIGHBOURS.replace("range(-1, 2)", "range(-1, 1)"))
    image = staircase_image(ns["LABEL_TILE"], 3)
    got = label_tiles(ns, image, 8)
    assert not np.array_equal(got, ccl.first_pixel_labels(image, 8))
    assert len(np.unique(got[got >= 0])) == 3  # one blob per tile: no corner was crossed
    # the mirrored staircase crosses corners up-left, which the variant still merges
    mirrored = image[:, ::-1].copy()
    np.testing.assert_array_equal(label_tiles(ns, mirrored, 8),
                                  ccl.first_pixel_labels(mirrored, 8))


def test_border_merge_without_the_right_column_is_caught(example_ns):
    """Under 8-connectivity a right-column pixel's up-right step enters the next tile below
    its top row: a border merge launched on the top row and left column only misses it."""
    tw, th = example_ns["LABEL_TILE"]
    image = np.zeros((th, 2 * tw), np.uint8)
    image[1, tw - 1] = image[0, tw] = 1  # one diagonal pair, across the vertical border
    np.testing.assert_array_equal(label_tiles(example_ns, image, 8),
                                  ccl.first_pixel_labels(image, 8))
    ns = example_namespace("BORDER_THREADS =", "2 * (LABEL_TILE[1] - 1)",
                           "(LABEL_TILE[1] - 1)")
    got = label_tiles(ns, image, 8)
    assert got[tw - 1 + 2 * tw] != got[tw]  # the two pixels stay apart


@pytest.mark.sim_only
@pytest.mark.skipif(not _checks_races_within_blocks(),
                    reason="the simulator does not check races within a block")
def test_tile_finds_without_a_barrier_after_the_unions_race():
    """Without the barrier between the unions and the finds, a thread's plain loads of the
    shared forest meet other threads' atomic unions: the sanitizer reports the race."""
    from workbook.sim.sanitizer import RaceError

    ns = example_namespace("    # 2. union", "    cuda.syncthreads()\n", "")
    tw, th = ns["LABEL_TILE"]
    with pytest.raises(RaceError, match="data race on shared memory"):
        label_tiles(ns, np.ones((th, tw), np.uint8), 8)


@PAST_IMAGE
def test_border_merge_column_bound_one_past_the_row_is_caught():
    """A border thread one column past a partial tile's last pixel (x > width) reads past
    the image on its last row."""
    bound = "    if x >= width or y >= height:  # a partial tile"
    ns = example_namespace("def border_merge_kernel", bound,
                           bound.replace("x >= width", "x > width"))
    tw, th = ns["LABEL_TILE"]
    with pytest.raises(IndexError, match="out of bounds"):
        label_tiles(ns, np.ones((th + 1, tw - 1), np.uint8), 4)


@pytest.mark.slow
def test_tile_kernels_compile_for_the_gpu():
    """The simulator runs the tile kernels as Python; numba-cuda's compiler must accept
    them too (types of shared-memory atomics, device functions on shared arrays)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("sm90_compile.py")
    args = "uint8[::1], int32[::1], int32[::1], int64, int64, int64"
    done = subprocess.run(
        [sys.executable, str(script), LESSON,
         "tile_label_kernel=void(uint8[::1], int32[::1], int64, int64, int64)",
         f"border_merge_kernel=void({args})", f"uf_merge_kernel=void({args})"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line.split(":")[0].removeprefix("ok "): line for line in done.stdout.splitlines()
             if line.startswith("ok ")}
    # the tile pass: its three phases apart, its unions on the shared-memory forest
    assert "2 barriers" in lines["tile_label_kernel"], lines
    assert "0 shared-memory" not in lines["tile_label_kernel"], lines
    assert " 0 other atomics" in lines["tile_label_kernel"], lines
    # the border merge: global atomics only, as exercise 5's merge
    assert "0 shared-memory" in lines["border_merge_kernel"], lines
