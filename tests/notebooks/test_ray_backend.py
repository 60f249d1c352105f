"""The notebook experience on the Ray backend, through one real kernel that starts one local
Ray with ``%nbdist start --backend ray`` (Ray's start is most of this module's time).

- The tasks notebook's cells run in it, in order, after that start, and show what they show on
  nbdist's engine: results, the ObjectRef display, step-through magics that say Ray has no
  step mode and let the notebook go on, the nested task's print in its cell, the caught remote
  error. The sections in ``DROPPED`` only time work the cells before them already ran
  (parallel sleepers, 10,000 tiny tasks, a get in a loop): on Ray they took a quarter of the run
  and nothing here is asserted about them (tests/notebooks/test_teaching_notebooks.py runs the
  whole notebook on nbdist's engine, tests/conformance/test_conformance_concurrency.py checks
  parallel sleepers on Ray). One cell is added in their place: a get of more refs than a get
  reports progress steps for, so the sliced get the 10,000-task section went through still
  runs on Ray.
- Then: a remote error shows as the user's type with the cell's line; an interrupt cancels the
  interrupted cell's tasks (their CPUs come back, another cell's task keeps running); a
  SIGKILLed kernel leaves no Ray process behind. That last check covers a kernel that ends
  politely too: whatever nbdist's own shutdown does, the session's guard ends what is left
  once the kernel is gone, and that guard is what the SIGKILL leaves to act alone.

Ray is a test dependency: without it these tests fail (the start raises the error that says
how to install it), they are not skipped.
"""

from __future__ import annotations

import os
import queue
import re
import signal
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from jupyter_client import KernelManager
from outputs import find
from polling import assert_ray_session_gone, importable_env, poll

from nbdist.backends.ray.guard import session_pids

pytestmark = pytest.mark.timeout(420)

NOTEBOOKS = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks")
START = "%nbdist start --num-cpus 2"
SESSION_RE = re.compile(r"\(session (/\S+)\)")


def _wait_gone(session_dir: str) -> None:
    assert_ray_session_gone(session_dir, "the kernel")


DROPPED = ("## Tasks that wait together", "## 100,000 tiny tasks", "## `get` in a loop")
SLICED_GET = ("quotients = nbdist.get([divide.remote(i, 1) for i in range(100)])\n"
              "print('sliced get in order:', quotients == [float(i) for i in range(100)])")


def _without_sections(nb: Any, headings: tuple[str, ...]) -> Any:
    """``nb`` without its ``## `` sections whose headings start with one of ``headings``."""
    kept, dropping, found = [], False, set()
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            dropping = cell.source.startswith(headings)
            found.update(h for h in headings if cell.source.startswith(h))
        if not dropping:
            kept.append(cell)
    assert found == set(headings), f"no section {set(headings) - found} in the notebook"
    nb.cells = kept
    return nb


def _notebook_cells() -> list[str]:
    """The tasks notebook's code cells to run after the module's start, ``SLICED_GET`` last."""
    nb = _without_sections(nbformat.read(os.path.join(NOTEBOOKS, "02-tasks.ipynb"),
                                         as_version=4), DROPPED)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[0].strip() == f"%load_ext nbdist\n{START}", code[0]  # what the fixture ran
    return [*code[1:], SLICED_GET]


def test_01_tasks_runs_on_ray(ray_kernel) -> None:
    k, _, started = ray_kernel
    assert "nbdist on Ray: started a local Ray" in started
    cells = [k.cell(code) for code in _notebook_cells()]
    find(cells, r"chain: sum 36 in [\d.]+ s")
    find(cells, r"tree:  sum 36 in [\d.]+ s")
    find(cells, 'class="nbdist-ref"')
    find(cells, r"result: 42")
    find(cells, r"\(tree_sum pid=\d+\) sum of \[1, 2, 3, 4, 5, 6, 7, 8\] = 36")
    find(cells, r"caught a ZeroDivisionError from the task: division by zero")
    find(cells, "Here the tasks run as they are submitted")
    find(cells, "stepped tree sum: 36")
    find(cells, "sliced get in order: True")


