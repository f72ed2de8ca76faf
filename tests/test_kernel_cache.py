"""A notebook's kernels compiled once for all its grading processes (grader.kernel_cache)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import kernel_cache

ROOT = Path(__file__).resolve().parents[1]

# Run in a process of its own without the simulator: numba.cuda's real dispatcher (making one
# needs no GPU; compiling does). Prints what it found as JSON.
PROBE = '''
import json, linecache, sys
sys.path.insert(0, sys.argv[1])
from numba import cuda
from grader import kernel_cache

installed = kernel_cache.install()

def define(source, filename):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"cuda": cuda}
    exec(compile(source, filename, "exec"), namespace)
    return namespace

cell = define("@cuda.jit\\ndef k(x):\\n    x[0] = 1\\n\\n\\n@cuda.jit(device=True)\\n"
              "def d(a):\\n    return a\\n", "<cell In[3]>")
other = define("@cuda.jit\\ndef k(x):\\n    x[0] = 2\\n", "<cell In[3]>")
module = define("@cuda.jit\\ndef k(x):\\n    x[0] = 1\\n", "/nonexistent/module.py")
found = {"installed": installed,
         "cell": type(cell["k"]._cache).__name__, "device": type(cell["d"]._cache).__name__,
         "module": type(module["k"]._cache).__name__}
if installed:
    found["path"] = cell["k"]._cache.cache_path
    found["stamps_differ"] = (cell["k"]._cache._impl.locator.get_source_stamp()
                              != other["k"]._cache._impl.locator.get_source_stamp())
if len(sys.argv) > 2:  # on a GPU: compile (or load) and run the cell's kernel
    import numpy as np
    x = cuda.to_device(np.zeros(1, np.int32))
    cell["k"][1, 1](x)
    found["value"] = int(x.copy_to_host()[0])
    found["hits"] = sum(cell["k"]._cache_hits.values())
print(json.dumps(found))
'''


def probe(tmp_path, folder, *extra) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", WORKBOOK_MODE="gpu")
    env.pop(kernel_cache.CACHE_ENV, None)
    if folder is not None:
        env[kernel_cache.CACHE_ENV] = str(folder)
    done = subprocess.run([sys.executable, str(script), str(ROOT), *extra], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cell_kernels_and_device_functions_use_the_folder_other_code_does_not(tmp_path):
    found = probe(tmp_path, tmp_path / "kernels")
    assert found["installed"] is True
    assert (found["cell"], found["device"], found["module"]) == ("CUDACache", "CUDACache",
                                                                 "NullCache")
    assert found["path"] == str(tmp_path / "kernels")
    assert found["stamps_differ"]  # another function under the same cell and name


def test_without_the_folder_nothing_is_cached(tmp_path):
    found = probe(tmp_path, None)
    assert found == {"installed": False, "cell": "NullCache", "device": "NullCache",
                     "module": "NullCache"}
    assert probe(tmp_path, "0")["installed"] is False


def test_each_notebook_gets_its_own_folder_and_the_environment_is_restored(monkeypatch):
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    with kernel_cache.for_notebook("gpu") as first:
        assert os.environ[kernel_cache.CACHE_ENV] == first and Path(first).is_dir()
    assert kernel_cache.CACHE_ENV not in os.environ and not Path(first).exists()
    with kernel_cache.for_notebook("gpu") as second:
        assert second != first
    with kernel_cache.for_notebook("sim") as none:
        assert none is None and kernel_cache.CACHE_ENV not in os.environ
    monkeypatch.setenv(kernel_cache.CACHE_ENV, "0")
    with kernel_cache.for_notebook("gpu") as off:
        assert off is None and os.environ[kernel_cache.CACHE_ENV] == "0"


def test_a_kept_folder_outlives_its_notebook_until_a_later_use_removes_it(monkeypatch):
    """A batch task keeps each notebook's kernels until the notebooks are profiled together."""
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    with kernel_cache.for_notebook("gpu", remove=False) as kept:
        pass
    assert Path(kept).is_dir() and kernel_cache.CACHE_ENV not in os.environ
    with kernel_cache.for_notebook("gpu", kept) as again:
        assert again == kept and os.environ[kernel_cache.CACHE_ENV] == kept
    assert not Path(kept).exists()
    with pytest.raises(RuntimeError), kernel_cache.for_notebook("gpu", remove=False) as failed:
        raise RuntimeError("the notebook's stages failed: nothing will profile it")
    assert not Path(failed).exists()


def test_a_tool_waits_for_the_checks_mark_and_gives_up_after_its_bound(monkeypatch, tmp_path):
    import threading
    import time

    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    assert kernel_cache.wait_for_check("x.one") is False  # no cache: nothing to wait for
    with kernel_cache.for_notebook("gpu"):
        start = time.monotonic()
        assert kernel_cache.wait_for_check("x.one", seconds=0.2) is False
        assert time.monotonic() - start >= 0.2
        threading.Timer(0.1, kernel_cache.mark_checked, ["x.one"]).start()  # the check
        assert kernel_cache.wait_for_check("x.one", seconds=5) is True
        assert kernel_cache.wait_for_check("x.two", seconds=0.05) is False
        kernel_cache.mark_checked(None)  # the check is over: no exercise waits any more
        assert kernel_cache.wait_for_check("x.two", seconds=0.05) is True


@pytest.mark.gpu
def test_a_second_process_loads_the_kernel_the_first_compiled(tmp_path):
    folder = tmp_path / "kernels"
    first = probe(tmp_path, folder, "run")
    second = probe(tmp_path, folder, "run")
    assert first["value"] == second["value"] == 1
    assert (first["hits"], second["hits"]) == (0, 1)
