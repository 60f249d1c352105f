"""The `ray stop` / `ray status` spellings scripts use, through the real ``nbdist`` command:
``stop --force`` / ``-f``, ``--grace-period`` / ``-g``, ``-v``; ``status --address``, ``-v``
and the ``--redis_password`` Ray scripts still pass."""

from __future__ import annotations

import glob

import pytest
from clusters import Cli, alive, shm_orphans, start_head

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


def test_stop_force_kills_at_once_and_leaves_nothing(cli: Cli) -> None:
    shm_before = set(glob.glob("/dev/shm/nbdist-*"))
    start_head(cli, "--num-cpus", "1")
    pids = cli.pids()
    assert pids and all(alive(p) for p in pids)
    out = cli.run("stop", "--force", "-v").stdout
    assert "killed the head" in out, out
    for pid in pids:
        assert str(pid) in out and not alive(pid)
    assert not list(cli.state.iterdir())
    assert not shm_orphans(set(glob.glob("/dev/shm/nbdist-*")) - shm_before)



def test_stop_short_force_and_grace_period(cli: Cli) -> None:
    start_head(cli, "--num-cpus", "1")
    pids = cli.pids()
    out = cli.run("stop", "-g", "0").stdout
    assert "stopped the head" in out
    assert not any(alive(p) for p in pids)
    start_head(cli, "--num-cpus", "1")
    pids = cli.pids()
    out = cli.run("stop", "-f", "--grace-period", "3").stdout
    assert "killed the head" in out
    assert not any(alive(p) for p in pids)
    bad = cli.run("stop", "--grace-period", "-1", ok=False)
    assert bad.returncode != 0 and "--grace-period" in bad.stderr


def test_status_spellings(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    text = cli.run("status", "--address", address, "-v",
                   "--redis_password", "5241590000000000").stdout
    assert "1 node(s) alive" in text and "tasks 0" in text, text
    assert "pid" in cli.run("status", "--verbose").stdout
