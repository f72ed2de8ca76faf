"""Lesson 05's fused launches of the block labelling, kernel by kernel, against expectations
computed without them: workbook.ccl_blocks' model of the init and scipy's labels."""

import numpy as np
import pytest
from test_ccl_exercises import example_namespace, tile_images

import workbook
from grader.exercises import ccl
from grader.exercises.ccl import images, references
from workbook import ccl_blocks as cb

SENTINEL = -7  # what the forest held before: only the init's roots may change it


@pytest.fixture(scope="module")
def ns():
    return example_namespace()


def _tile_pixels(ns):
    return (2 * ns["BLOCK"][0], 2 * ns["BLOCK"][1])


def _images(ns) -> dict:
    """The tile images of the BlobAnalysis tests, and one of several scan tiles of cells."""
    found = tile_images(_tile_pixels(ns))
    tiles = 4 * ns["SCAN_TILE"]  # cells: four scan tiles and a bit
    side = int(np.ceil(np.sqrt(2 * tiles)))
    found["random 0.5, four scan tiles"] = images.random_image(np.random.default_rng(8),
                                                               (side, side + 1), 0.5)
    return found


IMAGE_NAMES = ["random 0.2", "random 0.59", "random 0.8", "spiral", "snake",
               "staircase up-right", "staircase, odd tiles", "full with holes", "checkerboard",
               "single column", "empty", "one pixel", "random 0.5, four scan tiles"]


# (image name, connectivity) -> the host copies of (roots, forest, links) that
# block_init_compress_kernel left and test_init_compress_gives_the_tile_roots_of_the_init
# checked: the later tests start from them instead of running the init again
CHECKED_INITS: dict = {}


def _init_compress(ns, image, connectivity, checked=None):
    """Runs block_init_compress_kernel; returns (d_image, roots, forest, links) on the
    device, the forest filled with SENTINEL first. With ``checked`` (an entry of
    CHECKED_INITS), that launch's outputs, copied to the device, instead of a launch."""
    from numba import cuda

    h, w = image.shape
    rows, cols, n = cb.sizes(image.shape)
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    if checked is None:
        roots = cuda.device_array(n, np.int32)
        forest = cuda.to_device(np.full(n, SENTINEL, np.int32))
        links = cuda.device_array(rows * cols, np.uint8)
    else:
        roots, forest, links = (cuda.to_device(array) for array in checked)
    if workbook.MODE == "sim":
        from workbook.sim.global_races import watch

        for array, name in ((roots, "roots"), (forest, "forest"), (links, "links")):
            watch(array, name)
    if checked is None:
        ns["block_init_compress_kernel"][ns["block_grid"](h, w), ns["BLOCK"]](
            d_image, roots, forest, links, h, w, connectivity, ns["init_table"](connectivity))
    return d_image, roots, forest, links


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", IMAGE_NAMES)
def test_init_compress_gives_the_tile_roots_of_the_init(ns, name, connectivity):
    """roots: every cell's root once the model's init links and the unions inside a tile are
    made (-1 for empty cells); links: the model's bytes without those unions; forest: its own
    key at each of those roots, untouched elsewhere."""
    image = _images(ns)[name]
    _, roots, forest, links = _init_compress(ns, image, connectivity)
    want_roots, want_links = cb.tile_roots(image, connectivity, ns["BLOCK"])
    np.testing.assert_array_equal(links.copy_to_host(), want_links.reshape(-1))
    np.testing.assert_array_equal(roots.copy_to_host(), want_roots)
    keys = np.arange(want_roots.size)
    np.testing.assert_array_equal(forest.copy_to_host(),
                                  np.where(want_roots == keys, keys, SENTINEL))
    CHECKED_INITS[name, connectivity] = tuple(a.copy_to_host() for a in (roots, forest, links))


U_SHAPE = np.array([[1, 0, 0, 1],
                    [1, 0, 0, 1],
                    [1, 1, 1, 1]], np.uint8)


