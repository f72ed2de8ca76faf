"""In simulator mode a check also compiles the exercise's kernels for sm_90 with numba-cuda's
compiler (grader.gpu_compile): what the GPU's compiler rejects fails the check, with the
student's line and the compiler's reason, in the notebook and in the grader.

The compiler's reasons asserted below are numba-cuda 0.30.4's own words, captured by
compiling each construct for sm_90 (tests/sm90_compile.py's compiler) on this machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from solution_cells import exercise_cell, namespace_with, solution_notebook

import grader
from grader.gpu_compile import client, step
from grader.grade import grade_notebook
from grader.notebook import load

pytestmark = pytest.mark.sim_only  # on a GPU the check compiles the kernels itself

RECURSIVE_WARP_SUM = '''@cuda.jit(device=True)
def warp_sum(value):
    return halving_sum(value, 16)


@cuda.jit(device=True)
def halving_sum(value, offset):
    if offset == 0:
        return value
    return halving_sum(value + cuda.shfl_down_sync(FULL_MASK, value, offset), offset // 2)
'''
PLAIN_HELPER = "def first_of(values):\n    return values[0]\n\n\n@cuda.jit\ndef shared_sum_kernel"


def _first_function(cell: str) -> str:
    return cell.split("\n\n\n")[0] + "\n"


# (name, lesson, exercise, edits of its cell, the line the message quotes, the compiler's own
#  words, the explanation's words, whether the simulator alone accepts the variant)
BUGS = [
    ("list", "02_reduction", "reduction.simple", [("stride = 1\n", "stride = [1, 2][0]\n")],
     "stride = [1, 2][0]", "NRT required but not enabled",
     "a list cannot be created inside a kernel on the GPU: use `cuda.local.array` with a "
     "constant size, or a tuple of constants", True),
    ("dict", "02_reduction", "reduction.convergent",
     [("stride = cuda.blockDim.x\n", "stride = {0: cuda.blockDim.x}[0]\n")],
     "stride = {0: cuda.blockDim.x}[0]", "getitem(DictType[int64,int32]",
     "a dict cannot be used inside a kernel on the GPU", True),
    ("f-string", "02_reduction", "reduction.shared",
     [("stride = cuda.blockDim.x // 2\n", "stride = cuda.blockDim.x // 2\n    if stride > 4096:\n"
       "        raise ValueError(f\"stride {stride} is too large\")\n")],
     'raise ValueError(f"stride {stride} is too large")', "str(int64)",
     "strings cannot be built inside a kernel on the GPU", True),
    ("print of an array", "02_reduction", "reduction.convergent",
     [("    if t == 0:\n", "    if t > 4096:\n        print(\"input:\", input)\n    if t == 0:\n")],
     'print("input:", input)', "printing unimplemented for values of type array(float32, 1d, C)",
     "print inside a kernel prints numbers and constant strings only", True),
    ("plain Python function", "02_reduction", "reduction.shared",
     [("@cuda.jit\ndef shared_sum_kernel", PLAIN_HELPER),
      ("output[0] = partial[0]", "output[0] = first_of(partial)")],
     "output[0] = first_of(partial)",
     "Untyped global name 'first_of': Cannot determine Numba type of <class 'function'>",
     "`first_of` is a plain Python function, which a kernel cannot call on the GPU", True),
    ("try/except", "02_reduction", "reduction.convergent",
     [("            input[t] += input[t + stride]\n",
       "            try:\n                input[t] += input[t + stride]\n"
       "            except Exception:\n                pass\n")],
     "input[t] += input[t + stride]", "'CUDACallConv' object has no attribute 'set_try_status'",
     "try/except and try/finally are not supported inside a kernel", True),
    ("recursion", "02_reduction", "reduction.shuffle",
     [(_first_function(exercise_cell("02_reduction", "reduction.shuffle")),
       RECURSIVE_WARP_SUM)],
     "return halving_sum(value + cuda.shfl_down_sync(FULL_MASK, value, offset), offset // 2)",
     "'JITCUDACodegen' object has no attribute 'insert_unresolved_ref'",
     "a device function calls itself", True),
    ("complex into a float32 array", "02_reduction", "reduction.shared",
     [("output[0] = partial[0]", "output[0] = partial[0] + 0j")],
     "output[0] = partial[0] + 0j", "setitem(array(float32, 1d, C), Literal[int](0), complex128)",
     "storing into an array is not defined on the GPU for these types", False),
    ("a scalar to a device function that indexes it", "02_reduction", "reduction.segmented",
     [("total = block_tree_sum(partial)", "total = block_tree_sum(value)")],
     None, "getitem(float32, int32)",  # the line is in the setup cell: see the test below
     "indexing is not defined on the GPU for these types", False),
    ("a device function called with too many arguments", "02_reduction", "reduction.shuffle",
     [("acc = warp_sum(acc)\n    lane", "acc = warp_sum(acc, 16)\n    lane")],
     "acc = warp_sum(acc, 16)", "too many positional arguments",
     "the device function `warp_sum(value)` cannot be called with these arguments", False),
    ("a foreign function's name not in its CUDA C", "01_ldmatrix", "ldmatrix.address",
     [('cuda.declare_device("shared_address"', 'cuda.declare_device("shared_adress"')],
     None, "Undefined reference to 'shared_adress'",
     "the kernel calls `shared_adress`, which no linked CUDA C defines", False),
]


def _variant(bug) -> tuple[str, str]:
    _, lesson, exercise_id, edits, *_ = bug
    original = cell = exercise_cell(lesson, exercise_id)
    for old, new in edits:
        assert cell.count(old) == 1, f"{bug[0]}: {old!r} matches {cell.count(old)} times"
        cell = cell.replace(old, new)
    return original, cell


def _place(bug, cell: str) -> str:
    """``<cell N>:L`` of the quoted line, from the solution notebook and the edited cell."""
    _, lesson, exercise_id, _, line, *_ = bug
    index = next(c.index for c in solution_notebook(lesson).cells
                 if c.role == "exercise" and c.exercise_id == exercise_id)
    number = next(n for n, text in enumerate(cell.splitlines(), 1) if text.strip() == line)
    return f"<cell {index}>:{number}: `{line}`"


def _assert_rejected(bug, result, cell: str) -> None:
    name, _, exercise_id, _, line, words, explained, _ = bug
    text = "\n".join(result.messages)
    assert result.status == "failed", f"{name}: {result.summary()}"
    assert "does not compile for the GPU (numba-cuda, sm_90)" in text, text
    assert words in text and explained in text, text
    if line is not None:
        assert _place(bug, cell) in text, text


@pytest.mark.parametrize("bug", BUGS, ids=[b[0] for b in BUGS])
def test_the_gpu_compiler_rejects_what_the_simulator_runs_in_the_notebook(bug, monkeypatch):
    _, lesson, exercise_id, *_ = bug
    original, cell = _variant(bug)
    namespace = namespace_with(lesson, exercise_id, original, cell)
    if bug[-1]:  # the simulator alone runs it: only the compiler sees the bug
        monkeypatch.setenv(step.SWITCH_ENV, "0")
        alone = grader.check(exercise_id, namespace)
        assert alone.passed, alone.summary()
        monkeypatch.delenv(step.SWITCH_ENV)
    _assert_rejected(bug, grader.check(exercise_id, namespace), cell)


def test_a_device_function_error_names_the_call_too():
    bug = next(b for b in BUGS if b[2] == "reduction.segmented")
    original, cell = _variant(bug)
    result = grader.check("reduction.segmented", namespace_with("02_reduction",
                                                                "reduction.segmented", original,
                                                                cell))
    text = "\n".join(result.messages)
    setup = next(c for c in solution_notebook("02_reduction").cells
                 if "def block_tree_sum" in c.source)
    line = setup.source.splitlines().index("            partial[t] += partial[t + stride]") + 1
    assert f"<cell {setup.index}>:{line}: `partial[t] += partial[t + stride]`" in text, text
    assert re.search(r"called from <cell \d+>:\d+: `total = block_tree_sum\(value\)`", text), text


HAND_WRITTEN = [
    ("ArrayShapeError", "reduction.shared", "cuda.shared.array(MAX_TPB, float32)",
     "cuda.shared.array(cuda.blockDim.x * 2, float32)", "shared_sum_kernel", 2),
    ("WarpTypeError", "reduction.shuffle", "cuda.shfl_down_sync(FULL_MASK, value, offset)",
     "cuda.shfl_down_sync(1.0, value, offset)", "shuffle_sum_kernel", 3),
]


@pytest.mark.parametrize("error,exercise_id,old,new,kernel,arguments", HAND_WRITTEN,
                         ids=[h[0] for h in HAND_WRITTEN])
def test_the_simulators_own_diagnosis_stays_where_it_names_the_fix(error, exercise_id, old, new,
                                                                   kernel, arguments):
    """A shared array's shape computed in the kernel, a float mask to a shuffle: both are
    rejected by the compiler, and the simulator's own errors (which name the fix) are
    reported."""
    import numpy as np
    from numba import cuda

    from grader.gpu_compile.launches import argument_types

    original = exercise_cell("02_reduction", exercise_id)
    namespace = namespace_with("02_reduction", exercise_id, original, original.replace(old, new))
    launch = [cuda.to_device(np.zeros(64, np.float32)), cuda.to_device(np.zeros(1, np.float32)),
              64][:arguments]
    compiler = client.compiler()
    verdict = compiler.wait(compiler.submit(namespace[kernel], argument_types(launch)))
    assert verdict.error and not verdict.ok, verdict  # the GPU rejects the variant too
    result = grader.check(exercise_id, namespace)
    text = "\n".join(result.messages)
    assert result.status == "failed" and error in text, text
    assert "does not compile for the GPU" not in text, text


def _student_notebook(tmp_path: Path, lesson: str, cells: dict[str, str]) -> Path:
    """The solution notebook with the exercise cells of ``cells`` replaced."""
    source = next((Path(__file__).resolve().parents[1] / "solutions" / lesson).glob("*.ipynb"))
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("workbook", {})
        if meta.get("role") == "exercise" and meta.get("exercise_id") in cells:
            cell.source = cells[meta["exercise_id"]]
    path = tmp_path / f"{lesson}.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_the_grader_rejects_them_too(tmp_path):
    """The CLI's path (child processes running the notebook's cells), one bug per exercise."""
    chosen = {}
    for bug in BUGS:
        if bug[1] == "02_reduction" and bug[2] not in chosen:
            chosen[bug[2]] = bug
    cells = {exercise_id: _variant(bug)[1] for exercise_id, bug in chosen.items()}
    path = _student_notebook(tmp_path, "02_reduction", cells)
    report = grade_notebook(load(path), "sim", timeout=300, exercises=tuple(chosen),
                            metrics=False, sanitizers=False)
    results = {r.id: r for r in report.exercises}
    assert set(results) == set(chosen)
    for exercise_id, bug in chosen.items():
        _assert_rejected(bug, results[exercise_id], cells[exercise_id])


FOREIGN_CELL = '''
SOURCE = r"""
extern "C" __device__ int twice(int* ret, int x)
{
    *ret = 2 * y;
    return 0;
}
"""
twice = cuda.declare_device("twice", "int32(int32)", link=LINK)


@cuda.jit
def twice_kernel(out):
    out[0] = twice(21)
'''


def _foreign_check(link: str, filename: str):
    """The compile step on one launch of ``twice_kernel`` (a cell with CUDA C), as an
    exercise's check makes it; the case's own result is the simulator's."""
    import linecache

    import numpy as np
    from numba import cuda

    from grader.results import ERROR, PASSED, CaseResult

    cell = FOREIGN_CELL.replace("LINK", link)
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    namespace = {"cuda": cuda, "__name__": "__main__"}
    exec(compile(cell, filename, "exec"), namespace)

    def run_case():
        try:
            namespace["twice_kernel"][1, 1](cuda.to_device(np.zeros(1, np.int32)))
        except Exception as exc:  # the simulator runs the CUDA C: it fails too
            return CaseResult("one launch", ERROR, f"{type(exc).__name__}: {exc}")
        return CaseResult("one launch", PASSED)

    return step.CompileStep("sim").run(run_case, 0, 1), cell


