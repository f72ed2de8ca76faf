"""workbook.recorded: the end-to-end comparison is pivoted to one row per shape."""

from workbook.recorded import end_to_end_table, load, show_end_to_end

PART = {
    "columns": ["dtype", "cols", "function", "us per call", "lib us", "x lib"],
    "rows": [
        ["float32", 32, "first", 400.0, 70.0, 0.175],
        ["float32", 32, "pooled", 90.0, 70.0, 0.778],
        ["float32", 64, "first", 500.0, 75.0, 0.15],
        ["float32", 64, "kernel only", 40.0, 76.0, 1.9],
    ],
}


def test_one_row_per_shape_one_column_per_function():
    header, rows = end_to_end_table(PART)
    assert header == ["dtype", "cols", "lib us", "first", "pooled", "kernel only"]
    assert rows == [["float32", 32, 70.0, 0.175, 0.778, ""],
                    ["float32", 64, 75.0, 0.15, "", 1.9]]


def test_recorded_end_to_end_parts_are_shown_with_their_device(capsys):
    for lesson in ("03_softmax", "04_layernorm", "05_ccl"):
        part = load(lesson)["parts"]["end_to_end"]
        show_end_to_end(lesson)
        out = capsys.readouterr().out
        assert f"measured on {part['device']}, {part['date']}" in out
        assert len(out.splitlines()) >= len({tuple(r[:2]) for r in part["rows"]}) + 3
