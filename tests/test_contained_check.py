"""A notebook's check in a child process (grader/contained.py, check_worker.py, shipping.py).

On a GPU the notebook's ``check()`` runs in a warm child process, so that a kernel that
never ends costs the check, not the notebook. The same path runs in the simulator when
asked (``WORKBOOK_CHECK_PROCESS=child``, or the functions called directly), which is how
these tests run it end to end without a GPU: a correct kernel passes with the result the
in-process check gives, a never-ending kernel is killed and reported within its bound
(the simulator's own watchdog is lengthened in the child, so that the parent's kill is
what is tested), the stop button ends a check at once, and the fixed kernel passes next
in the same process; one test drives a real Jupyter kernel through nbclient.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from interrupts import run_interrupting
from solution_cells import exercise_cell, namespace_with

import workbook
from grader import contained, shipping
from grader.check_worker import RemoteNamespace
from grader.exercise import check_exercise
from grader.exercises import LESSONS, get
from grader.results import NOT_IMPLEMENTED, PASSED, TIMEOUT

ROOT = Path(__file__).resolve().parents[1]
MODE = workbook.MODE
LESSON = "02_reduction"
NO_STRIDE_UPDATE = ("        stride *= 2\n", "")  # the loop of reduction.simple never advances
LONG_WATCHDOG = {"WORKBOOK_CHECK_TIMEOUT": "600"}  # the child's simulator does not stop it
BOUND = 4  # seconds without progress before the parent kills the child, in these tests
SLACK = 8  # killing, and a busy two-core machine


@pytest.fixture(scope="module", autouse=True)
def no_worker_left():
    yield
    contained.retire()


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds (a zombie counts as ended; a
    killed child is reaped in the background)."""
    deadline = time.monotonic() + within
    while True:
        try:
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def hanging_namespace() -> dict:
    return namespace_with(LESSON, "reduction.simple", *NO_STRIDE_UPDATE)


# --- where checks run ------------------------------------------------------------------------

def test_checks_run_in_a_child_on_a_gpu_and_in_the_notebook_in_the_simulator(monkeypatch):
    monkeypatch.delenv(contained.PROCESS_ENV, raising=False)
    assert (contained.use_child("gpu"), contained.use_child("sim")) == (True, False)
    monkeypatch.setenv(contained.PROCESS_ENV, "child")
    assert (contained.use_child("gpu"), contained.use_child("sim")) == (True, True)
    monkeypatch.setenv(contained.PROCESS_ENV, " Notebook ")
    assert (contained.use_child("gpu"), contained.use_child("sim")) == (False, False)
    monkeypatch.setenv(contained.PROCESS_ENV, "elsewhere")
    with pytest.raises(ValueError, match="WORKBOOK_CHECK_PROCESS='elsewhere'"):
        contained.use_child("gpu")


def test_remote_namespace_reads_what_was_sent_fetches_the_rest_and_writes_through():
    asked = []

    def fetch(name):
        asked.append(name)
        return (True, 32) if name == "TILE" else (False, None)

    store = {"kernel": "k"}
    ns = RemoteNamespace(store, fetch, absent=frozenset({"helper"}))
    assert ns["kernel"] == "k" and ns.get("TILE", 8) == 32 and ns["TILE"] == 32
    assert "BLOCK" not in ns and ns.get("BLOCK", (16, 16)) == (16, 16)
    assert "helper" not in ns  # known to be missing: no question
    ns["kernel"] = "watched"  # the tests replace a kernel: the student's functions see it
    assert store["kernel"] == "watched" and "TILE" not in store
    assert asked == ["TILE", "BLOCK", "BLOCK"]


# --- the objects of every lesson travel -------------------------------------------------------

DESCRIBE = r"""
def describe(value):
    # what kind of object: its type, whether it has Python code, its value if a constant
    fn = (getattr(value, "fn", None) or getattr(value, "py_func", None)
          or getattr(value, "__wrapped__", None) or value)
    return [type(value).__name__, getattr(fn, "__code__", None) is not None,
            repr(value) if isinstance(value, (int, str, tuple)) else ""]


def shares(objects, store):
    # whether every function among the objects has the store as its globals
    return all(getattr(getattr(v, "fn", None) or getattr(v, "py_func", None) or v,
                       "__globals__", store) is store for v in objects.values())
"""

