"""``%nbdist up`` / ``%nbdist status`` / ``%nbdist down`` in a real kernel, on three simulated
machines (network namespaces with a real sshd each, tests/sshhosts.py); one of them is powered
off while the cluster runs. The shell and Python forms are in
tests/integration/test_ssh_cluster.py."""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from kernel_session import KernelSession, stop_kernel
from polling import importable_env, until
from sshhosts import Hosts, ssh_hosts

pytestmark = [pytest.mark.timeout(300), pytest.mark.nbdist_only]


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    with ssh_hosts(3, tmp_path / "hosts") as made:
        yield made


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelSession]:
    """A kernel with nbdist's extension loaded and no cluster, with a state directory of its
    own (where `%nbdist up` keeps the cluster's token and TLS files)."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=importable_env(dict(os.environ, NBDIST_STATE_DIR=str(
        tmp_path / "state"))))
    try:
        session = KernelSession(km)
    except BaseException:
        km.shutdown_kernel(now=True)
        raise
    try:
        session.ok("%load_ext nbdist\nimport nbdist")
        yield session
    finally:
        stop_kernel(session)


def _html(kernel: KernelSession, msg_id: str) -> str:
    return "".join(m["content"]["data"].get("text/html", "")
                   for m in kernel.messages_for(msg_id) if m["msg_type"] == "display_data")


def test_up_status_with_a_host_powered_off_and_down_from_cells(
        hosts: Hosts, kernel: KernelSession, tmp_path: Path) -> None:
    file = tmp_path / "lab.yaml"
    file.write_text(textwrap.dedent(f"""\
        cluster_name: k{os.getpid()}
        provider: {{type: local, head_ip: {hosts[0].address},
                   worker_ips: [{hosts[1].address}, {hosts[2].address}]}}
        auth: {{ssh_user: {hosts.user}, ssh_private_key: {hosts.key}}}
        nbdist: {{resources: {{{hosts[2].address}: {{third: 1}}}}}}
        """))
    out = kernel.ok(f"%nbdist up {file}", timeout=240)
    for host in hosts:  # the cell shows each host's steps
        for step in ("connecting", "checking", "starting", "joined"):
            assert re.search(rf"^\s*{re.escape(host.address)}\s+{step}", out, re.M), out
    assert "is up" in out and "attached" in out, out
    third = kernel.ok(textwrap.dedent("""\
        @nbdist.remote
        def where():
            return nbdist.get_runtime_context().get_node_id()

        @nbdist.remote(resources={"third": 1})
        def on_third():
            return nbdist.get_runtime_context().get_node_id()

        third = nbdist.get(on_third.remote(), timeout=120)
        print(third)
        """), timeout=180).strip()
    _, status = kernel.execute("%nbdist status")
    assert _html(kernel, status).count("<td>alive</td>") == 3
    hosts[2].power_off()
    kernel.ok(textwrap.dedent("""\
        from polling import poll
        poll(lambda: not [n for n in nbdist.nodes() if n["NodeID"] == third][0]["Alive"],
             timeout=120, what="the powered-off host's node to be dead")
        """), timeout=180)
    _, status = kernel.execute("%nbdist status")
    html = _html(kernel, status)
    assert html.count("<td>dead</td>") == 1 and html.count("<td>alive</td>") == 2, html
    # The cluster goes on with the two others.
    ran = kernel.ok("print(sorted(set(nbdist.get([where.remote() for _ in range(6)], "
                    "timeout=120))))", timeout=180)
    assert third not in ran and "[" in ran, ran
    reply, down = kernel.execute("%nbdist down", timeout=180)
    assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
    assert f"{hosts[2].address}: SSH failed" in reply["evalue"], reply["evalue"]
    assert hosts[0].address not in reply["evalue"].split("The other hosts")[0]
    assert until(lambda: not hosts[0].pids() and not hosts[1].pids(), timeout=30), \
        [h.process_lines() for h in hosts]


def test_a_cluster_brought_up_from_a_kernel_ends_when_the_kernel_is_killed(
        hosts: Hosts, kernel: KernelSession, tmp_path: Path) -> None:
    name = f"kk{os.getpid()}"
    file = tmp_path / "lab.yaml"
    file.write_text(textwrap.dedent(f"""\
        cluster_name: {name}
        provider: {{type: local, head_ip: {hosts[0].address}, worker_ips: [{hosts[1].address}]}}
        auth: {{ssh_user: {hosts.user}, ssh_private_key: {hosts.key}}}
        """))
    kernel.ok(f"%nbdist up {file}", timeout=240)
    assert hosts[0].pids() and hosts[1].pids()
    kernel.km.shutdown_kernel(now=True)  # SIGKILL: no cell and no atexit handler runs
    assert until(lambda: not hosts[0].pids() and not hosts[1].pids(), timeout=60), \
        [h.process_lines() for h in hosts]
    assert not list(Path(f"/tmp/nbdist-{os.getuid()}").glob(f"up-{name}-*"))
