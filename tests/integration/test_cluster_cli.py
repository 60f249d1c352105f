"""Clusters started with the ``nbdist`` command: start --head, start --address, status, stop,
and drivers attaching with ``init(address=...)``.

Each test gets its own state directory (NBDIST_STATE_DIR), so what it starts is found and
stopped by ``nbdist stop`` without touching anything else on the machine; the fixture stops
whatever is left even when the test fails.
"""

from __future__ import annotations

import glob
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from clusters import Cli, alive, shm_orphans, start_head
from polling import poll

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]

def test_head_node_join_status_attach_and_stop(cli: Cli) -> None:
    shm_before = set(glob.glob("/dev/shm/nbdist-*"))
    address = start_head(cli, "--num-cpus", "2", "--resources", '{"alpha": 1}')
    assert address.startswith("127.0.0.1:")  # loopback unless --host says otherwise
    joined = cli.run("start", "--address", address, "--num-cpus", "1",
                     "--resources", '{"beta": 2}')
    assert "joined the cluster" in joined.stdout

    info = cli.status("--address", address)
    assert info["version"] == 1 and len(info["nodes"]) == 2
    keys = {"node_id", "address", "hostname", "pid", "alive", "resources_total",
            "resources_free", "workers", "tasks", "actors", "objects", "object_store_used",
            "object_store_capacity"}
    for node in info["nodes"]:
        assert keys <= set(node) and node["alive"] and alive(node["pid"])
    totals = sorted((n["resources_total"]["CPU"], n["workers"]) for n in info["nodes"])
    assert totals == [(1.0, 1), (2.0, 2)]
    assert "beta" in info["nodes"][1]["resources_total"]
    text = cli.run("status").stdout
    assert "2 node(s) alive" in text

    driver = cli.python(f"""
        import nbdist
        info = nbdist.init(address={address!r})
        @nbdist.remote
        def where(x):
            return x * 2, nbdist.get_runtime_context().get_node_id()
        results = nbdist.get([where.remote(i) for i in range(6)])
        assert [r[0] for r in results] == [0, 2, 4, 6, 8, 10]
        nodes = nbdist.nodes()
        print(len(nodes), nbdist.cluster_resources()["CPU"], results[0][1] in
              {{n["NodeID"] for n in nodes}})
        nbdist.shutdown()
    """)
    assert driver.returncode == 0, driver.stderr
    assert driver.stdout.split() == ["2", "3.0", "True"]

    # A driver that leaves does not stop the cluster: a second one attaches with "auto".
    again = cli.python("""
        import nbdist
        nbdist.init(address="auto")
        print(nbdist.get(nbdist.put(41)) + 1)
    """)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "42"

    pids = cli.pids()
    # head, its node and its client server (thin drivers), and the second node
    assert len(pids) == 4 and all(alive(p) for p in pids)
    stopped = cli.run("stop").stdout
    assert "stopped the head" in stopped and "stopped the node" in stopped
    for pid in pids:
        assert not alive(pid)
    assert not list(cli.state.iterdir())
    assert not shm_orphans(set(glob.glob("/dev/shm/nbdist-*")) - shm_before)
    assert "nothing started" in cli.run("stop").stdout