@pytest.mark.parametrize("tile, roots, union_kept", [
    ((4, 4), [0, 0, 0, 0, 0, 0], False),  # one tile: the bottom row's union is made there
    ((1, 4), [0, 1, 0, 1, 0, 1], True),   # a tile per block column: the union crosses tiles
])
def test_tile_roots_of_a_u_shape(tile, roots, union_kept):
    """Worked by hand: the U's arms link upwards (cells 2 -> 0, 4 -> 2 and 3 -> 1, 5 -> 3);
    cell 5's pixel (2, 2) also touches (2, 1) on its left, whose square up-left is empty: a
    LEFT_TOP union for block (1, 1). Made inside the tile, it joins both arms under key 0."""
    got_roots, got_links = cb.tile_roots(U_SHAPE, 4, tile)
    np.testing.assert_array_equal(got_roots, roots)
    pixels = [cb.PIXEL_A | cb.PIXEL_C, cb.PIXEL_B | cb.PIXEL_D, cb.PIXEL_A | cb.PIXEL_B,
              cb.PIXEL_A | cb.PIXEL_B]
    pixels[3] |= cb.UNION_LEFT_TOP if union_kept else 0
    np.testing.assert_array_equal(got_links.reshape(-1), pixels)


def test_the_init_table_flags_a_parent_it_has_no_code_for():
    """A parent that the table cannot encode (here: a tabulation that forgot the code of the
    bottom cell's left neighbour, which 4-connected bottom cells link to) is reported by
    init_table instead of becoming a wrong table."""
    broken = example_namespace("def table_entry", "elif parent == 9:",
                               "elif parent == -99:")
    with pytest.raises(ValueError, match="not one of its block's neighbour cells"):
        broken["init_table"](4)


def _first_pixel_cells(image, connectivity):
    """scipy's labels, and the key of the cell of each blob's first pixel (blob k at k - 1)."""
    labels, count = ccl.scipy_labels(image, connectivity)
    cols = (image.shape[1] + 1) // 2
    flat = labels.reshape(-1)
    values, first = np.unique(flat, return_index=True)  # each label's first pixel
    y, x = np.divmod(first[values > 0], image.shape[1])
    return labels, count, y * cols + x // 2


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", IMAGE_NAMES)
def test_resolve_rank_ranks_the_first_pixels_of_scipys_blobs(ns, name, connectivity):
    """After the init, the merge and resolve_rank_kernel: the cell of each blob's first pixel
    holds -2 - its rank among those cells in its scan tile, every other cell of the blob
    reaches it in at most two steps, empty cells hold -1, and each tile's count is the number
    of first-pixel cells in it."""
    from numba import cuda

    image = _images(ns)[name]
    h, w = image.shape
    d_image, roots, forest, links = _init_compress(ns, image, connectivity,
                                                   CHECKED_INITS.get((name, connectivity)))
    ns["block_merge_kernel"][ns["block_grid"](h, w), ns["BLOCK"]](
        links, roots, forest, h, w, connectivity)
    n, tile = roots.size, ns["SCAN_TILE"]
    tiles = (n + tile - 1) // tile
    tile_sums = cuda.device_array(tiles, np.int32)
    ns["resolve_rank_kernel"][tiles, ns["RESOLVE_THREADS"]](forest, roots, tile_sums, n)
    got = roots.copy_to_host()

    labels, count, firsts = _first_pixel_cells(image, connectivity)
    per_tile = np.bincount(firsts // tile, minlength=tiles)
    np.testing.assert_array_equal(tile_sums.copy_to_host(), per_tile)
    before = np.concatenate([[0], np.cumsum(per_tile)[:-1]])  # first-pixel cells of earlier tiles
    ranks = np.arange(count) - before[firsts // tile]  # scipy's numbering is the keys' order
    np.testing.assert_array_equal(got[firsts], -2 - ranks)
    # the blob of every cell, from scipy's labels of its two pixels (-1: an empty cell)
    cols = (w + 1) // 2
    padded = np.zeros((h, 2 * cols), labels.dtype)
    padded[:, :w] = labels
    cell_blob = padded.reshape(h, cols, 2).max(axis=2).reshape(-1) - 1
    for k in np.flatnonzero(cell_blob < 0):
        assert got[k] == -1, (name, k, got[k])
    for k in np.flatnonzero(cell_blob >= 0):
        root, steps = k, 0
        while got[root] >= 0:
            root, steps = got[root], steps + 1
        assert root == firsts[cell_blob[k]] and steps <= 2, (name, k, root, steps)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", ["random 0.2", "random 0.8", "checkerboard",
                                  "full with holes", "one pixel", "empty",
                                  "random 0.5, four scan tiles"])
