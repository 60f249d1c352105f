"""The comm bridge in a real kernel, seen from the client side as the JupyterLab panel sees it.

The test plays the panel: it sends ``comm_open`` to target "nbdist" on the shell channel and
reads ``comm_msg`` messages from iopub. A collector thread keeps every iopub message, because
deltas leave the kernel from a background thread with no particular parent request.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import polling
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from nbdist.jupyter.model import SCHEMA_VERSION

Msg = dict[str, Any]


class Panel:
    """A kernel client that can run cells and open "nbdist" comms."""

    def __init__(self, km: KernelManager, kc: BlockingKernelClient) -> None:
        self.km, self.kc = km, kc
        self._iopub: list[Msg] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop.is_set():
            try:
                # The channel itself, not kc.get_iopub_msg: that one would leave an asyncio
                # loop behind in this thread, which warns when collected.
                msg = self.kc.iopub_channel.get_msg(timeout=0.1)
            except queue.Empty:
                continue
            except Exception as exc:  # kept for the failure message: the reader must go on
                self.errors.append(repr(exc))
                continue
            with self._lock:
                self._iopub.append(msg)

    def run(self, code: str, timeout: float = 60) -> None:
        msg_id = self.kc.execute(code)

        def read() -> Msg | None:
            try:
                reply = self.kc.shell_channel.get_msg(timeout=0.1)
            except queue.Empty:
                return None
            return reply if reply["parent_header"].get("msg_id") == msg_id else None

        content = polling.poll(read, timeout=timeout, interval=0,
                               what=f"the execute_reply to {msg_id}")["content"]
        if content["status"] != "ok":
            pytest.fail(f"cell failed: {content.get('ename')}: {content.get('evalue')}")

    def output(self, marker: str, timeout: float = 30) -> str:
        """The rest of the first complete stdout line starting with ``marker``."""
        def find() -> str | None:
            # One print may arrive split over several stream messages: join them first.
            text = "".join(m["content"]["text"] for m in self.messages("stream")
                           if m["content"]["name"] == "stdout")
            for line in text.split("\n")[:-1]:
                if line.startswith(marker):
                    return line[len(marker):].strip() or None
            return None
        return poll(find, timeout, f"a stdout line starting with {marker!r} (reader errors: "
                    f"{self.errors!r})")

    def open_comm(self, data: Msg) -> str:
        comm_id = uuid.uuid4().hex
        self.send("comm_open", {"comm_id": comm_id, "target_name": "nbdist", "data": data})
        return comm_id

    def send(self, msg_type: str, content: Msg) -> None:
        self.kc.shell_channel.send(self.kc.session.msg(msg_type, content))

    def messages(self, msg_type: str) -> list[Msg]:
        with self._lock:
            return [m for m in self._iopub if m["msg_type"] == msg_type]

    def comm_data(self, comm_id: str) -> list[Msg]:
        return [m["content"]["data"] for m in self.messages("comm_msg")
                if m["content"]["comm_id"] == comm_id]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def poll(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    return polling.poll(predicate, timeout=timeout, what=what)


def fold(messages: list[Msg]) -> Msg:
    """What the panel would show: the last snapshot with every later delta applied."""
    state: Msg = {"tasks": {}, "groups": {}, "nodes": {}, "workers": {}}
    for data in messages:
        assert data["schema"] == SCHEMA_VERSION
        if data["type"] == "snapshot":
            state = {key: dict(data[key]) for key in state}
        elif data["type"] == "delta":
            for key in state:
                state[key].update(data[key])
            for tid in data["tasks_removed"]:
                state["tasks"].pop(tid, None)
    return state


@pytest.fixture(scope="module")
def panel() -> Iterator[Panel]:
    km, kc = start_new_kernel(kernel_name="python3", env=polling.importable_env())
    p = Panel(km, kc)
    try:
        p.run("import nbdist, nbdist.jupyter.bridge as b; hub = b.register()\n"
              "nbdist.init(num_cpus=2)")
        yield p
    finally:
        try:
            p.run("nbdist.shutdown()", timeout=20)
        finally:
            p.close()
            kc.stop_channels()
            km.shutdown_kernel(now=True)


DAG = """
@nbdist.remote
def one():
    return 1

@nbdist.remote
def add(a, b):
    return a + b

