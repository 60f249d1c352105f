"""Overhead of the panel's comm bridge on a 10,000-task run (target: at most 15% slower).

Both variants run in this process on the same 2-CPU cluster, alternating, best of ``--rounds``.
"With" attaches the real bridge hub (event subscription, Model, sender thread taking a delta
every 100 ms) to a stand-in comm that JSON-encodes each message as ipykernel would, so
everything the kernel pays for except the iopub socket write is measured.

    python benchmarks/bridge_overhead.py [--tasks 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import nbdist
from nbdist.jupyter.bridge import Hub
from nbdist.jupyter.model import SCHEMA_VERSION


class EncodingComm:
    """Stands in for an ipykernel comm: encodes each message, counts bytes sent."""

    comm_id = "benchmark"

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0

    def send(self, data: Any) -> None:
        self.messages += 1
        self.bytes += len(json.dumps(data))

    def on_msg(self, callback: Any) -> None:
        pass

    def on_close(self, callback: Any) -> None:
        pass

    def close(self) -> None:
        pass


@nbdist.remote
def empty() -> None:
    return None


def run(n: int) -> float:
    t0 = time.perf_counter()
    nbdist.get([empty.remote() for _ in range(n)])
    return time.perf_counter() - t0


def run_with_bridge(n: int) -> tuple[float, EncodingComm]:
    hub, comm = Hub(), EncodingComm()
    hub.open(comm, {"content": {"data": {"schema": SCHEMA_VERSION}}})
    try:
        return run(n), comm
    finally:
        hub.flush()
        hub.close(comm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    nbdist.init(num_cpus=2)
    try:
        run(1_000)  # warm up: workers started, function shipped
        without, with_ = [], []
        for _ in range(args.rounds):
            without.append(run(args.tasks))
            elapsed, comm = run_with_bridge(args.tasks)
            with_.append(elapsed)
        base, bridged = min(without), min(with_)
        print(f"{args.tasks} tasks, best of {args.rounds}: without bridge {base:.3f} s "
              f"({args.tasks / base:,.0f} tasks/s), with bridge {bridged:.3f} s "
              f"({args.tasks / bridged:,.0f} tasks/s)")
        print(f"last bridged run sent {comm.messages} messages, {comm.bytes / 1e3:,.0f} kB")
        print(f"ratio with/without: {bridged / base:.3f} ({(bridged / base - 1) * 100:+.1f}%)")
    finally:
        nbdist.shutdown()


if __name__ == "__main__":
    main()
