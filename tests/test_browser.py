"""The lessons in a real browser: JupyterLab on localhost, driven by Playwright and Chromium.

Each student notebook runs top to bottom ("Run > Run All Cells"); every check cell must
show its result and the browser console must stay free of errors. In lesson 02 a
solution typed into an exercise cell must pass its check, a check whose kernel never
ends must be stopped at its time limit with a diagnosis, and the stop button must
interrupt a running check and leave the kernel usable.

Needs Playwright for Python (in the ``dev`` extra) and Debian's ``chromium`` package
(``sudo apt-get install -y chromium``); Playwright's own browser downloads are not used.
Without them the tests are skipped with that advice. The server runs in simulator mode
on a copy of ``lessons/``: the repository's notebooks are never modified.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("WORKBOOK_CHROMIUM", "/usr/bin/chromium")
INSTALL = ("install Debian's chromium (sudo apt-get install -y chromium) and Playwright for "
           "Python (pip install -e '.[dev]'); set WORKBOOK_CHROMIUM to use another Chromium")
TOKEN = "workbook-browser-test"
EXECUTED = re.compile(r"^\s*\[\d+\]:\s*$")  # a cell's prompt once it has run: "[12]:"
RUNNING = re.compile(r"\[\*\]")
KERNEL_IDLE = re.compile(r"^Python 3 \(ipykernel\) \| Idle$")
CHECK_BOUND = 5  # WORKBOOK_CHECK_TIMEOUT for the server's kernels, in seconds
NOTEBOOK_SECONDS = 180  # for "Run All Cells" of one lesson (15-20 s alone on two cores)
LESSONS = sorted(p.relative_to(ROOT / "lessons").as_posix()
                 for p in (ROOT / "lessons").glob("*/*.ipynb"))

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sync_playwright is None, reason=f"Playwright is not installed: {INSTALL}"),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no browser at {CHROMIUM}: {INSTALL}"),
]

# JupyterLab settings for a quiet, fully rendered page: no news or update checks (they would
# reach for the network), and every cell in the DOM (not only those in view).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A JupyterLab server on a copy of lessons/; yields its base URL."""
    home = tmp_path_factory.mktemp("jupyter")
    root = home / "lessons"
    shutil.copytree(ROOT / "lessons", root)
    for name, values in SETTINGS.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port = _free_port()
    env = dict(os.environ, WORKBOOK_MODE="sim", WORKBOOK_CHECK_TIMEOUT=str(CHECK_BOUND),
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), MPLBACKEND="module://matplotlib_inline"
               ".backend_inline", PYTHONUNBUFFERED="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)  # workbook sets it from WORKBOOK_MODE
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
               "--ip=127.0.0.1", "--allow-root", f"--ServerApp.token={TOKEN}",
               f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={home / 'settings'}",
               f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly"]
    log = open(home / "server.log", "w")  # noqa: SIM115 (closed at teardown)
    proc = subprocess.Popen(command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            _get(f"{base}/api/status?token={TOKEN}")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail(f"JupyterLab did not start:\n{(home / 'server.log').read_text()}")
            time.sleep(0.25)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


class Lab:
    """One notebook open in JupyterLab, and what the browser's console said meanwhile."""

    opened = 0

    def __init__(self, browser, server: str, notebook: str):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console_errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.console_errors.append(f"page error: {exc}"))
        self.cells = nbformat.read(ROOT / "lessons" / notebook, as_version=4).cells
        # a workspace of its own, reset: JupyterLab would reopen the tabs of the last page
        Lab.opened += 1
        self.page.goto(f"{server}/lab/workspaces/test{Lab.opened}/tree/{notebook}"
                       f"?reset&token={TOKEN}")
        self.notebook = self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
        expect(self.cell(len(self.cells) - 1)).to_be_attached(timeout=60_000)
        self.wait_for_kernel(60)

    def _console(self, message) -> None:
        if message.type == "error":
            self.console_errors.append(f"console error: {message.text}")

    def close(self) -> None:
        self.page.close()

    # --- cells -----------------------------------------------------------------------------
    def cell(self, index: int):
        return self.notebook.locator(".jp-WindowedPanel-viewport > .jp-Cell").nth(index)

    def indices(self, role: str) -> list[int]:
        return [i for i, c in enumerate(self.cells)
                if c.metadata.get("workbook", {}).get("role") == role]

    def exercise_id(self, index: int) -> str:
        return self.cells[index].metadata["workbook"]["exercise_id"]

    def prompt(self, index: int) -> str:
        return self.cell(index).locator(".jp-InputPrompt").inner_text().strip()

    def output(self, index: int) -> str:
        return self.cell(index).locator(".jp-OutputArea").inner_text()

    def select(self, index: int) -> None:
        """Select a cell in command mode (a click on its prompt area)."""
        self.cell(index).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")

    def type_into(self, index: int, source: str) -> None:
        """Replace a code cell's text as a student would: select all, then type over it."""
        editor = self.cell(index).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.press("Delete")
        # insert_text types the text as one input event: the editor adds no auto-indent
        self.page.keyboard.insert_text(source)
        expect(editor).to_contain_text(source.splitlines()[-1].strip())

    def run_selected(self) -> None:
        self.page.keyboard.press("Shift+Enter")

    # --- menus and toolbar -----------------------------------------------------------------
    def menu(self, top: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
        self.page.locator(".lm-Menu-itemLabel", has_text=item).first.click()

    def stop_button(self):
        return self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) [data-command='notebook:interrupt-kernel']")

    # --- waiting ---------------------------------------------------------------------------
    def wait_for_kernel(self, seconds: float) -> None:
        """Wait until the status bar shows the kernel connected and idle (the toolbar's
        indicator also reads idle for a moment before the kernel has started, and cells
        run then are not sent to it)."""
        status = self.page.locator(".jp-StatusBar-Widget").get_by_role(
            "button", name=KERNEL_IDLE)
        expect(status).to_be_visible(timeout=seconds * 1000)

    def wait_until_run(self, indices, seconds: float) -> None:
        """Wait until every cell of ``indices`` shows an execution count ("[12]:")."""
        deadline = time.monotonic() + seconds
        for index in indices:
            remaining = max(1.0, deadline - time.monotonic())
            try:
                expect(self.cell(index).locator(".jp-InputPrompt")).to_have_text(
                    EXECUTED, timeout=remaining * 1000)
            except AssertionError as exc:
                raise AssertionError(f"cell {index} did not run; the page: "
                                     f"{self.screenshot()}\n{exc}") from None

    def screenshot(self) -> Path:
        path = Path(tempfile.mkdtemp(prefix="workbook-browser-")) / "page.png"
        self.page.screenshot(path=path)
        return path


