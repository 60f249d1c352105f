"""Clusters started with the `nbdist` command, for tests (see the `cli` fixture)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from polling import importable_env

from nbdist.cluster import lifetime

NBDIST = str(Path(sys.executable).parent / "nbdist")


class Cli:
    """Runs `nbdist` commands and driver scripts with a state directory of the test's own."""

    def __init__(self, state: Path) -> None:
        # Driver scripts and remote functions they define can use tests/polling.py.
        self.env = importable_env(dict(os.environ, NBDIST_STATE_DIR=str(state)))
        self.env.pop("NBDIST_TOKEN", None)
        self.state = state

    def run(self, *args: str, ok: bool = True, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([NBDIST, *args], capture_output=True, text=True, timeout=60,
                              env={**self.env, **(env or {})})
        if ok:
            assert done.returncode == 0, f"nbdist {' '.join(args)} failed:\n{done.stderr}"
        return done

    def status(self, *args: str) -> dict:
        return json.loads(self.run("status", "--json", *args).stdout)

    def python(self, code: str, env: dict[str, str] | None = None, timeout: float = 90,
               ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **(env or {})})

    def pids(self) -> set[int]:
        out = set()
        for path in self.state.glob("*/session.json"):
            out.update(json.loads(path.read_text())["pids"])
        return out

    def stop_all(self) -> None:
        pids = self.pids()
        subprocess.run([NBDIST, "stop"], env=self.env, capture_output=True, timeout=60)
        for pid in pids:  # never leave a daemon behind, even if `stop` is what broke
            if alive(pid):
                os.kill(pid, 9)


alive = lifetime.process_running


def start_head(cli: Cli, *args: str) -> str:
    out = cli.run("start", "--head", "--port", "0", *args).stdout
    address = cli.status()["address"]
    # The exact join command (with this machine's name when listening on all addresses).
    port = address.rsplit(":", 1)[1]
    assert re.search(rf"nbdist start --address \S+:{port} --token [0-9a-f]{{64}}"
                     rf"( --host ADDRESS)?\n", out), out
    return address


def shm_orphans(paths: set[str]) -> list[str]:
    """The shared-memory files of ``paths`` whose process (named after "nbdist-") is gone:
    files of clusters that other programs run meanwhile on this machine are not this test's."""
    out = []
    for path in sorted(paths):
        pid = path.rsplit("/", 1)[1].split("-")[1]
        if not (pid.isdigit() and alive(int(pid))):
            out.append(path)
    return out
