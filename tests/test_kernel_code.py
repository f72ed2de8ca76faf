"""Which compute-sanitizer tools have something to look for in a kernel (grader.kernel_code),
and the sanitize stage leaving out the others.

The kernels are compiled by numba-cuda's real compiler for sm_90 in a process of its own (no
GPU needed: tests/sm90_compile.py's compiler). What each kernel uses is plain from its source
(a shared array, a barrier, a shuffle); what each tool looks at is NVIDIA's documentation:
racecheck, hazards in shared memory; synccheck, barriers and warp-synchronous primitives.
"""

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from gpu_tools import needs_compute_sanitizer
from test_grading_phases import REDUCTION, tool_that_reports_a_race  # noqa: F401  (fixture)

import workbook
from grader import kernel_cache
from grader import sanitizer as tools
from grader.kernel_code import NEEDS, unneeded_tools
from grader.notebook import load
from grader.results import FAILED, PASSED, ExerciseResult
from grader.session import Attempt

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, sys
from pathlib import Path
from types import SimpleNamespace
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from grader.gpu_compile import target
target.use_real_compiler()
from numba import cuda, float32, types
from numba.core import sigutils
from numba.cuda.compiler import compile_cuda
from grader.kernel_code import code_of, unneeded_tools

FULL = 0xFFFFFFFF

def plain(a, b):
    i = cuda.grid(1)
    if i < a.size:
        b[i] = a[i] + 1

def global_atomics(a, b):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(b, 0, a[i])

def own_slot_in_shared(a, b):
    s = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    b[t] = s[t] * 2

def dynamic_shared(a, b):
    s = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    b[t] = s[t]

def barrier_only(a, b):
    t = cuda.threadIdx.x
    a[t] += 1
    cuda.syncthreads()
    b[t] = a[(t + 1) % a.size]

def warp_shuffle(a, b):
    t = cuda.threadIdx.x
    b[t] = cuda.shfl_down_sync(FULL, a[t], 1)

def warp_barrier(a, b):
    t = cuda.threadIdx.x
    a[t] += 1
    cuda.syncwarp(FULL)
    b[t] = a[t ^ 1]

@cuda.jit(device=True)
def tree_in_shared(a, t):
    s = cuda.shared.array(128, float32)
    s[t] = a[t]
    cuda.syncthreads()
    return s[127 - t]

def through_a_device_function(a, b):
    t = cuda.threadIdx.x
    b[t] = tree_in_shared(a, t)

SIGNATURE = "void(float32[::1], float32[::1])"

def tools_left_out(py_func):
    args, _ = sigutils.normalize_signature(SIGNATURE)
    library = compile_cuda(py_func, types.void, args, cc=(9, 0)).library
    return sorted(unneeded_tools([code_of(SimpleNamespace(_codelibrary=library))]))

found = {f.__name__: tools_left_out(f) for f in (
    plain, global_atomics, own_slot_in_shared, dynamic_shared, barrier_only, warp_shuffle,
    warp_barrier, through_a_device_function)}

# the lesson's own kernels, from the solution notebook's cells
from solution_cells import solution_notebook
from grader.runner import exec_cell
namespace = {"__name__": "__main__"}
for cell in solution_notebook("02_reduction").program_for("reduction.shared"):
    exec_cell({"index": cell.index, "source": cell.source}, namespace)
for name in ("simple_sum_kernel", "convergent_sum_kernel", "shared_sum_kernel"):
    found[name] = tools_left_out(namespace[name].py_func)

# CUDA C linked in: its code is not numba's to read
cu = Path(sys.argv[2])
cu.write_text('extern "C" __device__ int twice(float* r, float x) { *r = 2 * x; return 0; }')
twice = cuda.declare_device("twice", "float32(float32)", link=str(cu))

def calls_cuda_c(a, b):
    t = cuda.threadIdx.x
    b[t] = twice(a[t])

