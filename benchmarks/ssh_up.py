"""``nbdist up`` to the first result on three simulated machines, against the same by hand.

    python benchmarks/ssh_up.py [--repeat 3]

Needs root, ``ip netns`` and Debian's openssh-server: the hosts are network namespaces with a
real sshd each (tests/sshhosts.py). Two ways to a first result, each in a fresh driver process
in the root namespace, timed from the start of that process's work (its imports excluded):

* ``nbdist up``: ``nbdist.cluster.ssh(head, workers, user, key)`` (connect, version check,
  token and TLS material, head then nodes, the driver attached as a thin driver), then one
  task's result.
* ``by hand``: what a user would type, the commands run one after another from a script:
  ``ssh HEAD nbdist start --head --host HEAD``, ``ssh WORKER nbdist start --address ...
  --token ... --host WORKER`` per worker, without TLS, then ``nbdist.init("nbdist://HEAD:6391")``
  and one task's result. It skips the version check, the TLS material and the parallel start.

Both stop what they started before the next run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sshhosts import Hosts, ssh_hosts  # noqa: E402

UP = textwrap.dedent("""
    import sys, time
    import nbdist, nbdist.cluster
    head, workers, key = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    t = time.perf_counter()
    cluster = nbdist.cluster.ssh(head=head, workers=workers, user="root", key=key,
                                 name="bench", progress=lambda host, what: None)
    @nbdist.remote
    def one():
        return 1
    assert nbdist.get(one.remote()) == 1
    print(time.perf_counter() - t)
    cluster.down(progress=lambda host, what: None)
""")

BY_HAND_DRIVER = textwrap.dedent("""
    import sys, nbdist
    nbdist.init(sys.argv[1])
    @nbdist.remote
    def one():
        return 1
    assert nbdist.get(one.remote()) == 1
""")


def _ssh(hosts: Hosts, address: str, command: str) -> str:
    done = subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
         "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
         "-i", str(hosts.key), "-l", hosts.user, address, command],
        capture_output=True, text=True, timeout=300, check=True)
    return done.stdout


def by_hand(hosts: Hosts) -> float:
    head = hosts[0].address
    t = time.perf_counter()
    out = _ssh(hosts, head, f"NBDIST_STATE_DIR=/tmp/nbdist-bench-0 nbdist start --head "
                            f"--host {head}")
    token = out.split("--token ", 1)[1].split()[0]
    for i, host in enumerate(hosts.hosts[1:], 1):
        _ssh(hosts, host.address, f"NBDIST_STATE_DIR=/tmp/nbdist-bench-{i} nbdist start "
                                  f"--address {head}:6390 --token {token} --host {host.address}")
    subprocess.run([sys.executable, "-c", BY_HAND_DRIVER, f"nbdist://{head}:6391"],
                   env=dict(os.environ, NBDIST_TOKEN=token), check=True, timeout=300)
    took = time.perf_counter() - t
    for i, host in enumerate(hosts):
        _ssh(hosts, host.address, f"NBDIST_STATE_DIR=/tmp/nbdist-bench-{i} nbdist stop; "
                                  f"rm -rf /tmp/nbdist-bench-{i}")
    return took


def up(hosts: Hosts) -> float:
    done = subprocess.run(
        [sys.executable, "-c", UP, hosts[0].address,
         ",".join(h.address for h in hosts.hosts[1:]), str(hosts.key)],
        capture_output=True, text=True, timeout=300, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NBDIST_STATE_DIR"] = str(Path(tmp) / "state")
        with ssh_hosts(3, Path(tmp)) as hosts:
            times: dict[str, list[float]] = {"nbdist up": [], "by hand": []}
            for _ in range(args.repeat):  # the two take turns
                times["nbdist up"].append(up(hosts))
                times["by hand"].append(by_hand(hosts))
    print("| to the first result, 3 hosts | median | runs |\n| --- | --- | --- |")
    for name, runs in times.items():
        print(f"| {name} | {statistics.median(runs):.1f} s | "
              f"{', '.join(f'{r:.1f}' for r in runs)} |")


if __name__ == "__main__":
    main()