DUMP = DESCRIBE + r"""
import json, pickle
from grader.exercises import LESSONS
from grader.runner import exec_cell
from grader.shipping import dumps
from solution_cells import solution_notebook
sent, expected = {}, {}
for lesson in sys.argv[3].split(","):
    namespace = {"__name__": "__main__"}
    for cell in solution_notebook(lesson).cells:
        if cell.role in ("setup", "exercise"):
            exec_cell({"index": cell.index, "source": cell.source}, namespace)
    for exercise in LESSONS[lesson]:
        names = (exercise.entry, *exercise.needs)
        sent[exercise.id] = dumps({n: namespace[n] for n in names}, namespace)
        expected[exercise.id] = {n: describe(namespace[n]) for n in names}
pickle.dump(sent, open(sys.argv[1], "wb"))
print(json.dumps(expected))
"""

LOAD = DESCRIBE + r"""
import json, pickle
from grader.shipping import loads
described = {}
for exercise_id, data in pickle.load(open(sys.argv[1], "rb")).items():
    objects, store = loads(data)
    described[exercise_id] = {n: describe(v) for n, v in objects.items()}
    assert shares(objects, store), f"{exercise_id}: functions with globals of their own"
print(json.dumps(described))
"""

IN_SIM = "import sys\nsys.path[:0] = [sys.argv[2], sys.argv[2] + '/tests']\nimport workbook\n"
IN_GPU = ("import sys\nsys.path[:0] = [sys.argv[2], sys.argv[2] + '/tests']\n"
          "from grader.gpu_compile import target\n"
          "target.use_real_compiler()  # numba's compiler for sm_90, without a GPU\n")


