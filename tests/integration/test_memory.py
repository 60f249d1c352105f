"""Memory pressure: a store smaller than the live objects spills to disk and reads back
bit-exact; a put that cannot fit even after spilling raises ObjectStoreFullError; spill files go
away with the cluster."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from polling import importable_env

import nbdist
from nbdist.exceptions import ObjectStoreFullError

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only, pytest.mark.usefixtures(
    "no_cluster")]

MiB = 1 << 20


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


@nbdist.remote
def make(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**62, n, dtype=np.int64)


@nbdist.remote
def digest(a: np.ndarray) -> str:
    return hashlib.sha256(a.tobytes()).hexdigest()


def _spill_files(spill: Path) -> list[Path]:
    return [p for p in spill.glob("nbdist-spill-*/*")]


def _node() -> dict:
    return nbdist.nodes()[0]


def test_three_times_the_store_in_live_objects_reads_back_bit_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait_until) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    nbdist.init(num_cpus=2, object_store_memory=48 * MiB)
    rng = np.random.default_rng(1)
    puts = [rng.integers(0, 2**62, MiB, dtype=np.int64) for _ in range(12)]  # 8 MiB each
    expected = {}
    refs = []
    for a in puts:
        ref = nbdist.put(a)
        refs.append(ref)
        expected[ref.hex()] = _digest(a)
    del puts
    made = [make.remote(100 + i, MiB) for i in range(6)]  # 8 MiB results, written by workers
    for i, ref in enumerate(made):
        expected[ref.hex()] = _digest(np.random.default_rng(100 + i).integers(
            0, 2**62, MiB, dtype=np.int64))
    refs += made
    assert len(refs) * 8 * MiB >= 3 * 48 * MiB
    # Spilled objects come back for tasks (as arguments) and for the driver.
    assert nbdist.get([digest.remote(r) for r in refs]) == [expected[r.hex()] for r in refs]
    for ref in refs:
        assert _digest(nbdist.get(ref)) == expected[ref.hex()]
    assert _spill_files(tmp_path), "the store must have spilled to disk"
    node = wait_until(lambda: _node()["ObjectStoreSpilled"] > 0 and _node(),
                      what="the node to report what it spilled")
    assert node["ObjectStoreUsed"] <= 48 * MiB
    del ref, refs, made
    wait_until(lambda: not _spill_files(tmp_path), what="spill files of freed objects removed")
    nbdist.shutdown()
    assert not list(tmp_path.glob("nbdist-spill-*")), "the spill folder goes with the node"


def test_a_put_that_cannot_fit_even_after_spilling_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    monkeypatch.setenv("NBDIST_SPILL_MAX_BYTES", str(16 * MiB + 4096))
    nbdist.init(num_cpus=1, object_store_memory=32 * MiB)
    kept = []
    with pytest.raises(ObjectStoreFullError, match="spilling cannot make room"):
        for i in range(10):  # 32 MiB in memory + 16 MiB on disk hold 5 at most
            kept.append(nbdist.put(np.full(MiB, i, dtype=np.int64)))
    assert 4 <= len(kept) <= 6
    # A task whose result cannot be stored fails with the same error; its worker survives.
    with pytest.raises(ObjectStoreFullError):
        nbdist.get(make.remote(5, MiB))
    assert nbdist.get(digest.remote(np.arange(10))) == _digest(np.arange(10))
    for i, ref in enumerate(kept):
        assert (nbdist.get(ref) == i).all()
    del kept, ref
    # With room again, puts work.
    assert nbdist.get(nbdist.put(np.ones(MiB))).sum() == MiB
    with pytest.raises(ObjectStoreFullError, match="larger than the whole object store"):
        nbdist.put(np.ones(5 * MiB))


QUEUE_SCRIPT = """
import gc, json, sys, threading, time
import nbdist
from nbdist.driver import api
from polling import poll_settled

def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

nbdist.init(num_cpus=2)
pids = {"driver": 0, "head": api._local.cluster.procs[0].pid, "node": api._local.cluster.node_pid}

@nbdist.remote
def tiny(i):
    return i

nbdist.get(tiny.remote(0))
import os
pids["driver"] = os.getpid()
before = {k: rss(p) for k, p in pids.items()}
peak = dict(before)
done = threading.Event()

def sample():
    while not done.is_set():
        for k, p in pids.items():
            peak[k] = max(peak[k], rss(p))
        time.sleep(0.05)  # deliberate sleep: the sampling period of the peak

threading.Thread(target=sample, daemon=True).start()
refs = [tiny.remote(i) for i in range(N)]
assert sum(nbdist.get(refs)) == N * (N - 1) // 2
del refs
gc.collect()
# What the tasks held is given back in the background: measure once every RSS has settled.
settled = poll_settled(lambda: [rss(p) for p in pids.values()], tolerance=1 << 20, quiet=1.0,
                       timeout=60, what="the RSS of the driver, head and node")
done.set()
after = dict(zip(pids, settled))
print(json.dumps({"before": before, "peak": peak, "after": after}))
nbdist.shutdown()
"""


@pytest.mark.timeout(300)
def test_many_queued_tasks_keep_head_and_node_memory_bounded() -> None:
    # 100,000 tasks queued at once by one driver: the head is never on a task's path (its
    # memory does not move), and what the node daemon and the driver hold for the tasks is
    # given back when they are done and the refs dropped (python benchmarks/queue_memory.py
    # gives the figures).
    n = 100_000
    done = subprocess.run([sys.executable, "-c", f"N = {n}\n" + QUEUE_SCRIPT],
                          capture_output=True, text=True, timeout=280, env=importable_env())
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    before, peak, after = figures["before"], figures["peak"], figures["after"]
    assert peak["head"] - before["head"] < 8 * MiB, figures
    # Per queued task the node and the driver hold well under 2 KiB at the peak ...
    assert peak["node"] - before["node"] < n * 2048, figures
    assert peak["driver"] - before["driver"] < n * 2048, figures
    # ... and the node gives most of it back once the tasks are done and their refs dropped.
    assert after["node"] - before["node"] < (peak["node"] - before["node"]) * 0.75 + 8 * MiB, \
        figures