class Kernel:
    """A kernel driven through jupyter_client; iopub messages collected by parent id."""

    def __init__(self) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=importable_env())
        self.client = self.km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.iopub: list[dict[str, Any]] = []

    def _drain(self) -> None:
        while True:
            try:
                self.iopub.append(self.client.get_iopub_msg(timeout=0.05))
            except queue.Empty:
                return

    def messages(self, msg_id: str) -> list[dict[str, Any]]:
        self._drain()
        return [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id]

    def text(self, msg_id: str) -> str:
        return "".join(m["content"]["text"] for m in self.messages(msg_id)
                       if m["msg_type"] == "stream")

    def reply(self, msg_id: str, timeout: float = 180) -> dict[str, Any]:
        def answer() -> dict[str, Any] | None:
            try:
                msg = self.client.get_shell_msg(timeout=1)
            except queue.Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return dict(msg["content"])
            return None  # a stale reply: read on

        return poll(answer, timeout=timeout, interval=0, what=f"the reply to {msg_id}")

    def run(self, code: str, timeout: float = 180) -> tuple[dict[str, Any], str]:
        msg_id = self.client.execute(code)
        return self.reply(msg_id, timeout), msg_id

    def ok(self, code: str, timeout: float = 180) -> str:
        content, msg_id = self.run(code, timeout)
        assert content["status"] == "ok", content
        self.wait_for(lambda: any(m["msg_type"] == "status" and
                                  m["content"]["execution_state"] == "idle"
                                  for m in self.messages(msg_id)), 30, "idle")
        return self.text(msg_id)

    def cell(self, code: str) -> str:
        """Run ``code`` as a notebook cell: its stdout, then its results (HTML where there is
        some), as nbclient would have saved them; an error fails the test with its traceback."""
        content, msg_id = self.run(code)
        assert content["status"] == "ok", "\n".join(content.get("traceback", [])) or content
        self.wait_for(lambda: any(m["msg_type"] == "status" and
                                  m["content"]["execution_state"] == "idle"
                                  for m in self.messages(msg_id)), 30, "idle")
        parts = []
        for m in self.messages(msg_id):
            if m["msg_type"] == "stream":
                parts.append(m["content"]["text"])
            elif m["msg_type"] in ("execute_result", "display_data"):
                data = m["content"]["data"]
                parts.append(data.get("text/html") or data.get("text/plain", ""))
        return "".join(parts)

    def wait_for(self, predicate: Any, timeout: float, what: str) -> Any:
        return poll(predicate, timeout=timeout, interval=0.05, what=what)

    def close(self) -> None:
        self.client.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def ray_kernel() -> Iterator[tuple[Kernel, str, str]]:
    """The kernel, its Ray session's folder, and what the start printed."""
    k = Kernel()
    session = None
    try:
        out = k.ok(f"%load_ext nbdist\n{START.replace('start', 'start --backend ray')}\n"
                   "import nbdist")
        session = SESSION_RE.search(out)
        assert session is not None, out
        yield k, os.path.realpath(session[1]), out
    finally:
        k.close()
        if session is not None:
            _wait_gone(os.path.realpath(session[1]))


BLOCK = """%%remote --num-cpus 0.5
import time

def block(text, seconds):
    print(text, flush=True)
    time.sleep(seconds)
    return text

def fails(x):
    y = x + 1
    raise ValueError(f'bad value {y}')
"""


def test_remote_error_shows_the_users_type_and_the_cells_line(ray_kernel) -> None:
    k, _, _ = ray_kernel
    content, _ = k.run(BLOCK)
    assert content["status"] == "ok"
    define = content["execution_count"]
    content, call = k.run("nbdist.get(fails.remote(1))")
    assert content["status"] == "error"
    # What the frontend shows: the kernel's error message of that cell.
    [error] = k.wait_for(lambda: [m["content"] for m in k.messages(call)
                                  if m["msg_type"] == "error"], 30, "the error message")
    assert error["ename"] == "ValueError" and error["evalue"] == "bad value 2"
    text = "\n".join(error["traceback"])
    assert f"Cell In[{define}], line 10, in fails" in text
    assert "raise ValueError(f'bad value {y}')" in text


def test_interrupt_cancels_the_cells_tasks(ray_kernel) -> None:
    k, _, _ = ray_kernel
    k.ok("keep = block.remote('kept', 5)")
    cell = k.client.execute("nbdist.get([block.remote(f'held {i}', 300) for i in range(2)])")
    k.wait_for(lambda: k.text(cell).count("held") == 2, 120, "both tasks running, printing")
    k.km.interrupt_kernel()
    content = k.reply(cell)
    assert content["status"] == "error" and content["ename"] == "KeyboardInterrupt"
    out = k.ok("from polling import until\n"
               "until(lambda: nbdist.available_resources().get('CPU', 0) >= 1.5, timeout=60)\n"
               "print(nbdist.available_resources().get('CPU', 0), nbdist.get(keep))")
    assert out.split()[-1] == "kept"
    assert float(out.split()[0]) >= 1.5


def test_sigkilled_kernel_leaves_no_ray_process(ray_kernel) -> None:
    k, session_dir, _ = ray_kernel
    assert session_pids(session_dir, {os.getpid()}), "no process of the Ray session found"
    os.kill(k.km.provisioner.process.pid, signal.SIGKILL)  # type: ignore[union-attr]
    _wait_gone(session_dir)