def test_token_file_is_private_and_a_wrong_token_is_refused(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    (session,) = [p for p in cli.state.iterdir() if p.name.startswith("head-")]
    assert stat.S_IMODE(cli.state.stat().st_mode) == 0o700
    assert stat.S_IMODE((session / "token").stat().st_mode) == 0o600
    token = (session / "token").read_text().strip()
    assert len(token) == 64

    bad = "ab" * 32
    refused = cli.run("start", "--address", address, "--token", bad, ok=False)
    assert refused.returncode == 1
    assert "wrong cluster token" in refused.stderr
    refused = cli.run("status", "--address", address, ok=False, env={"NBDIST_TOKEN": bad})
    assert refused.returncode == 1 and "wrong cluster token" in refused.stderr
    driver = cli.python(f"import nbdist\nnbdist.init(address={address!r})",
                        env={"NBDIST_TOKEN": bad})
    assert driver.returncode != 0 and "wrong cluster token" in driver.stderr

    # Nothing was added, and the cluster still serves the right token.
    info = cli.status("--address", address)
    assert len(info["nodes"]) == 1
    ok = cli.run("start", "--address", address, "--token", token, "--num-cpus", "1")
    assert "joined" in ok.stdout
    assert len(cli.status()["nodes"]) == 2


def test_clear_errors(cli: Cli) -> None:
    nothing = cli.run("status", ok=False)
    assert nothing.returncode == 1 and "no running cluster" in nothing.stderr
    attach = cli.python("import nbdist\nnbdist.init(address='auto')")
    assert attach.returncode != 0 and "no running cluster" in attach.stderr
    unreachable = cli.run("start", "--address", "127.0.0.1:1", "--token", "ab" * 32, ok=False)
    assert unreachable.returncode == 1 and "Cannot reach" in unreachable.stderr
    bad_json = cli.run("start", "--head", "--resources", "{oops", ok=False)
    assert bad_json.returncode == 1 and "--resources must be a JSON object" in bad_json.stderr
    assert not list(cli.state.iterdir())  # nothing half-started is left behind
    address = start_head(cli, "--num-cpus", "1")
    both = cli.python(f"import nbdist\nnbdist.init(address={address!r}, num_cpus=4)")
    assert both.returncode != 0 and "do not pass num_cpus" in both.stderr
    assert "stopped the head" in cli.run("stop").stdout


def test_a_cluster_that_died_is_not_reported_as_stopped_again(cli: Cli) -> None:
    # The head and node of a first cluster are killed (a crash, a reboot); a new one starts at
    # the same address. Only the new one was running, so only it is named as stopped.
    shm_before = set(glob.glob("/dev/shm/nbdist-*"))
    address = start_head(cli, "--num-cpus", "1")
    dead = cli.pids()
    for pid in dead:
        os.kill(pid, signal.SIGKILL)
    poll(lambda: not any(alive(p) for p in dead), timeout=10, what="the killed daemons gone")
    port = address.rsplit(":", 1)[1]
    assert start_head(cli, "--num-cpus", "1", "--port", port) == address
    assert len(cli.status()["nodes"]) == 1  # the new cluster's token, not the dead one's
    stopped = cli.run("stop").stdout.splitlines()
    assert stopped.count(f"stopped the head of {address}") == 1, stopped
    assert (f"removed the files of a head of {address} whose processes had already exited"
            in stopped), stopped
    assert not list(cli.state.iterdir())
    assert not shm_orphans(set(glob.glob("/dev/shm/nbdist-*")) - shm_before)
    assert "nothing started" in cli.run("stop").stdout


def test_a_killed_drivers_warm_file_goes_with_its_connection(cli: Cli) -> None:
    # A driver attached to a running cluster dies with a warm file (store.write) in shared
    # memory: the node removes it when the driver's connection ends, not at its own exit. Warm
    # files serve the file store only, so this cluster runs without its arena.
    cli.env["NBDIST_ARENA_BYTES"] = "-1"
    address = start_head(cli, "--num-cpus", "1")
    code = textwrap.dedent(f"""
        import time, numpy as np, nbdist
        nbdist.init(address={address!r})
        ref = nbdist.put(np.zeros(4_000_000))
        print("PUT", flush=True)
        time.sleep(600)
    """)
    driver = subprocess.Popen([sys.executable, "-c", code], env=cli.env, text=True,
                              stdout=subprocess.PIPE)
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "PUT"
        pattern = f"/dev/shm/nbdist-*-warm{driver.pid}-*"
        deadline = time.monotonic() + 30
        while not glob.glob(pattern):
            assert time.monotonic() < deadline, "no warm file after a large put"
            time.sleep(0.02)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 10
        while glob.glob(pattern):
            assert time.monotonic() < deadline, glob.glob(pattern)
            time.sleep(0.02)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
