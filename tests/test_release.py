"""The solutions -> lessons generator: markers, errors, and the committed lessons."""

from pathlib import Path

import nbformat
import pytest

from grader.release import MarkerError, release_tree, stub_source, student_notebook

ROOT = Path(__file__).resolve().parents[1]


def _notebook(*cells):
    nb = nbformat.v4.new_notebook(metadata={"workbook": {"lesson": "toy"}})
    for source, meta in cells:
        cell = nbformat.v4.new_code_cell(source)
        if meta:
            cell.metadata["workbook"] = {"schema_version": 1, **meta}
        nb.cells.append(cell)
    return nb


EXERCISE = {"role": "exercise", "exercise_id": "toy.one"}


def test_region_becomes_indented_stub():
    source = ("def f(x):\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n"
              "    ### END SOLUTION\n")
    out = stub_source(source, "toy.one", "cell 0")
    assert out.splitlines() == [
        "def f(x):",
        "    # YOUR CODE HERE (the solution has about 2 lines)",
        '    raise NotImplementedError("exercise toy.one")',
    ]


def test_text_outside_regions_is_kept_and_outputs_cleared():
    nb = _notebook(("K = 4\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION\nprint(K)", EXERCISE),
                   ("print('free')", None))
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="free\n")]
    nb.cells[1].execution_count = 3
    out = student_notebook(nb)
    assert out.cells[0].source.startswith("K = 4\n# YOUR CODE HERE")
    assert out.cells[0].source.endswith("print(K)")
    assert out.cells[1].outputs == [] and out.cells[1].execution_count is None
    assert nb.cells[1].outputs, "the solution notebook itself must not be modified"


@pytest.mark.parametrize("source,problem", [
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another region"),
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without BEGIN"),
    ("x = 1\n", "no ### BEGIN SOLUTION region"),
])
def test_malformed_markers_are_errors(source, problem):
    with pytest.raises(MarkerError, match=problem):
        student_notebook(_notebook((source, EXERCISE)))


def test_marker_outside_exercise_cell_is_an_error():
    nb = _notebook(("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", {"role": "setup"}))
    with pytest.raises(MarkerError, match="outside an exercise cell"):
        student_notebook(nb)


def test_marker_must_be_a_whole_line():
    source = "x = '### BEGIN SOLUTION'\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n"
    assert stub_source(source, "toy.one", "c").startswith("x = '### BEGIN SOLUTION'\n# YOUR")


def test_committed_lessons_match_the_generator(tmp_path):
    written = release_tree(ROOT / "solutions", tmp_path)
    assert written, "no solution notebooks found"
    for path in written:
        committed = ROOT / "lessons" / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is missing: run `grader release`"
        assert committed.read_bytes() == path.read_bytes(), (
            f"{committed} is out of date: run `grader release`")


# --- CUDA C solutions: in exercise cells (inside Python strings) and in lesson files --------

C_CELL = '''SRC = r"""
extern "C" __device__ int f(unsigned int* ret)
{
    // BEGIN SOLUTION
    *ret = 1;  // the answer
    return 0;
    // END SOLUTION
}
"""
f = make(SRC)


def kernel():
    ### BEGIN SOLUTION
    return f()
    ### END SOLUTION
'''


def test_c_region_in_a_cell_becomes_a_c_stub():
    from grader.release import C_STUB

    out = stub_source(C_CELL, "toy.one", "cell 0").splitlines()
    assert out[3:5] == ["    // YOUR CODE HERE (the solution has about 2 lines)", f"    {C_STUB}"]
    assert out[5] == "}"
    assert out[-2:] == ["    # YOUR CODE HERE (the solution has about 1 line)",
                        '    raise NotImplementedError("exercise toy.one")']


@pytest.mark.parametrize("source,problem", [
    ("// BEGIN SOLUTION\nx\n### END SOLUTION\n", "another kind"),
    ("// BEGIN SOLUTION\n// BEGIN SOLUTION\n// END SOLUTION\n", "inside another region"),
    ("// END SOLUTION\n", "without BEGIN"),
])
def test_malformed_c_markers_are_errors(source, problem):
    with pytest.raises(MarkerError, match=problem):
        stub_source(source, "toy.one", "cell 0")


def test_c_marker_outside_exercise_cell_is_an_error():
    nb = _notebook(("S = '''\n// BEGIN SOLUTION\nx;\n// END SOLUTION\n'''", {"role": "setup"}))
    with pytest.raises(MarkerError, match="outside an exercise cell"):
        student_notebook(nb)


def test_lesson_files_are_copied_with_c_solutions_stubbed(tmp_path):
    from grader.release import C_STUB

    solutions, lessons = tmp_path / "solutions", tmp_path / "lessons"
    (solutions / "01_toy").mkdir(parents=True)
    nb = _notebook(("x = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n", EXERCISE))
    nbformat.write(nb, solutions / "01_toy" / "toy.ipynb")
    cu = 'extern "C" __device__ int f(int* r)\n{\n    // BEGIN SOLUTION\n    *r = 3;\n' \
         '    return 0;\n    // END SOLUTION\n}\n'
    (solutions / "01_toy" / "wrappers.cu").write_text(cu)
    (solutions / "01_toy" / "data.txt").write_text("kept as is\n// BEGIN SOLUTION\n")
    written = release_tree(solutions, lessons)
    assert sorted(p.name for p in written) == ["data.txt", "toy.ipynb", "wrappers.cu"]
    stubbed = (lessons / "01_toy" / "wrappers.cu").read_text()
    assert "*r = 3" not in stubbed and C_STUB in stubbed and stubbed.endswith("}\n")
    assert (lessons / "01_toy" / "data.txt").read_text() == "kept as is\n// BEGIN SOLUTION\n"
