"""workbook.diagrams: the map of lanes to data of the warp kernels (lessons 03 and 04)."""

import numpy as np
import pytest

from workbook.diagrams import draw_warp_tile, warp_tile_lanes


def test_two_lane_groups_interleave_single_columns():
    # width 2, one row per group, two values per lane, no packs: 16 groups, 16 rows; lane
    # 2g holds columns 0 and 2 of row g, lane 2g + 1 columns 1 and 3 (worked out by hand)
    want = np.array([[2 * g, 2 * g + 1, 2 * g, 2 * g + 1] for g in range(16)])
    np.testing.assert_array_equal(warp_tile_lanes(2, 1, 2), want)


def test_short_float32_rows_eight_lanes_two_rows_one_pack():
    # softmax's warp_config(32, 4): 8 lanes per group, 2 rows each, one pack of 4 per lane:
    # rows 2g and 2g + 1 belong to group g; column c of them to its lane c // 4
    lanes = warp_tile_lanes(8, 2, 4, pack=4)
    assert lanes.shape == (8, 32)
    rows, cols = np.indices(lanes.shape)
    np.testing.assert_array_equal(lanes, 8 * (rows // 2) + cols // 4)


def test_a_whole_warp_per_row_two_packs_per_lane():
    # 256 float32 columns: 32 lanes, one row, packs l and 32 + l of lane l
    lanes = warp_tile_lanes(32, 1, 8, pack=4)
    assert lanes.shape == (1, 256)
    np.testing.assert_array_equal(lanes[0], (np.arange(256) // 4) % 32)


@pytest.mark.parametrize("width,rows,per_thread,pack",
                         [(1, 2, 4, 4), (4, 2, 8, 4), (16, 1, 2, 1), (32, 1, 16, 8)])
def test_every_element_has_one_lane_and_every_lane_its_share(width, rows, per_thread, pack):
    lanes = warp_tile_lanes(width, rows, per_thread, pack)
    assert (lanes >= 0).all()
    np.testing.assert_array_equal(np.bincount(lanes.ravel(), minlength=32),
                                  np.full(32, rows * per_thread))


def test_widths_that_do_not_divide_the_warp_are_refused():
    with pytest.raises(ValueError, match="width"):
        warp_tile_lanes(3, 1, 1)


def test_the_picture_labels_every_element():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    draw_warp_tile(4, 2, 8, pack=4, cols=28, ax=ax)
    labels = [t.get_text() for t in ax.texts if t.get_text() != "padding"]
    assert len(labels) == 16 * 32 and sorted(set(labels), key=int) == [str(k) for k in range(32)]
    plt.close(fig)
