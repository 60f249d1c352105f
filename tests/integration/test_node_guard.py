"""Bad input from user code never takes the node daemon down: the process that sent a message
the node cannot handle gets a clear error, and every other process is served on."""

from __future__ import annotations

import os

import pytest

import nbdist
from nbdist.objects.refs import ObjectRef

pytestmark = [pytest.mark.timeout(90), pytest.mark.nbdist_only]


@nbdist.remote
class Keeper:
    def __init__(self) -> None:
        self.calls = 0

    def call(self) -> tuple[int, int]:
        self.calls += 1
        return os.getpid(), self.calls


@nbdist.remote
def pid(*_ignored) -> int:
    return os.getpid()


@nbdist.remote(max_retries=0)
def ref_from_hex(text: str) -> str:
    return nbdist.ObjectRef(bytes.fromhex(text)).hex()


@nbdist.remote(max_retries=0)
def submit_forged_ref() -> int:
    # A ref whose id is no int (what ObjectRef() itself refuses) reaches the node inside a
    # submission: the message makes the node's handler raise.
    forged = object.__new__(ObjectRef)
    forged.id = b"\xab" * 16
    return int(nbdist.get(pid.remote(forged)))


def test_object_ref_from_bad_bytes_fails_in_the_task(fresh_cluster: dict) -> None:
    keeper = Keeper.remote()
    first_pid, _ = nbdist.get(keeper.call.remote())
    with pytest.raises(ValueError, match="not the id of an nbdist object"):
        nbdist.get(ref_from_hex.remote("ab" * 16), timeout=30)
    with pytest.raises(ValueError, match="at most 16"):
        nbdist.get(ref_from_hex.remote("ab" * 17), timeout=30)
    assert nbdist.get(keeper.call.remote(), timeout=30) == (first_pid, 2)


def test_a_message_the_node_cannot_handle_fails_its_sender_only(fresh_cluster: dict) -> None:
    keeper = Keeper.remote()
    kept = nbdist.put(list(range(100_000)))
    first_pid, _ = nbdist.get(keeper.call.remote())
    with pytest.raises(ValueError, match="could not handle message") as info:
        nbdist.get(submit_forged_ref.remote(), timeout=30)
    assert "TypeError" in str(info.value)
    # The node serves on: the actor (its state intact), the stored object, new tasks.
    assert nbdist.get(keeper.call.remote(), timeout=30) == (first_pid, 2)
    assert nbdist.get(kept, timeout=30)[-1] == 99_999
    assert len(nbdist.get([pid.remote() for _ in range(8)], timeout=30)) == 8
