"""Kernels that are interrupted, SIGKILLed, or started from the nbdist kernelspec.

Each test has a kernel of its own: these are the tests that break kernels on purpose.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from kernel_session import KernelSession, start_kernel, stop_kernel

from nbdist.cluster import lifetime

pytestmark = pytest.mark.timeout(120)

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


def test_interrupt_cancels_the_cells_tasks_and_frees_their_cpus(
        kernel: KernelSession, tmp_path: Path) -> None:
    k = kernel
    k.ok(BLOCK)
    gate = str(tmp_path / "gate")
    k.ok(f"import nbdist\nkeep = gated.remote('kept', {gate!r})  # runs until the end")
    cell = k.submit("nbdist.get([block.remote(f'held {i}', 300) for i in range(2)])")
    k.wait_for(lambda: k.text_for(cell).count("held") == 2, 20, "both tasks running")
    k.km.interrupt_kernel()
    reply = k.reply(cell)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    # The interrupted cell's tasks give back their CPUs; the other cell's task keeps running.
    out = k.ok("from polling import until\n"
               "until(lambda: nbdist.available_resources().get('CPU', 0) >= 1.5, timeout=30)\n"
               "cpus = nbdist.available_resources().get('CPU', 0)\n"
               f"open({gate!r}, 'w').close()\n"
               "print(cpus, nbdist.get(keep))")
    assert out.split() == ["1.5", "kept"]


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue  # exited while we looked
        fields = text.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


_alive = lifetime.process_running


def test_sigkilled_kernel_leaves_no_process_or_shared_memory() -> None:
    shm_before = set(glob.glob("/dev/shm/nbdist-*"))
    session = start_kernel()
    try:
        session.ok("%load_ext nbdist\n%nbdist start --num-cpus 2")
        session.ok("%%remote\ndef make(n):\n    return bytes(n)\n")
        session.ok("import nbdist\nbig = nbdist.put(bytes(4_000_000))\n"
                   "made = make.remote(4_000_000)\nlen(nbdist.get(made))")
        assert set(glob.glob("/dev/shm/nbdist-*")) - shm_before, "no shared-memory object made"
        kernel_pid = session.km.provisioner.process.pid  # type: ignore[union-attr]
        cluster = _descendants(kernel_pid)
        assert len(cluster) >= 3, "expected head, node daemon and workers under the kernel"
        os.kill(kernel_pid, signal.SIGKILL)
        session.wait_for(lambda: not any(_alive(p) for p in cluster), 30,
                         f"cluster processes {sorted(p for p in cluster if _alive(p))} to exit")
        session.wait_for(lambda: not set(glob.glob("/dev/shm/nbdist-*")) - shm_before, 30,
                         "the cluster's /dev/shm files to be removed")
    finally:
        stop_kernel(session)


def test_kernel_restart_ends_the_cluster_and_the_notebook_runs_again() -> None:
    shm_before = set(glob.glob("/dev/shm/nbdist-*"))
    session = start_kernel()
    try:
        setup = ["%load_ext nbdist\n%nbdist start --num-cpus 2",
                 "%%remote\ndef make(n):\n    return bytes(n)\n"]
        work = ("import nbdist\nbig = nbdist.put(bytes(4_000_000))\n"
                "print(len(nbdist.get(make.remote(3_000_000))))")
        for cell in setup:
            session.ok(cell)
        assert session.ok(work).strip() == "3000000"
        old_kernel = session.km.provisioner.process.pid  # type: ignore[union-attr]
        cluster = _descendants(old_kernel)
        assert len(cluster) >= 3, "expected head, node daemon and workers under the kernel"
        session.km.restart_kernel(now=False)  # a graceful restart, as the Restart button
        session.wait_for(lambda: not any(_alive(p) for p in cluster), 30,
                         f"cluster processes {sorted(p for p in cluster if _alive(p))} to exit")
        session.wait_for(lambda: not set(glob.glob("/dev/shm/nbdist-*")) - shm_before, 30,
                         "the cluster's /dev/shm files to be removed")
        # Running the same cells again works on the restarted kernel.
        session.wait_for_ready(timeout=60)
        for cell in setup:
            session.ok(cell)
        assert session.ok(work).strip() == "3000000"
    finally:
        stop_kernel(session)


def test_kernelspec_loads_the_extension_at_start(tmp_path: Path) -> None:
    # Through the command a user runs: `nbdist install-kernel --name ... --prefix ...`.
    cli = Path(sys.executable).parent / "nbdist"
    done = subprocess.run([str(cli), "install-kernel", "--name", "nbdist-test",
                           "--prefix", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "nbdist-test"
    assert str(spec_dir) in done.stdout
    assert Path(spec_dir, "kernel.json").exists()
    ksm = KernelSpecManager(kernel_dirs=[str(Path(spec_dir).parent)])
    assert ksm.get_kernel_spec("nbdist-test").display_name == "Python 3 (nbdist)"
    km = KernelManager(kernel_name="nbdist-test", kernel_spec_manager=ksm)
    km.start_kernel()
    session = None
    try:
        session = KernelSession(km)
        out = session.ok("%%remote --num-cpus 1\ndef double(x):\n    return 2 * x\n")
        assert out == ""
        assert session.ok("import nbdist\nprint(nbdist.get(double.remote(21)))").strip() == "42"
    finally:
        if session is not None:
            stop_kernel(session)
        else:
            km.shutdown_kernel(now=True)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_interrupting_a_blocked_get_shows_one_line_under_the_cells_own_frames(
        kernel: KernelSession) -> None:
    k = kernel
    k.ok(BLOCK)
    code = ("def collect():\n"
            "    return nbdist.get([block.remote(f'held {i}', 300) for i in range(2)])\n"
            "collect()")
    cell = k.submit(code)
    k.wait_for(lambda: k.text_for(cell).count("held") == 2, 20, "both tasks running")
    k.km.interrupt_kernel()
    reply = k.reply(cell)["content"]
    k.wait_idle(cell, 30)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    [error] = [m["content"] for m in k.messages_for(cell) if m["msg_type"] == "error"]
    lines = _ANSI.sub("", "\n".join(error["traceback"])).splitlines()
    assert lines[-1] == ("KeyboardInterrupt: nbdist.get() was interrupted; cancelled 2 "
                         "unfinished tasks this cell submitted.")
    text = "\n".join(lines)
    assert "in collect" in text and "return nbdist.get([block.remote" in text
    assert "/nbdist/" not in text and "select" not in text  # no engine frame


def _installed_kernel(tmp_path: Path) -> KernelSession:
    from nbdist.jupyter import kernelspec

    kernels = Path(kernelspec.install("nbdist-test", prefix=str(tmp_path))).parent
    km = KernelManager(kernel_name="nbdist-test",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel()
    try:
        return KernelSession(km)
    except BaseException:
        km.shutdown_kernel(now=True)
        raise


def _panel_load_code() -> str:
    # What the JupyterLab panel runs in the kernel when it binds to a notebook.
    source = (Path(__file__).parents[2] / "labextension" / "src" / "connection.ts").read_text()
    match = re.search(r'^const LOAD_CODE = "(.*)";$', source, re.MULTILINE)
    assert match is not None, "LOAD_CODE not found in connection.ts"
    return match.group(1)


@pytest.mark.parametrize("loaded_by", ["panel", "kernelspec"])
def test_load_ext_after_the_panel_or_the_kernelspec_loaded_nbdist_is_silent(
        loaded_by: str, tmp_path: Path) -> None:
    session = _installed_kernel(tmp_path) if loaded_by == "kernelspec" else start_kernel()
    try:
        if loaded_by == "panel":
            msg_id = session.client.execute(_panel_load_code(), silent=True,
                                            store_history=False)
            assert session.reply(msg_id)["content"]["status"] == "ok"
            session.wait_idle(msg_id, 30)
        content, msg_id = session.execute("%load_ext nbdist")
        assert content["status"] == "ok"
        assert session.text_for(msg_id) == "" and session.text_for(msg_id, "stderr") == ""
        assert "nbdist cluster started" in session.ok("%nbdist start --num-cpus 1")
        session.ok("%nbdist stop")
    finally:
        stop_kernel(session)
