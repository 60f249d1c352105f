"""How fast interrupting a kernel ends a training run: a real kernel, a real 2-worker run.

    .venv/bin/python benchmarks/train_interrupt.py [--rounds 5] [--backend torch|none]

The kernel (jupyter_client, the venv's ``python3`` kernelspec) loads nbdist and runs a
``fit()`` whose training function blocks for ever after its first report. Once both workers
have written their pid, the benchmark interrupts the kernel (SIGINT, as JupyterLab's stop
button does) and times, from the interrupt:

    reply     the fit cell's execute_reply (KeyboardInterrupt) reaching the client
    gone      every worker process of the run gone (no longer in /proc, or a zombie)

Rounds alternate in one kernel and one cluster, as a user interrupting and rerunning a cell.
``--backend torch`` runs a ``TorchTrainer`` (workers blocked after gloo's set-up), ``none``
a ``DataParallelTrainer`` (no framework).
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager

SETUP = """
import os, pathlib, threading
import nbdist
from nbdist import train
nbdist.init(num_cpus=2)

def blocked(config):
    train.report({"step": 0})
    pathlib.Path(config["dir"], f"pid-{os.getpid()}").touch()
    threading.Event().wait()
"""

FIT = """
trainer = {cls}(blocked, train_loop_config={{"dir": {folder!r}}},
                scaling_config=train.ScalingConfig(num_workers=2),
                run_config=train.RunConfig(storage_path={storage!r}))
trainer.fit()
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def reply_of(client: Any, msg_id: str, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = client.get_shell_msg(timeout=0.05)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") == msg_id:
            return dict(msg["content"])
    raise TimeoutError(f"no reply within {timeout} s")


def one_round(km: KernelManager, client: Any, cls: str, storage: str) -> tuple[float, float]:
    folder = tempfile.mkdtemp(prefix="interrupt-")
    msg_id = client.execute(FIT.format(cls=cls, folder=folder, storage=storage))
    end = time.monotonic() + 120
    pids: list[int] = []
    while len(pids) < 2:
        if time.monotonic() > end:
            raise TimeoutError("the workers did not start within 120 s")
        pids = [int(p.name.split("-")[1]) for p in Path(folder).glob("pid-*")]
        time.sleep(0.005)
    start = time.monotonic()
    km.interrupt_kernel()
    content = reply_of(client, msg_id, 60)
    reply_s = time.monotonic() - start
    if content.get("ename") != "KeyboardInterrupt":
        raise RuntimeError(f"the cell did not end with KeyboardInterrupt: {content}")
    while any(alive(p) for p in pids):
        if time.monotonic() - start > 60:
            raise RuntimeError(f"workers {pids} still alive 60 s after the interrupt")
        time.sleep(0.002)
    return reply_s, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", choices=("torch", "none"), default="torch")
    args = parser.parse_args()
    cls = "train.torch.TorchTrainer" if args.backend == "torch" else "train.DataParallelTrainer"
    setup = SETUP + ("import nbdist.train.torch\n" if args.backend == "torch" else "")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, cores: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.1f}, trainer: {cls}", flush=True)
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        msg_id = client.execute(setup)
        content = reply_of(client, msg_id, 120)
        if content["status"] != "ok":
            raise RuntimeError(f"set-up failed: {content}")
        with tempfile.TemporaryDirectory(prefix="interrupt-runs-") as storage:
            replies, gones = [], []
            for i in range(args.rounds):
                reply_s, gone_s = one_round(km, client, cls, storage)
                replies.append(reply_s)
                gones.append(gone_s)
                print(f"round {i + 1}: reply {reply_s * 1000:.0f} ms, workers gone "
                      f"{gone_s * 1000:.0f} ms", flush=True)
        print(f"median: reply {statistics.median(replies) * 1000:.0f} ms, workers gone "
              f"{statistics.median(gones) * 1000:.0f} ms; slowest gone "
              f"{max(gones) * 1000:.0f} ms")
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