def test_a_cuda_c_error_names_its_line_in_the_cu_and_in_the_cell():
    result, cell = _foreign_check("cuda.CUSource(SOURCE)", "<cell 7>")
    assert result.status == "failed", result
    cell_line = cell.splitlines().index("    *ret = 2 * y;") + 1
    source = cell.split('r"""')[1].split('"""')[0]  # the .cu, as NVRTC numbers its lines
    cu_line = source.splitlines().index("    *ret = 2 * y;") + 1
    assert result.message.startswith("twice_kernel does not compile for the GPU"), result.message
    assert (f"<cell 7>:{cell_line} (twice.cu line {cu_line}): identifier \"y\" is undefined\n"
            f"    *ret = 2 * y;") in result.message, result.message


def test_a_foreign_function_missing_from_its_cu_file_is_a_link_error(tmp_path):
    path = tmp_path / "twice.cu"
    path.write_text('extern "C" __device__ int twice_(int* ret, int x)\n'
                    "{ *ret = 2 * x; return 0; }\n")
    result, _ = _foreign_check(repr(str(path)), "<cell 8>")
    assert result.status == "failed", result
    assert "the kernel calls `twice`, which no linked CUDA C defines" in result.message
    assert "Undefined reference to 'twice'" in result.message, result.message


def test_a_recheck_of_unchanged_code_compiles_nothing():
    original = exercise_cell("02_reduction", "reduction.convergent")
    cell = original.replace("stride", "half")  # a kernel no other test compiles
    namespace = namespace_with("02_reduction", "reduction.convergent", original, cell)
    compiler = client.compiler()
    before = compiler.compiled
    assert grader.check("reduction.convergent", namespace).passed
    assert compiler.compiled == before + 1  # the one kernel, compiled once
    again = grader.check("reduction.convergent", namespace)
    assert again.passed and compiler.compiled == before + 1
    changed = namespace_with("02_reduction", "reduction.convergent", original,
                             cell.replace("half //= 2", "half = half // 2"))
    assert grader.check("reduction.convergent", changed).passed
    assert compiler.compiled == before + 2  # changed code is compiled again