x, y = one.remote(), one.remote()
z = add.remote(x, y)
w = add.remote(z, x)
assert nbdist.get(w) == 3
print(f"REFS {x.hex()} {y.hex()} {z.hex()} {w.hex()}")
"""


def producer(tasks: Msg, ref: str) -> Msg:
    return next(t for t in tasks.values() if ref in t["returns"])


@pytest.mark.timeout(120)
def test_snapshot_then_deltas_show_the_dag(panel: Panel) -> None:
    comm = panel.open_comm({"schema": SCHEMA_VERSION})
    first = poll(lambda: panel.comm_data(comm), 20, "the first message")[0]
    assert first["type"] == "snapshot" and first["schema"] == SCHEMA_VERSION
    assert first["cluster"] is True  # the fixture ran nbdist.init()
    panel.run(DAG)
    x, y, z, w = panel.output("REFS").split()

    def dag_done() -> Msg | None:
        tasks = fold(panel.comm_data(comm))["tasks"]
        ours = [t for t in tasks.values() if {x, y, z, w} & set(t["returns"])]
        return tasks if len(ours) == 4 and all(t["state"] == "finished" for t in ours) else None

    tasks = poll(dag_done, 30, "deltas showing the 4 tasks finished")
    tx, ty, tz, tw = (producer(tasks, ref) for ref in (x, y, z, w))
    assert (tz["name"], tz["deps"], tz["dep_tasks"]) == ("add", [x, y], [tx["id"], ty["id"]])
    assert (tw["deps"], tw["dep_tasks"]) == ([z, x], [tz["id"], tx["id"]])
    assert tx["dep_tasks"] == [] and tx["worker"] and tx["node"]
    nodes = poll(lambda: fold(panel.comm_data(comm))["nodes"], 20, "a node")
    assert [n["capacity"] for n in nodes.values()] == [2.0]  # nbdist.init(num_cpus=2)
    workers = poll(lambda: fold(panel.comm_data(comm))["workers"], 20, "workers")
    spans = [span for w in workers.values() for span in w["spans"]]
    assert {tz["id"], tw["id"]} <= {span[0] for span in spans}  # the timeline's data
    kinds = [d["type"] for d in panel.comm_data(comm)]
    assert kinds[0] == "snapshot" and "delta" in kinds

    panel.send("comm_msg", {"comm_id": comm, "data": {"type": "request_snapshot"}})
    snap = poll(lambda: [d for d in panel.comm_data(comm)[1:] if d["type"] == "snapshot"],
                20, "a snapshot on request")[0]
    assert snap["tasks"][tz["id"]]["state"] == "finished"
    panel.send("comm_close", {"comm_id": comm, "data": {}})


@pytest.mark.timeout(60)
def test_one_subscription_for_all_comms_and_none_after_the_last_closes(panel: Panel) -> None:
    first = panel.open_comm({"schema": SCHEMA_VERSION})
    second = panel.open_comm({"schema": SCHEMA_VERSION})
    poll(lambda: panel.comm_data(first) and panel.comm_data(second), 20, "two snapshots")
    panel.run("r = nbdist.get(one.remote())")
    for comm in (first, second):
        poll(lambda c=comm: any(d["type"] == "delta" for d in panel.comm_data(c)), 20,
             f"a delta on comm {comm}")
    for comm in (first, second):
        panel.send("comm_close", {"comm_id": comm, "data": {}})
    panel.run("from polling import until\n"
              "until(lambda: not hub.subscribed, timeout=30)\n"
              "print(f'SUBSCRIBED {hub.subscribed}')")
    assert panel.output("SUBSCRIBED") == "False"


@pytest.mark.timeout(60)
def test_a_mismatched_schema_gets_an_error_and_a_close(panel: Panel) -> None:
    comm = panel.open_comm({"schema": SCHEMA_VERSION + 1})
    error = poll(lambda: panel.comm_data(comm), 20, "the error message")[0]
    assert error["type"] == "error" and error["schema"] == SCHEMA_VERSION
    assert f"schema {SCHEMA_VERSION + 1}" in error["message"]
    poll(lambda: [m for m in panel.messages("comm_close") if m["content"]["comm_id"] == comm],
         20, "the kernel closing the comm")
