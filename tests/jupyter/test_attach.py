"""``%nbdist start --address``: a kernel attaches to a cluster started with ``nbdist start``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_session import KernelSession, start_kernel, stop_kernel

pytestmark = [pytest.mark.timeout(120)]

NBDIST = str(Path(sys.executable).parent / "nbdist")


@pytest.fixture
def standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The kernel inherits NBDIST_STATE_DIR, so it finds the token `nbdist start` wrote.
    monkeypatch.setenv("NBDIST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("NBDIST_TOKEN", raising=False)
    try:
        subprocess.run([NBDIST, "start", "--head", "--port", "0", "--num-cpus", "2"],
                       check=True, capture_output=True, timeout=60)
        status = subprocess.run([NBDIST, "status", "--json"], check=True, capture_output=True,
                                text=True, timeout=60)
        yield json.loads(status.stdout)["address"]
    finally:
        subprocess.run([NBDIST, "stop"], capture_output=True, timeout=60)


def test_kernel_attaches_runs_remote_cells_and_detaches(standalone: str) -> None:
    session: KernelSession = start_kernel()
    try:
        bad = session.execute("%load_ext nbdist\n%nbdist start --address 1.2.3 --num-cpus 2")[0]
        assert bad["status"] == "error" and "UsageError" in bad["ename"]
        out = session.ok(f"%nbdist start --address {standalone}")
        assert f"attached to the nbdist cluster at {standalone}" in out
        session.ok("%%remote\ndef where(x):\n    import nbdist\n"
                   "    print('running', x)\n"
                   "    return nbdist.get_runtime_context().get_node_id()\n")
        text = session.ok("import nbdist\nnode = nbdist.get(where.remote(1))\n"
                          "print('node', node, [n['NodeID'] for n in nbdist.nodes()])")
        assert "running 1" in text  # remote output reaches the cell
        line = [ln for ln in text.splitlines() if ln.startswith("node ")][0]
        node_id = line.split()[1]
        assert node_id in line.split(" ", 2)[2]
        session.ok("%nbdist stop")
        status = json.loads(subprocess.run(
            [NBDIST, "status", "--json"], check=True, capture_output=True, text=True,
            timeout=60, env=dict(os.environ)).stdout)
        # Detaching leaves the cluster running for others.
        assert [n["alive"] for n in status["nodes"]] == [True]
    finally:
        stop_kernel(session)
