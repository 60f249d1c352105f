"""Interrupting a kernel that runs ``trainer.fit()``: the cell ends with KeyboardInterrupt and
every worker process of the run is gone, through a real kernel and real workers. Until then,
each worker's output shows in the cell that called ``fit()``, prefixed with its rank."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_session import KernelSession
from polling import poll

pytestmark = pytest.mark.timeout(120)

SETUP = """
import os, pathlib, threading
from nbdist import train

def blocked_loop(config):
    print("hello from rank", train.get_context().get_world_rank(), flush=True)
    pathlib.Path(config["dir"], f"pid-{os.getpid()}").touch()
    train.report({"step": 0})
    threading.Event().wait()  # a training step that never ends
"""

FIT = """
trainer = train.DataParallelTrainer(
    blocked_loop, train_loop_config={"dir": %r},
    scaling_config=train.ScalingConfig(num_workers=2),
    run_config=train.RunConfig(storage_path=%r))
trainer.fit()
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _pids(folder: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in folder.glob("pid-*")]


def test_interrupting_fit_ends_the_run_and_kills_its_workers(
        kernel: KernelSession, tmp_path: Path) -> None:
    kernel.ok(SETUP)
    msg_id = kernel.submit(FIT % (str(tmp_path), str(tmp_path / "results")))
    pids = poll(lambda: len(_pids(tmp_path)) == 2 and _pids(tmp_path), timeout=60,
                what="both workers to start their training function")
    # Each worker's output reaches the cell that called fit(), prefixed with its rank.
    for rank in (0, 1):
        poll(lambda rank=rank: any(
            line.startswith(f"(rank {rank} pid=") and line.endswith(
                f"hello from rank {rank}") for line in kernel.text_for(msg_id).splitlines()),
             what=f"rank {rank}'s output, prefixed, in the fit cell")
    kernel.km.interrupt_kernel()
    reply = kernel.reply(msg_id)["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    poll(lambda: not any(_alive(p) for p in pids), what="the run's worker processes to end")
    assert kernel.ok("print(1 + 1)").strip() == "2"