@pytest.fixture
def open_lab(browser, server):
    opened = []

    def open_notebook(notebook: str) -> Lab:
        lab = Lab(browser, server, notebook)
        opened.append(lab)
        return lab

    yield open_notebook
    for lab in opened:
        lab.close()
    for kernel in _get(f"{server}/api/kernels?token={TOKEN}"):  # free the memory for the next
        request = urllib.request.Request(f"{server}/api/kernels/{kernel['id']}?token={TOKEN}",
                                         method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


def code_indices(lab: Lab) -> list[int]:
    return [i for i, c in enumerate(lab.cells) if c.cell_type == "code"]


@pytest.mark.parametrize("notebook", LESSONS)
def test_lesson_runs_top_to_bottom(open_lab, notebook):
    lab = open_lab(notebook)
    lab.menu("Run", "Run All Cells")
    lab.wait_until_run(code_indices(lab), NOTEBOOK_SECONDS)
    errors = [i for i in code_indices(lab)
              if lab.cell(i).locator("[data-mime-type='application/vnd.jupyter.stderr'], "
                                     ".jp-OutputArea-output .jp-RenderedText[data-mime-type="
                                     "'application/vnd.jupyter.error']").count()]
    assert not errors, f"cells raised: {[lab.output(i)[-600:] for i in errors]}"
    checks = lab.indices("check")
    assert checks, "no check cells found"
    for index in checks:
        exercise_id = lab.exercise_id(index)
        shown = lab.output(index)
        assert f"NOT IMPLEMENTED {exercise_id}" in " ".join(shown.split()), (
            f"check cell {index} ({exercise_id}) shows: {shown!r}")
    assert not lab.console_errors, lab.console_errors


def solution_source(exercise_id: str, old: str = "", new: str = "") -> str:
    from solution_cells import exercise_cell

    source = exercise_cell("02_reduction", exercise_id)
    if old:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


GPU_NOTICE = f"""import os
import time

from grader.exercise import gpu_hang_notice

os.environ["WORKBOOK_CHECK_TIMEOUT"] = "1"
try:
    with gpu_hang_notice("reduction.simple", "gpu"):
        time.sleep(2.5)
finally:
    os.environ["WORKBOOK_CHECK_TIMEOUT"] = "{CHECK_BOUND}"
"""
LEFT_THREADS = """

import threading

print("simulated threads left:",
      sum(type(t).__name__ == "BlockThread" and t.is_alive() for t in threading.enumerate()))"""


def test_typed_solution_passes_hang_is_bounded_and_stop_button_recovers(open_lab):
    lab = open_lab("02_reduction/reduction.ipynb")
    exercise = next(i for i in lab.indices("exercise") if lab.exercise_id(i) == "reduction.simple")
    check = exercise + 1
    assert check in lab.indices("check")
    lab.select(exercise)
    lab.menu("Run", "Run All Above Selected Cell")
    lab.wait_until_run([i for i in code_indices(lab) if i < exercise], NOTEBOOK_SECONDS)

    # a loop that never advances: the check stops at its time limit and says why
    lab.type_into(exercise, solution_source("reduction.simple", "        stride *= 2\n", ""))
    lab.run_selected()  # runs the exercise cell, moves to the check cell
    lab.wait_until_run([exercise], 60)
    lab.run_selected()
    started = time.monotonic()
    lab.wait_until_run([check], CHECK_BOUND + 60)
    seconds = time.monotonic() - started
    shown = lab.output(check)
    assert "TIMEOUT" in shown and f"did not finish case n=2, integers within {CHECK_BOUND} s" \
        in shown, shown
    assert re.search(r"waiting at cuda\.syncthreads\(\) at <cell In\[\d+\]> line 10", shown), shown
    assert "forgotten `stride *= 2`" in shown, shown
    assert seconds < CHECK_BOUND + 30, seconds

    # the same check again, stopped by the stop button before its time limit
    lab.select(check)
    lab.run_selected()
    expect(lab.cell(check).locator(".jp-InputPrompt")).to_have_text(
        RUNNING, timeout=10_000)
    time.sleep(1.5)  # the kernel's threads are looping by now
    pressed = time.monotonic()
    lab.stop_button().click()
    lab.wait_until_run([check], 30)
    stopped_in = time.monotonic() - pressed
    assert "KeyboardInterrupt" in lab.output(check), lab.output(check)
    assert stopped_in < 3, f"the stop button took {stopped_in:.1f} s"

    # the next cell runs normally; it shows what a check on a GPU prints when it is still
    # running at its bound (from a timer's thread, which must reach the cell's output)
    lab.type_into(exercise, GPU_NOTICE)
    lab.run_selected()
    lab.wait_until_run([exercise], 60)
    shown = " ".join(lab.output(exercise).split())
    assert "reduction.simple: the check is still running after 1 s" in shown, shown
    assert "Kernel > Restart Kernel" in shown, shown

    # the kernel is usable: the fixed cell and its check run normally, and no thread of the
    # stopped kernels is left
    lab.type_into(exercise, solution_source("reduction.simple") + LEFT_THREADS)
    lab.run_selected()
    lab.wait_until_run([exercise], 60)
    assert "simulated threads left: 0" in lab.output(exercise), lab.output(exercise)
    lab.run_selected()
    lab.wait_until_run([check], 120)
    shown = " ".join(lab.output(check).split())
    assert "PASSED reduction.simple" in shown, shown
    assert not lab.console_errors, lab.console_errors

