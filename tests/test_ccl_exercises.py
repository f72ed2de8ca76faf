"""Lesson 05: the solutions pass, known-buggy variants are rejected, and the test images and
references behave as the checks assume."""

import numpy as np
import pytest
from solution_cells import bug_id, namespace_with, namespace_with_variant

import workbook
from grader.exercise import Case, Mismatch, check_exercise
from grader.exercises import ccl
from grader.exercises import get as get_exercise

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