def test_correct_solutions_pass_with_the_step(monkeypatch):
    """Every exercise of lesson 02 passes with its kernels compiled (the lessons' own tests
    check the solutions too; this one makes sure the kernels did go to the compiler)."""
    from grader.exercises import LESSONS

    submitted = []
    submit = client.Compiler.submit
    monkeypatch.setattr(client.Compiler, "submit",
                        lambda self, kernel, argtypes: submitted.append(kernel)
                        or submit(self, kernel, argtypes))
    for exercise in LESSONS["02_reduction"]:
        submitted.clear()
        result = grader.check(exercise.id, namespace_with("02_reduction", exercise.id))
        assert result.passed, result.summary()
        assert submitted, f"{exercise.id}: no kernel went to the compiler"
        assert not any("skipped" in m for m in result.messages), result.messages


NO_NVVM = '''import cuda.pathfinder as _pathfinder

_load = _pathfinder.load_nvidia_dynamic_lib


def _without_nvvm(libname):
    if libname == "nvvm":
        raise _pathfinder.DynamicLibNotFoundError("libnvvm: not found on this machine")
    return _load(libname)


_pathfinder.load_nvidia_dynamic_lib = _without_nvvm
'''


def _without_nvvm(tmp_path: Path) -> Path:
    """A folder whose sitecustomize makes the search for libNVVM fail, as on a machine
    without the numba-cuda[cu13] wheels (which bring it) and without a CUDA toolkit."""
    folder = tmp_path / "no-nvvm"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(NO_NVVM)
    return folder