found["calls_cuda_c"] = tools_left_out(calls_cuda_c)
print(json.dumps(found))
'''


@pytest.fixture(scope="module")
def left_out(tmp_path_factory):
    """Each probe kernel's tools left out, compiled once for the module's tests."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env.pop("WORKBOOK_MODE", None)
    cu = tmp_path_factory.mktemp("cuda-c") / "twice.cu"
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), str(cu)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("kernel, expected", [
    ("plain", ["racecheck", "synccheck"]),
    ("global_atomics", ["racecheck", "synccheck"]),
    ("own_slot_in_shared", ["synccheck"]),
    ("dynamic_shared", ["synccheck"]),
    ("barrier_only", ["racecheck"]),
    ("warp_shuffle", ["racecheck"]),
    ("warp_barrier", ["racecheck"]),
    ("through_a_device_function", []),
    ("simple_sum_kernel", ["racecheck"]),  # lesson 02: a tree in global memory, barriers
    ("convergent_sum_kernel", ["racecheck"]),
    ("shared_sum_kernel", []),
    ("calls_cuda_c", []),  # CUDA C linked in: every tool runs
])
def test_the_tools_that_have_nothing_to_look_for(left_out, kernel, expected):
    assert left_out[kernel] == expected


def test_memcheck_always_runs_and_no_kernel_means_every_tool():
    assert "memcheck" not in NEEDS
    assert unneeded_tools([]) == {}  # nothing recorded: nothing is left out on a guess
    assert unneeded_tools(["define void @k() { ret void }", None]) == {}
    assert sorted(unneeded_tools(["define void @k() { ret void }"])) == ["racecheck",
                                                                         "synccheck"]


def test_the_check_s_mark_carries_the_tools_left_out(tmp_path, monkeypatch):
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path))
    assert kernel_cache.unneeded_tools("reduction.simple") == {}  # no mark yet
    kernel_cache.mark_checked("reduction.simple", {"racecheck": "no shared memory"})
    kernel_cache.mark_checked("reduction.shared")
    kernel_cache.mark_checked(None)  # the check's end: every exercise done
    assert kernel_cache.wait_for_check("reduction.simple", seconds=0)
    assert kernel_cache.unneeded_tools("reduction.simple") == {"racecheck": "no shared memory"}
    assert kernel_cache.unneeded_tools("reduction.shared") == {}
    assert kernel_cache.unneeded_tools("reduction.segmented") == {}  # only the "all" mark
    (tmp_path / kernel_cache.CHECKED_MARK.format("reduction.coarsened")).write_text("[1, 2")
    assert kernel_cache.unneeded_tools("reduction.coarsened") == {}  # unreadable: every tool
    assert not list(tmp_path.glob("*.partial"))
    monkeypatch.setenv(kernel_cache.CACHE_ENV, "0")
    assert kernel_cache.unneeded_tools("reduction.simple") == {}


def test_a_tool_left_out_is_not_run_and_says_why(tool_that_reports_a_race,  # noqa: F811
                                                 tmp_path, monkeypatch):
    """The runner under the tool skips an exercise whose mark leaves its tool out: the race
    the stand-in tool reports in reduction.shared's part is not there to find. A mark that
    leaves out another tool changes nothing."""
    notebook = load(REDUCTION)
    order = ["reduction.simple", "reduction.shared"]
    cells = [asdict(c) for c in notebook.program_for(order[-1])]
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path))
    kernel_cache.mark_checked("reduction.shared", {"synccheck": "no barrier"})
    findings = tools.sanitize_notebook(tool_that_reports_a_race, "racecheck", order, cells, 120,
                                       mode=workbook.MODE)
    assert findings["reduction.shared"].errors == 1 and not findings["reduction.shared"].unneeded
    kernel_cache.mark_checked("reduction.shared", {"racecheck": "no shared memory (stand-in)"})
    findings = tools.sanitize_notebook(tool_that_reports_a_race, "racecheck", order, cells, 120,
                                       mode=workbook.MODE)
    assert findings["reduction.simple"].errors == 0 and not findings["reduction.simple"].unneeded
    left_out = findings["reduction.shared"]
    assert left_out.errors == 0 and left_out.unneeded == "no shared memory (stand-in)"
    assert left_out.message() == ("compute-sanitizer racecheck: not run (no shared memory "
                                  "(stand-in))")


def test_a_crash_after_a_tool_was_left_out_is_blamed_as_before(monkeypatch):
    attempt = Attempt(events=[{"start": "a.x"}, {"unneeded": ["a.x", "why"]}, {"start": "a.y"}],
                      output="", returncode=-11, crashed="a.y")
    calls = []

    def run_exercises(job, timeout, wrap=None, on_event=None):
        calls.append(job)
        return [attempt]

    monkeypatch.setattr("grader.session.run_exercises", run_exercises)
    findings = tools.sanitize_notebook("/bin/true", "synccheck", ["a.x", "a.y"], [], 10)
    assert calls[0]["tool"] == "synccheck"
    assert findings["a.x"].unneeded == "why" and findings["a.x"].errors == 0
    assert findings["a.y"].errors is None  # the crash: not assessed


def _result():
    return ExerciseResult(id="reduction.simple", title="t", status=PASSED, score=1.0,
                          max_score=1.0, messages=["all tests passed (gpu mode)"], mode="gpu")


def test_the_result_names_the_tools_that_ran_and_those_left_out():
    left_out = tools.Finding("racecheck", 0, [], unneeded="its kernels use no shared memory")
    result = _result()
    tools.apply_findings(result, [tools.Finding("memcheck", 0, []), left_out,
                                  tools.Finding("synccheck", 0, [])])
    assert result.status == PASSED
    assert "compute-sanitizer: no errors (memcheck, synccheck)" in result.messages
    assert ("compute-sanitizer racecheck: not run (its kernels use no shared memory)"
            in result.messages)
    broken = _result()
    tools.apply_findings(broken, [tools.Finding("memcheck", 2, ["Invalid __global__ read"]),
                                  left_out])
    assert broken.status == FAILED and broken.score == 0


@pytest.mark.gpu
@needs_compute_sanitizer
def test_on_a_gpu_racecheck_runs_where_there_is_shared_memory(tmp_path):
    """Graded on a GPU: reduction.simple's kernel (a tree in global memory) gets no racecheck,
    and says so; reduction.shared with a barrier taken out still fails by racecheck's
    report of the race."""
    import nbformat

    from grader.grade import grade_notebook

    notebook = nbformat.read(REDUCTION, as_version=4)
    for cell in notebook.cells:
        role = cell.get("metadata", {}).get("workbook", {})
        if role.get("role") == "exercise" and role.get("exercise_id") == "reduction.shared":
            assert "        cuda.syncthreads()\n" in cell.source
            cell.source = cell.source.replace("        cuda.syncthreads()\n", "", 1)
    path = tmp_path / "student.ipynb"
    nbformat.write(notebook, path)
    report = grade_notebook(load(path), "gpu", exercises=["reduction.simple", "reduction.shared"],
                            metrics=False)
    results = {r.id: r for r in report.exercises}
    simple, shared = results["reduction.simple"], results["reduction.shared"]
    assert simple.status == PASSED, simple.summary()
    assert f"compute-sanitizer racecheck: not run ({NEEDS['racecheck'][1]})" in simple.messages
    assert "compute-sanitizer: no errors (memcheck, synccheck)" in simple.messages
    assert shared.status == FAILED
    assert any(m.startswith("compute-sanitizer racecheck: ") and "error(s)" in m
               for m in shared.messages), shared.summary()