def test_write_kernels_give_scipys_labels_and_statistics(ns, name, connectivity):
    """block_write_kernel and block_write_stats_kernel, after BlobAnalysis's label and
    number: scipy's labels from both, numpy's statistics from the second, which leaves the
    statistics alone where there is no blob."""
    from numba import cuda

    image = _images(ns)[name]
    h, w = image.shape
    want, count = ccl.scipy_labels(image, connectivity)
    analysis = ns["BlobAnalysis"](h, w)
    analysis.label(cuda.to_device(np.ascontiguousarray(image.reshape(-1))), connectivity)
    assert analysis.number() == count
    offsets = analysis.levels[0][1]
    args = (analysis.links, analysis.roots, offsets, analysis.labels, h, w, connectivity)
    grid, block = ns["block_grid"](h, w), ns["BLOCK"]
    ns["block_write_kernel"][grid, block](*args)
    np.testing.assert_array_equal(analysis.labels.copy_to_host().reshape(h, w), want)
    analysis.labels.copy_to_device(np.full(h * w, SENTINEL, np.int32))
    size = max(count, 1)
    fields = [cuda.to_device(np.full(size, value, np.int64 if "sum" in field else np.int32))
              for field, value in zip(references.STAT_NAMES, (0, 2**31 - 1, -1, 2**31 - 1, -1,
                                                               0, 0))]
    blank = [field.copy_to_host() for field in fields]
    ns["block_write_stats_kernel"][grid, block](*args, *fields)
    np.testing.assert_array_equal(analysis.labels.copy_to_host().reshape(h, w), want)
    stats = ccl.stats_reference(want, count)
    for field, got, empty in zip(references.STAT_NAMES, fields, blank):
        np.testing.assert_array_equal(got.copy_to_host(), stats[field] if count else empty,
                                      err_msg=f"{name}: {field}")


def _stats(analysis, count):
    return {f: analysis.stats[f].copy_to_host()[:count] for f in references.STAT_NAMES}


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", ["random 0.2", "random 0.59", "checkerboard",
                                  "full with holes", "empty"])
def test_fused_write_gives_what_the_default_write_gives(ns, name, connectivity):
    """write(count, fused=True) and the default write (the labels, then exercise 10's
    statistics) on one instance, in both orders: scipy's labels and numpy's statistics.
    One label and number for the three writes, which read what those left (the links, the
    roots and the scan's offsets) and change none of it; a label after a write is
    test_phases_can_be_repeated's."""
    from numba import cuda

    image = _images(ns)[name]
    h, w = image.shape
    want, count = ccl.scipy_labels(image, connectivity)
    stats = ccl.stats_reference(want, count)
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    analysis = ns["BlobAnalysis"](h, w)
    analysis.label(d_image, connectivity)
    assert analysis.number() == count
    for fused in (True, False, True):
        analysis.labels.copy_to_device(np.full(h * w, SENTINEL, np.int32))
        analysis.write(count, fused=fused)
        np.testing.assert_array_equal(analysis.labels.copy_to_host().reshape(h, w), want)
        got = _stats(analysis, count)
        for field in references.STAT_NAMES:
            np.testing.assert_array_equal(got[field], stats[field],
                                          err_msg=f"{name}: {field}, fused={fused}")


def test_fused_write_is_the_block_labellings_own(ns):
    """fused=True computes the block labelling's statistics itself: no other kernel, and not
    for the per-pixel labelling."""
    analysis = ns["BlobAnalysis"](4, 4, labelling="pixels")
    with pytest.raises(ValueError):
        analysis.write(0, fused=True)
    with pytest.raises(ValueError):
        ns["BlobAnalysis"](4, 4).write(0, ns["blob_stats_kernel"], fused=True)


MUTATIONS = {  # (after, old, new): what the tests above must catch
    "a rank one off": ("def resolve_rank_kernel", "-2 - rank", "-1 - rank"),
    "a second blob's row": ("4-connectivity: two blobs", "y + r, y + r,", "y, y,"),
    "the warp step drops the others' areas": ("if one_blob and blob >= 0:",
                                               "n += cuda.shfl_xor_sync(FULL_MASK, n, offset)",
                                               "n += 0"),
    "write skips a cell": ("def cell_label", "while value >= 0:", "if value >= 0:"),
    "no barrier between a round's reads and writes": (
        "def jump_to_roots", "cuda.syncthreads()  # every read of this round",
        "pass  # every read of this round"),
    "the tile's unions dropped, not made": ("def block_init_compress_kernel",
                                            "    while True:\n        high = low = -1",
                                            "    while False:\n        high = low = -1"),
    "a neighbour read one column short": ("def neighbourhood", "(image[above + U3] != 0) << 3",
                                          "(image[above + U2] != 0) << 3"),
}


