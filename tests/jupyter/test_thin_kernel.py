"""A notebook kernel as a thin driver (``nbdist.init("nbdist://HOST:PORT")``) of a cluster
started with `nbdist start --head` in a state folder the kernel does not know (so the token
comes from the environment, as on another machine): the magics work, and interrupting the
kernel cancels the interrupted cell's work on the cluster, as with a local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_session import KernelSession, start_kernel, stop_kernel
from polling import importable_env

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]

NBDIST = str(Path(sys.executable).parent / "nbdist")


@pytest.fixture
def remote_cluster(tmp_path: Path) -> Iterator[tuple[str, str]]:
    # The cluster's workers run the cell's functions, which use polling.py.
    env = importable_env(dict(os.environ, NBDIST_STATE_DIR=str(tmp_path / "state")))
    env.pop("NBDIST_TOKEN", None)
    try:
        out = subprocess.run([NBDIST, "start", "--head", "--port", "0", "--num-cpus", "2"],
                             env=env, capture_output=True, text=True, timeout=60, check=True)
        address = next(x for x in out.stdout.splitlines() if "nbdist://" in x).split('"')[1]
        (token,) = (tmp_path / "state").glob("head-*/token")
        yield address, token.read_text().strip()
    finally:
        pids = [p for s in (tmp_path / "state").glob("*/session.json")
                for p in json.loads(s.read_text())["pids"]]
        subprocess.run([NBDIST, "stop"], env=env, capture_output=True, timeout=60)
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


@pytest.fixture
def thin_kernel(remote_cluster: tuple[str, str]) -> Iterator[KernelSession]:
    address, token = remote_cluster
    session = start_kernel()
    try:
        session.ok(f"import os\nos.environ['NBDIST_TOKEN'] = {token!r}\n%load_ext nbdist\n"
                   f"import nbdist\nnbdist.init({address!r})")
        yield session
    finally:
        stop_kernel(session)


BLOCK = """%%remote --num-cpus 0.5
import os, time
from polling import until

def block(text, seconds):
    print(text, flush=True)
    time.sleep(seconds)
    return text

def gated(text, gate):
    until(lambda: os.path.exists(gate), timeout=90)
    return text
"""


def test_interrupting_a_thin_drivers_cell_cancels_its_work(thin_kernel: KernelSession,
                                                            tmp_path: Path) -> None:
    k = thin_kernel
    assert "True" in k.ok("from nbdist.driver import runtime\nprint(runtime.current().info"
                          "['thin'])")
    k.ok(BLOCK)
    gate = str(tmp_path / "gate")
    k.ok(f"keep = gated.remote('kept', {gate!r})  # runs until the end")
    cell = k.submit("nbdist.get([block.remote(f'held {i}', 300) for i in range(2)])")
    # Remote output reaches the cell that caused it, through the thin driver's connection.
    k.wait_for(lambda: k.text_for(cell).count("held") == 2, 60, "both tasks running")
    k.km.interrupt_kernel()
    reply = k.reply(cell)
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    out = k.ok("from polling import until\n"
               "until(lambda: nbdist.available_resources().get('CPU', 0) >= 1.5, timeout=60)\n"
               "cpus = nbdist.available_resources().get('CPU', 0)\n"
               f"open({gate!r}, 'w').close()\n"
               "print(cpus, nbdist.get(keep))")
    assert out.split() == ["1.5", "kept"]
    k.ok("%nbdist status")  # the magic asks the cluster through the thin driver, without error


def test_the_panel_shows_a_thin_drivers_tasks(remote_cluster: tuple[str, str]) -> None:
    """The panel's comm in a thin driver's kernel: the DAG of a cell's tasks, run on the
    cluster, reaches the panel's snapshot and deltas as it does with a local cluster."""
    from jupyter_client.manager import start_new_kernel
    from test_bridge import DAG, Panel, fold, poll

    from nbdist.jupyter.model import SCHEMA_VERSION

    address, token = remote_cluster
    km, kc = start_new_kernel(kernel_name="python3",
                              env=importable_env(dict(os.environ, NBDIST_TOKEN=token)))
    panel = Panel(km, kc)
    try:
        panel.run("import nbdist, nbdist.jupyter.bridge as b; hub = b.register()\n"
                  f"nbdist.init({address!r})")
        comm = panel.open_comm({"schema": SCHEMA_VERSION})
        first = poll(lambda: panel.comm_data(comm), 30, "the panel's first message")[0]
        assert first["type"] == "snapshot" and first["cluster"] is True
        panel.run(DAG)
        refs = set(panel.output("REFS").split())

        def dag_done() -> bool:
            tasks = fold(panel.comm_data(comm))["tasks"]
            ours = [t for t in tasks.values() if refs & set(t["returns"])]
            return len(ours) == 4 and all(t["state"] == "finished" for t in ours)

        poll(dag_done, 60, "deltas showing the cell's 4 tasks finished")
        assert poll(lambda: fold(panel.comm_data(comm))["nodes"], 30, "the cluster's node")
    finally:
        try:
            panel.run("nbdist.shutdown()", timeout=30)
        finally:
            panel.close()
            kc.stop_channels()
            km.shutdown_kernel(now=True)
