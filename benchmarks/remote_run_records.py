"""What a dataset run executed in a remote task sends to the driver (issue 29).

A task runs ``range(rows).map_batches(f).repartition(4).count()`` with ``f`` sleeping
``--sleep`` s per block; before returning, it reads its worker's run-record relay: the
``RUNS`` messages and records sent so far. The driver then counts the data run records it
got (the last ones come with the task's result).

    python benchmarks/remote_run_records.py [--rows 3200] [--blocks 16] [--sleep 0.25]
"""

from __future__ import annotations

import argparse
import time

import nbdist
from nbdist import data as rd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=3200)
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--sleep", type=float, default=0.25)
    args = parser.parse_args()
    nbdist.init(num_cpus=2)
    try:
        def slow(batch: dict) -> dict:
            time.sleep(args.sleep)  # a block's work
            return batch

        @nbdist.remote(num_cpus=0)
        def execute() -> tuple[int, float, int, int]:
            from nbdist.driver import runtime

            rd.DataContext.get_current().enable_progress_bars = False
            t = time.monotonic()
            n = rd.range(args.rows, override_num_blocks=args.blocks).map_batches(
                slow).repartition(4).count()
            wall = time.monotonic() - t
            relay = runtime.current().worker.relay  # type: ignore[attr-defined]
            return n, wall, relay.sent_messages, relay.sent_records

        n, wall, messages, records = nbdist.get(execute.remote())
        got = [e for e in nbdist.events.recent() if e.kind == "run_update"
               and e.library == "data"]
        print(f"rows {n}, run {wall:.2f} s: the worker had sent {messages} RUNS messages with "
              f"{records} records; the driver got {len(got)} run records")
    finally:
        nbdist.shutdown()


if __name__ == "__main__":
    main()
