"""Kernels that are interrupted, SIGKILLed, or started from the nbdist kernelspec.

Each test has a kernel of its own: these are the tests that break kernels on purpose.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from kernel_session import KernelSession, start_kernel, stop_kernel

from nbdist import lifetime

pytestmark = pytest.mark.timeout(120)

BLOCK = """%%remote --num-cpus 0.5
import time

def block(text, seconds):
    print(text, flush=True)
    time.sleep(seconds)
    return text
"""


def test_interrupt_cancels_the_cells_tasks_and_frees_their_cpus(kernel: KernelSession) -> None:
    k = kernel
    k.ok(BLOCK)
    k.ok("import nbdist\nkeep = block.remote('kept', 2)")
    cell = k.submit("nbdist.get([block.remote(f'held {i}', 300) for i in range(2)])")
    k.wait_for(lambda: k.text_for(cell).count("held") == 2, 20, "both tasks running")
    k.km.interrupt_kernel()
    reply = k.reply(cell)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    # The interrupted cell's tasks give back their CPUs; the other cell's task keeps running.
    out = k.ok("import time\ndeadline = time.monotonic() + 10\n"
               "while nbdist.available_resources().get('CPU', 0) < 1.5 "
               "and time.monotonic() < deadline:\n    time.sleep(0.02)\n"
               "print(nbdist.available_resources().get('CPU', 0), nbdist.get(keep))")
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
        session.wait_for(lambda: not any(_alive(p) for p in cluster), 5,
                         f"cluster processes {sorted(p for p in cluster if _alive(p))} to exit")
        session.wait_for(lambda: not set(glob.glob("/dev/shm/nbdist-*")) - shm_before, 5,
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
        session.wait_for(lambda: not any(_alive(p) for p in cluster), 5,
                         f"cluster processes {sorted(p for p in cluster if _alive(p))} to exit")
        session.wait_for(lambda: not set(glob.glob("/dev/shm/nbdist-*")) - shm_before, 5,
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
