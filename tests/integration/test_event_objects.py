"""The node's object store in the event stream: objects spilled to disk and read back, and
objects freed, reach the driver as records with their sizes and nodes (what the panel shows,
without asking the node itself)."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nbdist
from nbdist import events

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only, pytest.mark.usefixtures(
    "no_cluster")]

MiB = 1 << 20


@nbdist.remote
def first_value(a: np.ndarray) -> int:
    return int(a[0])


def _of(kind: str, ids: set[str], since: float) -> list[Any]:
    # Object ids restart with each runtime of a process: records of an earlier cluster in this
    # driver can carry the same ids, so only this test's are counted.
    return [e for e in events.recent()
            if e.kind == kind and e.object_id in ids and e.time >= since]


def test_spilled_restored_and_freed_objects_are_records_with_sizes_and_nodes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait_until) -> None:
    monkeypatch.setenv("NBDIST_SPILL_DIR", str(tmp_path))
    since = time.time()
    nbdist.init(num_cpus=1, object_store_memory=32 * MiB)
    try:
        refs = [nbdist.put(np.full(MiB, i, dtype=np.int64)) for i in range(6)]  # 48 MiB
        ids = {r.hex() for r in refs}
        created = {e.object_id: e for e in _of("object_created", ids, since)}
        assert set(created) == ids
        spilled = wait_until(lambda: _of("object_spilled", ids, since), what="objects spilled")
        for e in spilled:
            assert e.size >= 8 * MiB and e.node_id == created[e.object_id].node_id, e
        first = spilled[0].object_id
        assert events.object_info([first])[first].get("spilled") is True
        index = [r.hex() for r in refs].index(first)
        assert nbdist.get(first_value.remote(refs[index])) == index  # read back from disk
        restored = wait_until(lambda: _of("object_restored", {first}, since),
                              what="the object read back announced")
        assert restored[0].size == spilled[0].size
        assert restored[0].node_id == spilled[0].node_id
        del refs
        gc.collect()
        freed = wait_until(lambda: len(_of("object_freed", ids, since)) == len(ids)
                           and _of("object_freed", ids, since), what="every object freed")
        for e in freed:
            assert (e.size, e.node_id) == (created[e.object_id].size,
                                           created[e.object_id].node_id), e
    finally:
        nbdist.shutdown()