def test_without_the_compiler_the_check_says_so_once(tmp_path, monkeypatch):
    compiler = client.Compiler(env={"PYTHONPATH": str(_without_nvvm(tmp_path))})
    monkeypatch.setattr(client, "_COMPILER", [compiler])
    monkeypatch.setattr(step, "_TOLD", set())
    original = exercise_cell("02_reduction", "reduction.simple")
    listed = namespace_with("02_reduction", "reduction.simple", original,
                            original.replace("stride = 1\n", "stride = [1, 2][0]\n"))
    try:
        first = grader.check("reduction.simple", listed)
        assert first.passed, first.summary()  # nothing to compile with: the simulator decides
        notes = [m for m in first.messages if "GPU compile step was skipped" in m]
        assert len(notes) == 1 and "libnvvm: not found" in notes[0], first.messages
        second = grader.check("reduction.convergent",
                              namespace_with("02_reduction", "reduction.convergent"))
        assert second.passed and not any("skipped" in m for m in second.messages), second
    finally:
        compiler.stop()


@pytest.mark.slow
def test_without_the_compiler_the_grader_says_so(tmp_path, monkeypatch):
    paths = [str(_without_nvvm(tmp_path)), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    path = _student_notebook(tmp_path, "02_reduction", {})
    report = grade_notebook(load(path), "sim", timeout=300, exercises=("reduction.simple",),
                            metrics=False, sanitizers=False)
    result, = report.exercises
    assert result.passed, result.summary()
    assert any("GPU compile step was skipped" in m and "libnvvm: not found" in m
               for m in result.messages), result.messages
