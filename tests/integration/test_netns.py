"""Nodes on networks of their own: the head runs in one Linux network namespace, a joining
node in another, each with its own address on a veth pair between them. Everything that
passes between the two nodes crosses that link, which a test can take down, and the node in
the second namespace can only be reached at the address it announces.

Needs root and ``ip netns`` (the ``net`` fixture tries to make a namespace and skips the
module's tests with the reason when it cannot, e.g. in an unprivileged CI container).

Both namespaces share the machine's file system, /dev/shm and boot id, so nbdist sees one
machine: the daemons run with NBDIST_SAME_HOST_LINKS=0 so that objects move as bytes through
the link (as between machines) instead of as hard links in /dev/shm.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from clusters import NBDIST, Cli, alive, start_head
from polling import until

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]

# Each namespace has its own routing table, holding only this subnet: no clash with the host's.
SUBNET = "10.213.57"
HEAD_IP, FAR_IP, NOBODY_IP = f"{SUBNET}.1", f"{SUBNET}.2", f"{SUBNET}.3"
FAR = '{"far": 1}'


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check:
        assert done.returncode == 0, f"ip {' '.join(args)} failed: {done.stderr}"
    return done


@dataclass
class Net:
    """Two namespaces, ``a`` (the head's) and ``b``, linked by veth ``veth_a`` <-> ``veth_b``."""

    a: str
    b: str
    veth_a: str
    veth_b: str

    def link(self, up: bool) -> None:
        """Take node B's end of the link down, or bring it back up."""
        _ip("-n", self.b, "link", "set", self.veth_b, "up" if up else "down")

    def b_bytes(self) -> tuple[int, int]:
        """(received, sent) bytes counted by node B's end of the link."""
        stats = json.loads(_ip("-n", self.b, "-j", "-s", "link", "show", "dev", self.veth_b
                               ).stdout)[0]["stats64"]
        return stats["rx"]["bytes"], stats["tx"]["bytes"]

    def netns_of(self, pid: int) -> str | None:
        """The name of the namespace (of these two) process ``pid`` runs in."""
        inode = os.stat(f"/proc/{pid}/ns/net").st_ino
        for name in (self.a, self.b):
            if os.stat(f"/run/netns/{name}").st_ino == inode:
                return name
        return None


def _kill_all_in(ns: str) -> bool:
    """SIGKILL every process in namespace ``ns``; True once none is left."""
    pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return not pids


def _remove(net: Net) -> None:
    """Kill whatever runs in the namespaces, delete them and any veth end left outside."""
    for ns in (net.a, net.b):
        if not os.path.exists(f"/run/netns/{ns}"):
            continue
        until(lambda ns=ns: _kill_all_in(ns), timeout=10, interval=0.1)  # then delete anyway
        _ip("netns", "del", ns, check=False)
    for veth in (net.veth_a, net.veth_b):  # only there if setting up stopped half-way
        if _ip("link", "show", veth, check=False).returncode == 0:
            _ip("link", "del", veth, check=False)


def _can_connect(net: Net) -> str:
    """Connect from namespace A to a listener in namespace B; "" if it works, else why not."""
    listener = subprocess.Popen(
        ["ip", "netns", "exec", net.b, sys.executable, "-c", textwrap.dedent(f"""
            import socket
            s = socket.create_server(({FAR_IP!r}, 0))
            s.settimeout(20)
            print(s.getsockname()[1], flush=True)
            c, _ = s.accept()
            c.sendall(b"pong")
        """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert listener.stdout is not None
        port = listener.stdout.readline().strip()
        if not port:
            return f"the listener in {net.b} did not start: {listener.communicate()[1]}"
        client = subprocess.run(
            ["ip", "netns", "exec", net.a, sys.executable, "-c", textwrap.dedent(f"""
                import socket
                with socket.create_connection(({FAR_IP!r}, {port}), timeout=10) as c:
                    print(c.recv(4).decode())
            """)], capture_output=True, text=True, timeout=30)
        if client.stdout.strip() != "pong":
            return f"{net.a} cannot reach {FAR_IP}:{port}: {client.stderr.strip()}"
        return ""
    finally:
        listener.kill()
        listener.wait()


@pytest.fixture
def net() -> Iterator[Net]:
    """Namespaces ``nbd<pid>a`` (address HEAD_IP) and ``nbd<pid>b`` (FAR_IP), joined by a veth
    pair and checked to reach one another; removed afterwards, with everything in them."""
    if not sys.platform.startswith("linux"):
        pytest.skip("network namespaces are a Linux feature")
    if os.geteuid() != 0:
        pytest.skip("network namespace tests need root (ip netns add)")
    if shutil.which("ip") is None:
        pytest.skip("network namespace tests need the `ip` command (iproute2)")
    tag = f"nbd{os.getpid()}"
    net = Net(a=f"{tag}a", b=f"{tag}b", veth_a=f"{tag}va", veth_b=f"{tag}vb")
    _remove(net)  # leftovers of an earlier run that had this pid
    made = _ip("netns", "add", net.a, check=False)
    if made.returncode != 0:
        _remove(net)
        pytest.skip(f"cannot create a network namespace here (ip netns add: "
                    f"{made.stderr.strip() or made.returncode})")
    try:
        _ip("netns", "add", net.b)
        _ip("link", "add", net.veth_a, "type", "veth", "peer", "name", net.veth_b)
        for ns, veth, addr in ((net.a, net.veth_a, HEAD_IP), (net.b, net.veth_b, FAR_IP)):
            _ip("link", "set", veth, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", veth)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", veth, "up")
        why = _can_connect(net)
        assert not why, why
        yield net
    finally:
        _remove(net)


class NsCli(Cli):
    """`nbdist` commands and driver scripts run inside network namespace ``ns``."""

    def __init__(self, cli: Cli, ns: str) -> None:
        self.env = cli.env  # one environment and state directory for the whole test
        self.state = cli.state
        self.ns = ns

    def run(self, *args: str, ok: bool = True, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["ip", "netns", "exec", self.ns, NBDIST, *args],
                              capture_output=True, text=True, timeout=60,
                              env={**self.env, **(env or {})})
        if ok:
            assert done.returncode == 0, f"nbdist {' '.join(args)} in {self.ns} failed:\n" \
                                         f"{done.stderr}"
        return done

    def python(self, code: str, env: dict[str, str] | None = None, timeout: float = 120,
               ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.ns, sys.executable, "-c",
                               textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env={**self.env, **(env or {})})


@dataclass
class Far:
    """A head (and its node) in namespace A, and a node with {"far": 1} in namespace B."""

    net: Net
    in_a: NsCli
    in_b: NsCli
    address: str  # the head's, HEAD_IP:port
    token: str
    head_node: dict
    far_node: dict
    tmp: Path  # for files tasks and drivers signal each other with (shared by the namespaces)


@pytest.fixture
def far(net: Net, cli: Cli, tmp_path: Path) -> Iterator[Far]:
    cli.env["NBDIST_SAME_HOST_LINKS"] = "0"  # bytes through the link, as between machines
    cli.env["NBDIST_INFEASIBLE_WAIT_S"] = "2"  # how long a task waits for a node with its needs
    in_a, in_b = NsCli(cli, net.a), NsCli(cli, net.b)
    try:
        address = start_head(in_a, "--host", HEAD_IP, "--num-cpus", "1")
        assert address.startswith(f"{HEAD_IP}:"), address
        (session,) = [p for p in cli.state.iterdir() if p.name.startswith("head-")]
        token = (session / "token").read_text().strip()
        joined = in_b.run("start", "--address", address, "--token", token, "--host", FAR_IP,
                          "--num-cpus", "1", "--resources", FAR)
        assert "joined the cluster" in joined.stdout
        head_node, far_node = in_a.status()["nodes"]
        signals = tmp_path / "signals"
        signals.mkdir()
        yield Far(net, in_a, in_b, address, token, head_node, far_node, signals)
    finally:
        cli.stop_all()  # a clean stop first (it removes shared memory); `net` kills the rest


# --------------------------------------------------------------------------- the cluster


def test_each_node_runs_in_its_namespace_at_its_own_address(far: Far) -> None:
    info = far.in_a.status()
    assert info["address"] == far.address
    head_node, far_node = info["nodes"]
    assert head_node["alive"] and far_node["alive"]
    assert head_node["address"].startswith(f"{HEAD_IP}:"), head_node
    assert far_node["address"].startswith(f"{FAR_IP}:"), far_node
    assert far_node["resources_total"]["far"] == 1.0
    assert "far" not in head_node["resources_total"]
    # The processes really are where the addresses say: the head, its node and its client
    # server in A, the joined node in B.
    pids = far.in_a.pids()
    assert len(pids) == 4 and all(alive(p) for p in pids)
    where = {pid: far.net.netns_of(pid) for pid in pids}
    assert where[far_node["pid"]] == far.net.b, where
    assert all(ns == far.net.a for pid, ns in where.items() if pid != far_node["pid"]), where
    # From namespace B the head is reached over the link, with the token as on another machine.
    seen = far.in_b.run("status", "--address", far.address, "--token", far.token).stdout
    assert "2 node(s) alive" in seen and f" {FAR_IP}:" in seen and f" {HEAD_IP}:" in seen


def test_tasks_and_objects_cross_the_link(far: Far) -> None:
    rx0, tx0 = far.net.b_bytes()
    driver = far.in_a.python(f"""
        import hashlib
        import numpy as np
        import nbdist

        nbdist.init(address={far.address!r})
        here = nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={FAR})
        def where(x):
            print("far task got", x, flush=True)
            return x * 2, nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={FAR})
        def make(seed):  # 20 MB made on the far node
            return np.random.default_rng(seed).integers(0, 2**63, 2_500_000, dtype=np.uint64)

        @nbdist.remote(resources={FAR})
        def digest(arr, box):  # one 20 MB put passed directly and inside a container
            inner = nbdist.get(box[0])
            return (hashlib.sha256(arr).hexdigest(), hashlib.sha256(inner).hexdigest(),
                    nbdist.get_runtime_context().get_node_id())

        value, node = nbdist.get(where.remote(21), timeout=60)
        assert value == 42 and node == {far.far_node["node_id"]!r} and node != here, (node, here)

        out = nbdist.get(make.remote(11), timeout=60)
        want = np.random.default_rng(11).integers(0, 2**63, 2_500_000, dtype=np.uint64)
        assert out.dtype == want.dtype and out.tobytes() == want.tobytes()

        data = np.frombuffer(np.random.default_rng(12).bytes(20_000_000), dtype=np.uint8)
        ref = nbdist.put(data)
        direct, inner, node = nbdist.get(digest.remote(ref, [ref]), timeout=60)
        assert direct == inner == hashlib.sha256(data).hexdigest(), (direct, inner)
        assert node == {far.far_node["node_id"]!r}
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout
    # Output of the task in the other namespace reaches the driver, with the task's name.
    assert "(where pid=" in driver.stdout and "far task got 21" in driver.stdout
    # The 20 MB put went to B and the 20 MB result came back through the link.
    rx1, tx1 = far.net.b_bytes()
    assert rx1 - rx0 >= 20_000_000 and tx1 - tx0 >= 20_000_000, (rx1 - rx0, tx1 - tx0)


# --------------------------------------------------------------------------- faults


def test_a_killed_node_has_its_forwarded_task_run_again_on_the_head(far: Far) -> None:
    # One CPU per node: `hold` takes the head's, so `victim` is forwarded to node B; B is
    # killed while `victim` runs there, and the head's node runs it again (docs/reliability.md).
    log, release = far.tmp / "victim.log", far.tmp / "release"
    driver = far.in_a.python(f"""
        import os, signal
        import nbdist
        from polling import poll, until

        nbdist.init(address={far.address!r})
        here = nbdist.get_runtime_context().get_node_id()

        def released():
            assert until(lambda: os.path.exists({str(release)!r}), timeout=60), "release"

        @nbdist.remote
        def hold():
            open({str(far.tmp / "held")!r}, "w").close()
            released()
            return nbdist.get_runtime_context().get_node_id()

        @nbdist.remote
        def victim():
            node = nbdist.get_runtime_context().get_node_id()
            with open({str(log)!r}, "a") as f:
                f.write(node + "\\n")
            released()
            return node

        h = hold.remote()
        poll(lambda: os.path.exists({str(far.tmp / "held")!r}), timeout=60,
             what="hold to start")
        v = victim.remote()
        poll(lambda: os.path.exists({str(log)!r}), timeout=60, what="victim to start")
        os.kill({far.far_node["pid"]}, signal.SIGKILL)
        open({str(release)!r}, "w").close()
        held_on, ran_on = nbdist.get([h, v], timeout=60)
        assert held_on == here and ran_on == here, (held_on, ran_on, here)
        print("OK")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "OK" in driver.stdout
    started = log.read_text().split()
    assert started == [far.far_node["node_id"], far.head_node["node_id"]], started
    assert not alive(far.far_node["pid"])
    alive_now = {n["node_id"]: n["alive"] for n in far.in_a.status()["nodes"]}
    assert alive_now == {far.head_node["node_id"]: True, far.far_node["node_id"]: False}


def test_a_killed_node_fails_the_task_only_it_could_run(far: Far) -> None:
    started = far.tmp / "started"
    driver = far.in_a.python(f"""
        import os, signal, time
        import nbdist
        from nbdist.exceptions import GetTimeoutError
        from polling import poll

        nbdist.init(address={far.address!r})

        @nbdist.remote(resources={FAR})
        def stuck():
            open({str(started)!r}, "w").close()
            time.sleep(60)

        ref = stuck.remote()
        poll(lambda: os.path.exists({str(started)!r}), timeout=60, what="the task to start")
        os.kill({far.far_node["pid"]}, signal.SIGKILL)
        try:
            nbdist.get(ref, timeout=15)  # 7x the infeasible wait the cluster runs with
        except GetTimeoutError:
            print("OUTCOME: hung")
        except Exception as exc:
            print("OUTCOME: failed:", type(exc).__name__, exc)
        else:
            print("OUTCOME: ran")
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    # No node has {"far": 1} any more: the retry fails, naming what it needs.
    assert "OUTCOME: failed:" in driver.stdout and "far" in driver.stdout, driver.stdout


def test_a_task_survives_the_link_going_down_and_up(far: Far) -> None:
    started, go = far.tmp / "started", far.tmp / "go"
    driver = far.in_a.python(f"""
        import os, subprocess
        import nbdist
        from nbdist.exceptions import GetTimeoutError
        from polling import poll, until

        nbdist.init(address={far.address!r})
        here = nbdist.get_runtime_context().get_node_id()

        def link(state):
            subprocess.run(["ip", "-n", {far.net.b!r}, "link", "set", {far.net.veth_b!r},
                            state], check=True)

        @nbdist.remote(resources={FAR})
        def ping():
            return nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={FAR})
        def slow():
            open({str(started)!r}, "w").close()
            until(lambda: os.path.exists({str(go)!r}), timeout=90)
            return 7, nbdist.get_runtime_context().get_node_id()

        @nbdist.remote
        def local():
            return nbdist.get_runtime_context().get_node_id()

        # Both nodes have spoken to each other before the link goes (see the test below for
        # a link that is down when a node first connects).
        far_id = nbdist.get(ping.remote(), timeout=60)
        ref = slow.remote()
        poll(lambda: os.path.exists({str(started)!r}), timeout=60, what="slow to start")
        link("down")
        try:
            open({str(go)!r}, "w").close()  # the task ends on B; its result cannot get here
            try:
                nbdist.get(ref, timeout=3)
                raise AssertionError("a result crossed a link that is down")
            except GetTimeoutError:
                print("not ready while the link is down")
            # The head's node goes on working meanwhile.
            assert nbdist.get(local.remote(), timeout=30) == here
        finally:
            link("up")
        value, node = nbdist.get(ref, timeout=120)  # TCP retransmits once the link is back
        assert (value, node) == (7, far_id), (value, node, far_id)
        assert nbdist.get(ping.remote(), timeout=60) == far_id
        print("OK")
    """, timeout=170)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "not ready while the link is down" in driver.stdout and "OK" in driver.stdout
    assert all(n["alive"] for n in far.in_a.status()["nodes"])


def test_a_connection_refused_once_does_not_cut_two_nodes_apart_for_good(far: Far) -> None:
    # For a while B may not open connections to the head's node (a routing rule in B refuses
    # them); the head's node can still connect to B, and B keeps its connection to the head.
    # B first connects to the head's node when it has something to tell it about the task
    # forwarded to it (its start, its result): that fails, once.
    port = far.head_node["address"].rsplit(":", 1)[1]
    add = ["ip", "-n", far.net.b, "rule", "add", "ipproto", "tcp", "dport", port, "prohibit"]
    delete = [*add[:4], "del", *add[5:]]
    started, go = far.tmp / "started", far.tmp / "go"
    driver = far.in_a.python(f"""
        import json, os, subprocess
        import nbdist
        from polling import poll, until

        nbdist.init(address={far.address!r})

        def wait_for(what, check):
            poll(check, timeout=60, interval=0.05, what=what)

        def far_free():
            out = subprocess.run([{NBDIST!r}, "status", "--json"], capture_output=True,
                                 text=True, check=True).stdout
            return json.loads(out)["nodes"][1]["resources_free"].get("far")

        @nbdist.remote(resources={FAR})
        def task():
            open({str(started)!r}, "w").close()
            assert until(lambda: os.path.exists({str(go)!r}), timeout=60), "go"
            return nbdist.get_runtime_context().get_node_id()

        subprocess.run({add!r}, check=True)
        try:
            first = task.remote()
            wait_for("the task to start on B", lambda: os.path.exists({str(started)!r}))
            wait_for("B to report it busy", lambda: far_free() == 0.0)
            open({str(go)!r}, "w").close()
            # B reports itself idle after it has tried to send the task's result.
            wait_for("B to report it idle", lambda: far_free() == 1.0)
        finally:
            subprocess.run({delete!r}, check=True)
        second = task.remote()
        ready, _ = nbdist.wait([first, second], num_returns=2, timeout=15)
        for label, ref in (("first:", first), ("second:", second)):
            if ref not in ready:
                print(label, "hung")
                continue
            try:
                print(label, "ran on", nbdist.get(ref))
            except Exception as exc:
                print(label, "failed:", type(exc).__name__, exc)
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    # The first task's result may be lost with the connection, but its driver must not wait
    # for it forever; and once B can connect again, new work on B must come back.
    assert "first: hung" not in driver.stdout, driver.stdout
    assert f"second: ran on {far.far_node['node_id']}" in driver.stdout, driver.stdout


# --------------------------------------------------------------------------- joining


def test_a_node_in_another_namespace_with_a_wrong_token_or_address_is_refused(far: Far
                                                                              ) -> None:
    sessions = sorted(p.name for p in far.in_a.state.iterdir())
    common = ("--host", FAR_IP, "--num-cpus", "1")
    refused = far.in_b.run("start", "--address", far.address, "--token", "ab" * 32, *common,
                           ok=False)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "wrong cluster token" in refused.stderr, refused.stderr
    # Nothing listens at NOBODY_IP (no host answers for it on the link).
    port = far.address.rsplit(":", 1)[1]
    nobody = far.in_b.run("start", "--address", f"{NOBODY_IP}:{port}", "--token", far.token,
                          *common, ok=False)
    assert nobody.returncode == 1 and "Cannot reach" in nobody.stderr, nobody.stderr
    # Nothing was added or left half-started, and the cluster still serves the right token.
    assert sorted(p.name for p in far.in_a.state.iterdir()) == sessions
    info = far.in_b.status("--address", far.address, "--token", far.token)
    assert [n["alive"] for n in info["nodes"]] == [True, True]


def test_a_node_joining_from_another_machine_without_host_is_refused_with_the_way_out(
        far: Far) -> None:
    # Without --host a node listens on loopback only, where the head's node cannot reach it:
    # it must not join (and look alive while nothing reaches it); the message names the
    # address of this machine on the route to the head.
    sessions = sorted(p.name for p in far.in_a.state.iterdir())
    joined = far.in_b.run("start", "--address", far.address, "--token", far.token,
                          "--num-cpus", "1", ok=False)
    assert joined.returncode == 1, joined.stdout + joined.stderr
    assert f"--host {FAR_IP}" in joined.stderr, joined.stderr
    assert sorted(p.name for p in far.in_a.state.iterdir()) == sessions
    assert len(far.in_a.status()["nodes"]) == 2
    # With the suggested --host it joins and is reachable.
    far.in_b.run("start", "--address", far.address, "--token", far.token, "--host", FAR_IP,
                 "--num-cpus", "1", "--resources", '{"lonely": 1}')
    lonely = far.in_a.status()["nodes"][2]
    driver = far.in_a.python(f"""
        import nbdist

        nbdist.init(address={far.address!r})

        @nbdist.remote(resources={{"lonely": 1}})
        def where():
            return nbdist.get_runtime_context().get_node_id()

        print("ran on", nbdist.get(where.remote(), timeout=60))
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert f"ran on {lonely['node_id']}" in driver.stdout, (lonely["address"], driver.stdout)