# A broken pointer jumping leaves parents that are not roots, and the merge then walks forest
# entries nobody wrote: on a GPU that walk leaves the array and the kernel faults, which ends
# the process's CUDA context for every later test. They run in the simulator only. (A round
# that takes the parent instead of its parent is not among them: the tile's union rounds then
# wait for roots that never come, a hang in either mode rather than a failure.)
FAULTS_ON_A_GPU = ("a broken pointer jumping walks unwritten memory: a hard fault on a GPU, "
                   "which ends the process's CUDA context")
JUMPING = ("no barrier between a round's reads and writes",)


@pytest.mark.parametrize("mutation", [
    pytest.param(name, marks=pytest.mark.skipif(workbook.MODE == "gpu" and name in JUMPING,
                                                reason=FAULTS_ON_A_GPU))
    for name in MUTATIONS])
def test_the_checks_catch_broken_fused_kernels(mutation):
    """Each broken copy of the fused kernels fails the BlobAnalysis checks on some image, with
    the fused write + statistics (write(count, fused=True))."""
    from numba import cuda

    broken = example_namespace(*MUTATIONS[mutation])
    # the order only decides how soon a broken copy is caught: each shows on the first one
    for name in ("random 0.59", "checkerboard", "full with holes", "staircase up-right"):
        image = _images(broken)[name]
        h, w = image.shape
        for connectivity in (4, 8):
            want, count = ccl.scipy_labels(image, connectivity)
            stats = ccl.stats_reference(want, count)
            analysis = broken["BlobAnalysis"](h, w)
            try:
                analysis.label(cuda.to_device(np.ascontiguousarray(image.reshape(-1))),
                               connectivity)
                got = analysis.number()
                analysis.write(got, fused=True)
            except Exception:  # noqa: BLE001  (an index out of range: caught too)
                return
            same = got == count and np.array_equal(
                analysis.labels.copy_to_host().reshape(h, w), want) and all(
                np.array_equal(analysis.stats[f].copy_to_host()[:count], stats[f])
                for f in references.STAT_NAMES)
            if not same:  # caught: the other images would only say it again
                return
    pytest.fail(f"{mutation}: every image got the right labels and statistics")


PACKED_MUTATIONS = {  # (after, old, new): the packed statistics broken, each must be caught
    "the row's bit left out": ("def blob_stats_packed_kernel", "rows32 = int32(row_bit)",
                               "rows32 = int32(0)"),
    "the x sums read with the area's bits": ("def blob_stats_packed_kernel",
                                             "int64(packed % PACK_AREA) + n * x_tile",
                                             "int64(packed) + n * x_tile"),
    "the warp's masks not combined": (
        "def blob_stats_packed_kernel",
        "columns32 | cuda.shfl_xor_sync(FULL_MASK, columns32, offset)", "columns32 | 0"),
    "the tile's corner left out of the sums": ("def blob_stats_packed_kernel",
                                               "int64(packed % PACK_AREA) + n * x_tile",
                                               "int64(packed % PACK_AREA)"),
    "two lanes of the 128-bit load swapped": ("def row_labels",
                                              "out[j], out[j + 1], out[j + 2]",
                                              "out[j + 1], out[j], out[j + 2]"),
    "the edge path one pixel to the left": ("def row_labels",
                                            "labels[y * width + x + j] if",
                                            "labels[y * width + x + j - 1] if"),
}