def run_script(prelude: str, script: str, *args: str, mode: str = "sim") -> str:
    """Run ``script`` in a fresh process (the simulator, or gpu mode without a GPU) with
    ``args[0]``, the repository and ``args[1:]`` as arguments; its last line of output."""
    env = dict(os.environ, WORKBOOK_MODE=mode)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    run = subprocess.run([sys.executable, "-c", prelude + script, args[0], str(ROOT), *args[1:]],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.splitlines()[-1]


@pytest.mark.sim_only
@pytest.mark.parametrize("mode", ["sim", "gpu"], ids=["simulator", "compiler"])
def test_every_exercises_objects_rebuild_in_another_process(mode, tmp_path):
    """Kernels, device functions, foreign functions, plain and cached functions, constants
    and tuples of every lesson's solution, made in the simulator or in gpu mode (the
    compiler, without a GPU), come back in a fresh process of the same mode as the same
    kinds of objects, their functions sharing one global namespace."""
    prelude = IN_SIM if mode == "sim" else IN_GPU
    path = tmp_path / "sent.pkl"
    expected = json.loads(run_script(prelude, DUMP, str(path), ",".join(sorted(LESSONS)),
                                     mode=mode))
    assert set(expected) == {e.id for lesson in LESSONS.values() for e in lesson}
    assert json.loads(run_script(prelude, LOAD, str(path), mode=mode)) == expected


OPTIONS = r"""
import pickle
from grader.runner import exec_cell
from solution_cells import solution_notebook
namespace = {"__name__": "__main__"}
for cell in solution_notebook("01_ldmatrix").cells:
    if cell.role in ("setup", "exercise"):
        exec_cell({"index": cell.index, "source": cell.source}, namespace)
pickle.dump(namespace["ldmatrix_x1_kernel"].targetoptions, open(sys.argv[1], "wb"))
print("ok")
"""

DECLARED_AGAIN = r"""
import pickle
from grader.shipping import loads, _gpu_declaration
objects, store = loads(pickle.load(open(sys.argv[1], "rb"))["ldmatrix.x1"])
kernel = objects["ldmatrix_x1_kernel"]
name, sig, link, cooperative, abi = _gpu_declaration(store["ldmatrix_x1"])
assert (name, str(sig), cooperative, abi) == (
    "ldmatrix_x1", "(uint16*,) -> uint32", False, "numba"), (name, sig, abi)
assert [item.data for item in link] == [objects["LDMATRIX_X1_CU"]]
ptx = target.compile_kernel(kernel.py_func, "void(uint16[:, ::1], uint32[::1])")
assert "ldmatrix_x1" in ptx
print(kernel.targetoptions == pickle.load(open(sys.argv[3], "rb")))
"""

SIM_FROM_GPU = r"""
import pickle
from grader.exercise import check_exercise
from grader.exercises import get
from grader.shipping import loads
objects, store = loads(pickle.load(open(sys.argv[1], "rb"))["ldmatrix.x1"])
store.update(objects)
kinds = f"{type(objects['ldmatrix_x1_kernel']).__name__} {type(store['ldmatrix_x1']).__name__}"
print(kinds, check_exercise(get("ldmatrix.x1"), store, "sim", seed=3).status)
"""


@pytest.mark.sim_only
def test_a_gpu_kernel_with_linked_cuda_c_travels_to_a_gpu_process_and_to_the_simulator(tmp_path):
    """Lesson 01's kernel calls a function declared with ``cuda.declare_device(...,
    link=cuda.CUSource(...))``: another gpu-mode process declares it again with the same
    CUDA C and compiles the kernel for sm_90 with the same options (no GPU needed to
    compile); a simulator process rebuilds both as simulator objects, and the exercise's
    check passes there (the simulator's view of a stalled GPU check)."""
    sent, options = tmp_path / "sent.pkl", tmp_path / "options.pkl"
    run_script(IN_GPU, DUMP, str(sent), "01_ldmatrix", mode="gpu")
    run_script(IN_GPU, OPTIONS, str(options), mode="gpu")
    assert run_script(IN_GPU, DECLARED_AGAIN, str(sent), str(options), mode="gpu") == "True"
    assert run_script(IN_SIM, SIM_FROM_GPU, str(sent)) == f"FakeCUDAKernel ForeignFunction {PASSED}"


def test_the_workbooks_device_functions_travel_by_name():
    """Each mode has its own ``workbook.vector.load4`` and collectives (an intrinsic on a GPU,
    Python in the simulator): the other process takes its own, not a copy of this one's."""
    from workbook import collectives, vector

    namespace = {"__name__": "__main__", "cuda": __import__("numba").cuda, "load4": vector.load4,
                 "warp_all_reduce_sum": collectives.warp_all_reduce_sum}
    exec("def kernel_body(x, out):\n    a, b, c, d = load4(x, 0)\n"
         "    out[0] = warp_all_reduce_sum(a + b + c + d, 32)\n", namespace)
    kernel = namespace["cuda"].jit(namespace["kernel_body"])
    objects, store = shipping.loads(shipping.dumps({"kernel": kernel}, namespace))
    assert store["load4"] is vector.load4
    assert store["warp_all_reduce_sum"] is collectives.warp_all_reduce_sum
    assert objects["kernel"] is not kernel and type(objects["kernel"]) is type(kernel)


def test_a_notebook_function_that_cannot_be_pickled_is_named():
    lock = threading.Lock()
    namespace = {"__name__": "__main__", "lock": lock}
    exec("def x1_fragment_map():\n    with lock:\n        return None\n", namespace)
    with pytest.raises(shipping.ShippingError, match=r"x1_fragment_map cannot be sent .*lock"):
        shipping.dumps({"x1_fragment_map": namespace["x1_fragment_map"]}, namespace)


# --- checks in the child ------------------------------------------------------------------------

SAME_RESULT = [  # one exercise per lesson, each with objects of another kind
    ("01_ldmatrix", "ldmatrix.mma"),  # foreign functions; the other ldmatrix sources on demand
    ("02_reduction", "reduction.shuffle"),  # a kernel calling the student's device function
    ("03_softmax", "softmax.dispatch"),  # functools.cache'd kernel factories, host functions
    ("04_layernorm", "layernorm.dispatch"),  # host functions choosing among kernels
    ("05_ccl", "ccl.propagation"),  # host code launching kernels the grader watches
]


@pytest.mark.parametrize("lesson, exercise_id", SAME_RESULT, ids=[e for _, e in SAME_RESULT])
def test_the_child_gives_the_result_the_notebooks_process_gives(lesson, exercise_id):
    namespace = namespace_with(lesson, exercise_id)
    here = check_exercise(get(exercise_id), namespace, MODE, seed=7)
    there = contained.check_in_child(get(exercise_id), namespace, MODE, seed=7)
    assert here.status == PASSED, here.summary()
    assert (there.status, there.messages, [(c.name, c.status) for c in there.cases]) == \
        (here.status, here.messages, [(c.name, c.status) for c in here.cases])
    assert there.summary() == here.summary() and there._repr_html_() == here._repr_html_()


@pytest.mark.sim_only
def test_a_race_between_blocks_in_the_students_host_code_is_caught_in_the_child():
    """The grader swaps the kernels the student's host code launches for watched ones:
    in the child the swap reaches the student's functions as it does in the notebook."""
    namespace = namespace_with("05_ccl", "ccl.union_find", "old = cuda.atomic.min(forest, a, b)",
                               "old = forest[a]\n        forest[a] = min(old, b)")
    here = check_exercise(get("ccl.union_find"), namespace, "sim", seed=5)
    there = contained.check_in_child(get("ccl.union_find"), namespace, "sim", seed=5)
    assert not here.passed and "race" in here.summary(), here.summary()
    assert (there.status, there.messages) == (here.status, here.messages)


def test_a_missing_entry_is_not_implemented_as_in_the_notebooks_process():
    namespace = {"__name__": "__main__"}
    here = check_exercise(get("reduction.simple"), namespace, MODE)
    there = contained.check_in_child(get("reduction.simple"), namespace, MODE)
    assert there.status == here.status == NOT_IMPLEMENTED
    assert there.messages == here.messages


def test_what_the_students_code_prints_reaches_the_cell(capfd):
    namespace = namespace_with("01_ldmatrix", "ldmatrix.predict", "    return coords\n",
                               "    print('map ready')\n    import sys\n"
                               "    print('a warning', file=sys.stderr)\n    return coords\n")
    result = contained.check_in_child(get("ldmatrix.predict"), namespace, MODE)
    out, err = capfd.readouterr()
    assert result.status == PASSED, result.summary()
    assert out.count("map ready") == len(result.cases) and "a warning" in err


def test_imports_and_relative_paths_resolve_as_in_the_notebook_now(tmp_path, monkeypatch):
    """The notebook added a folder to its import path and changed its working folder after
    the child started: the student's function, which imports a module from that folder and
    reads a file by a relative path, works in the child as it does in the notebook."""
    import numpy as np

    contained.wait_ready(contained.worker_for(MODE))
    solution = namespace_with("01_ldmatrix", "ldmatrix.predict")["x1_fragment_map"]
    np.save(tmp_path / "fragments.npy", solution())
    (tmp_path / "fragment_files.py").write_text(
        "import numpy\n\ndef load():\n    return numpy.load('fragments.npy')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    exec("import fragment_files\n\ndef x1_fragment_map():\n    return fragment_files.load()\n",
         namespace)
    result = contained.check_in_child(get("ldmatrix.predict"), namespace, MODE)
    assert result.status == PASSED, result.summary()


def test_objects_that_cannot_travel_are_checked_in_the_notebooks_process(monkeypatch, capsys):
    import grader

    monkeypatch.setenv(contained.PROCESS_ENV, "child")
    namespace = namespace_with("01_ldmatrix", "ldmatrix.predict")
    namespace["lock"] = threading.Lock()
    source = exercise_cell("01_ldmatrix", "ldmatrix.predict").replace(
        "    return coords\n", "    with lock:\n        return coords\n")
    exec(compile(source, "<cell 8>", "exec"), namespace)
    result = grader.check("ldmatrix.predict", namespace=namespace)
    err = capsys.readouterr().err
    assert result.status == PASSED, result.summary()
    assert "ldmatrix.predict: this check runs in the notebook's own process" in err
    assert "x1_fragment_map cannot be sent to another process" in err


# --- a kernel that never ends ---------------------------------------------------------------------

def test_a_never_ending_kernel_is_stopped_and_the_fixed_kernel_passes_next():
    worker = contained.worker_for(MODE, LONG_WATCHDOG)
    contained.wait_ready(worker)
    start = time.monotonic()
    result = contained.check_in_child(get("reduction.simple"), hanging_namespace(), MODE,
                                      seed=1, timeout=BOUND, env=LONG_WATCHDOG, diagnose=False)
    seconds = time.monotonic() - start
    assert result.status == TIMEOUT, result.summary()
    assert BOUND <= seconds < BOUND + SLACK, seconds
    first = get("reduction.simple").cases_for(MODE)[0].name()
    message = result.messages[0]
    assert message.startswith(f"{first}: reduction.simple did not finish case {first} within "
                              f"{BOUND} s"), message
    for words in ("The process running the check was stopped", "forgotten `stride *= 2`",
                  "cuda.syncthreads()", "set WORKBOOK_CHECK_TIMEOUT to a larger number"):
        assert words in message, words
    assert [(c.name, c.status) for c in result.cases] == [(first, TIMEOUT)]
    assert gone(worker.proc.pid), "the child that ran the kernel still runs"
    fixed = contained.check_in_child(get("reduction.simple"),
                                     namespace_with(LESSON, "reduction.simple"), MODE, seed=1,
                                     env=LONG_WATCHDOG)
    assert fixed.status == PASSED, fixed.summary()


def loop_line() -> int:
    """The line of the solution's cell where reduction.simple's threads wait each turn."""
    lines = exercise_cell(LESSON, "reduction.simple").splitlines()
    return next(i for i, line in enumerate(lines, 1) if "cuda.syncthreads()" in line)


def test_a_stalled_check_reports_what_the_simulator_sees_in_the_same_code():
    """On a GPU nobody sees the threads: while a case makes no progress, the simulator
    checks the same objects in another child and its watchdog names the line."""
    contained.wait_ready(contained.worker_for(MODE, LONG_WATCHDOG))
    start = time.monotonic()
    result = contained.check_in_child(get("reduction.simple"), hanging_namespace(), MODE,
                                      seed=1, timeout=6, env=LONG_WATCHDOG, diagnose=True)
    seconds = time.monotonic() - start
    assert result.status == TIMEOUT, result.summary()
    message = result.messages[0]
    assert "the simulator ran the same code on its case n=2, integers" in message, message
    assert f"line {loop_line()}: cuda.syncthreads()" in message, message
    assert seconds < 6 + contained.DIAGNOSIS_WAIT_SECONDS + SLACK, seconds


INTERRUPTED = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import workbook
from solution_cells import namespace_with
from grader import contained
from grader.exercises import get

def say(**event):
    print(json.dumps(event), flush=True)

ENV = {"WORKBOOK_CHECK_TIMEOUT": "600"}
hang = namespace_with("02_reduction", "reduction.simple", "        stride *= 2\n", "")
fixed = namespace_with("02_reduction", "reduction.simple")
worker = contained.worker_for(workbook.MODE, ENV)
contained.wait_ready(worker)
say(step="check", pid=worker.proc.pid)
try:
    contained.check_in_child(get("reduction.simple"), hang, workbook.MODE, seed=1, timeout=300,
                             env=ENV, diagnose=False)
    say(step="finished")
except KeyboardInterrupt as exc:
    say(step="interrupted", message=str(exc))
result = contained.check_in_child(get("reduction.simple"), fixed, workbook.MODE, seed=1, env=ENV)
say(step="after", status=result.status)
"""


def test_the_stop_button_ends_the_check_at_once_and_the_next_check_passes(tmp_path):
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    # 3 s after the check starts, its case is running: its kernel never ends
    lines, steps = run_interrupting(script, dict(os.environ, PYTHONUNBUFFERED="1"),
                                    at=("check",), wait=3, give_up=240)
    events = {step["step"]: step for step in steps}
    assert "interrupted" in events, "".join(lines)
    assert events["interrupted"]["message"].startswith("reduction.simple: check interrupted")
    assert events["interrupted"]["delay"] < 2, events["interrupted"]["delay"]
    assert gone(events["check"]["pid"]), "the child that ran the kernel still runs"
    assert events["after"]["status"] == PASSED, "".join(lines)


ORPHAN = r"""
import sys
sys.path.insert(0, sys.argv[1])
import workbook
from grader import contained
worker = contained.worker_for(workbook.MODE)
contained.wait_ready(worker)
print(worker.folder, worker.proc.pid, flush=True)
import os
os._exit(0)  # no clean-up: as a notebook kernel that is killed
"""


def test_the_child_ends_when_the_notebooks_process_dies():
    run = subprocess.run([sys.executable, "-c", ORPHAN, str(ROOT)], capture_output=True,
                         text=True, cwd=ROOT, timeout=240)
    folder, pid = run.stdout.split()[-2:]
    assert gone(int(pid), within=10), "the checking process outlived the notebook's process"
    assert not Path(folder).exists(), "the checking process left its folder behind"


# --- in a real Jupyter kernel --------------------------------------------------------------------

def notebook_cells() -> list[str]:
    kernel = exercise_cell(LESSON, "reduction.simple")
    hang = kernel.replace(*NO_STRIDE_UPDATE)
    talking = kernel.replace("    if t == 0:\n        output[0] = input[0]\n",
                             "    if t == 0:\n        output[0] = input[0]\n"
                             "        print('kernel done, n =', 2 * cuda.blockDim.x)\n")
    assert talking != kernel and hang != kernel
    return [
        "%env WORKBOOK_MODE=sim\n%env WORKBOOK_CHECK_PROCESS=child\n"
        "%env WORKBOOK_CHECK_TIMEOUT=600\n"
        "import os\nimport workbook\nfrom numba import cuda\nfrom grader import check\n"
        "print('kernel pid', os.getpid())",
        hang,
        'check("reduction.simple")',
        talking,
        'check("reduction.simple")',
    ]


@pytest.mark.slow
def test_a_notebook_in_a_jupyter_kernel_is_interrupted_and_checks_the_fixed_kernel():
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in notebook_cells()])
    times: dict[str, float] = {}

    def interrupt_later(cell, cell_index, **_):
        if cell_index != 2:
            return
        pid = int(nb.cells[0].outputs[-1]["text"].split()[-1])

        def stop():
            times["sent"] = time.monotonic()
            os.kill(pid, signal.SIGINT)  # what Jupyter's stop button does

        threading.Timer(6, stop).start()

    def finished(cell, cell_index, **_):
        times[cell_index] = time.monotonic()

    client = NotebookClient(nb, timeout=240, kernel_name="python3", allow_errors=True,
                            on_cell_execute=interrupt_later, on_cell_executed=finished,
                            resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    stopped = nb.cells[2].outputs
    assert [o.get("ename") for o in stopped if o["output_type"] == "error"] == \
        ["KeyboardInterrupt"], stopped
    assert "reduction.simple: check interrupted" in stopped[-1]["evalue"], stopped[0].get("text")
    assert times[2] - times["sent"] < 3, times
    outputs = nb.cells[4].outputs
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    shown = [o["data"]["text/plain"] for o in outputs if o["output_type"] == "execute_result"]
    assert len(shown) == 1 and shown[0].startswith("[PASSED] reduction.simple"), outputs
    assert "kernel done, n = 2" in text, outputs
    assert [o["output_type"] for o in outputs if o["output_type"] == "error"] == [], outputs


def test_a_notebooks_check_on_a_gpu_goes_to_the_child(monkeypatch):
    import grader
    import grader.exercise

    calls = []

    def in_child(exercise, namespace, mode, seed=None, **options):
        calls.append((exercise.id, mode, seed))
        return "result"

    def in_process(*args, **kwargs):
        raise AssertionError("a GPU check must not run in the notebook's process")

    monkeypatch.delenv(contained.PROCESS_ENV, raising=False)
    monkeypatch.setattr(workbook, "current_mode", lambda: "gpu")
    monkeypatch.setattr(contained, "check_in_child", in_child)
    monkeypatch.setattr(grader.exercise, "check_exercise", in_process)
    assert grader.check("reduction.simple", namespace={}, seed=4) == "result"
    assert calls == [("reduction.simple", "gpu", 4)]