def _packed_statistics_failures(namespace, first_only: bool = False) -> int:
    """How many of the images (times two connectivities) get statistics other than numpy's
    from BlobAnalysis.run, whose default statistics are blob_stats_packed_kernel's; with
    ``first_only``, 1 at the first such image (a broken kernel needs one)."""
    from numba import cuda

    failures = 0
    found = _images(namespace)
    # eight full rows, two tiles wide: each tile's first warp holds one blob, alone
    found["a warp's rows"] = np.ones((8, 2 * namespace["TILE"]), np.uint8)
    # rows of a multiple of 4 pixels: row_labels reads them with 128-bit loads
    found["random 0.59, width 3 tiles"] = images.random_image(
        np.random.default_rng(5), (19, 3 * namespace["TILE"]), 0.59)
    # the order only decides how soon a broken kernel is caught (first_only): the warp's
    # rows, the cheapest image, are where the warp's masks not combined show; the staircase
    # is where the lanes of a 128-bit load swapped and the edge path moved show first
    for name in ("a warp's rows", "staircase up-right", "random 0.59", "full with holes",
                 "random 0.2", "random 0.59, width 3 tiles"):
        image = found[name]
        h, w = image.shape
        for connectivity in (4, 8):
            want, count = ccl.scipy_labels(image, connectivity)
            stats = ccl.stats_reference(want, count)
            analysis = namespace["BlobAnalysis"](h, w)
            assert analysis.run(cuda.to_device(np.ascontiguousarray(image.reshape(-1))),
                                connectivity) == count
            for kernel in namespace["PACKED_STATS_THREADS"]:  # each thread shape
                analysis.statistics(count, kernel)
                failures += not all(
                    np.array_equal(analysis.stats[f].copy_to_host()[:count], stats[f])
                    for f in references.STAT_NAMES)
                if failures and first_only:
                    return failures
    return failures


def test_packed_statistics_are_numpy_s(ns):
    assert _packed_statistics_failures(ns) == 0


def test_the_statistics_shape_follows_the_blobs_per_pixel(ns):
    """The lesson's policy, in blobs per pixel: a 64 x 64 checkerboard under 4-connectivity
    (2048 blobs, 0.5 per pixel) gets the many-blob shape, 1 blob in it the few-blob shape,
    and 5 % (between the lesson's 3.5 % and 10 %) exercise 10's own shape, PIXELS wide."""
    pick, pixels = ns["packed_stats_for"], 64 * 64
    assert pick(2048, pixels) is ns["blob_stats_packed_many_blobs"]
    assert pick(1, pixels) is ns["blob_stats_packed_few_blobs"]
    assert pick(round(0.05 * pixels), pixels) is ns["blob_stats_packed_kernel"]
    assert pick(0, 0) is ns["blob_stats_packed_few_blobs"]  # an empty image: no division
    shapes = ns["PACKED_STATS_THREADS"]
    tile, pixels_per_thread = ns["TILE"], ns["PIXELS"]
    assert shapes[ns["blob_stats_packed_kernel"]] == (tile // pixels_per_thread, tile)
    assert shapes[ns["blob_stats_packed_many_blobs"]] == (2 * tile // pixels_per_thread, tile)
    assert shapes[ns["blob_stats_packed_few_blobs"]] == (tile // pixels_per_thread // 2, tile)


@pytest.mark.parametrize("mutation", list(PACKED_MUTATIONS))
def test_the_checks_catch_broken_packed_statistics(mutation):
    """Each broken copy of blob_stats_packed_kernel (BlobAnalysis's default statistics) gives
    statistics other than numpy's on some of the images the intact one gets right."""
    assert _packed_statistics_failures(example_namespace(*PACKED_MUTATIONS[mutation]),
                                       first_only=True), mutation


def test_blob_analysis_says_which_init_is_missing(monkeypatch):
    """Before exercise 11, the block labelling still runs under 4-connectivity (its init is
    given) and asks for init_block_8 under 8-connectivity; any other connectivity is refused."""
    from numba import cuda

    ns = example_namespace()

    @cuda.jit(device=True)
    def init_block_8(image, forest, height, width, by, bx, first_col, first_row, last_col):
        raise NotImplementedError("exercise ccl.block_init")  # the lesson's stub

    monkeypatch.setitem(ns, "init_block_8", init_block_8)
    monkeypatch.setitem(ns, "INIT_TABLES", {})
    image = images.random_image(np.random.default_rng(3), (6, 10), 0.5)
    analysis = ns["BlobAnalysis"](*image.shape)
    d_image = cuda.to_device(np.ascontiguousarray(image.reshape(-1)))
    with pytest.raises(NotImplementedError, match="init_block_8 \\(exercise 11\\)"):
        analysis.label(d_image, 8)
    with pytest.raises(ValueError, match="connectivity must be 4 or 8, not 6"):
        analysis.label(d_image, 6)
    want, count = ccl.scipy_labels(image, 4)
    assert analysis.run(d_image, 4) == count
    np.testing.assert_array_equal(analysis.labels.copy_to_host().reshape(image.shape), want)
