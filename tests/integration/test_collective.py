"""nbdist.util.collective with real actors: every operation on both transports, numpy and
torch, groups declared from the driver, a group spanning two nodes, and the errors (wrong
rank, group not initialized, mismatched calls, a rank that dies or never calls)."""

from __future__ import annotations

import glob
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from clusters import Cli, start_head

import nbdist
from nbdist.util import collective as col
from nbdist.util.collective import transport

pytestmark = pytest.mark.timeout(120)

SIZE = 1001  # not divisible by any world size used here


@nbdist.remote
class Member:
    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


def _join(world: int, rank: int, backend: str, group: str, timeout_ms: int) -> int:
    col.init_collective_group(world, rank, backend=backend, group_name=group,
                              gloo_timeout=timeout_ms)
    return col.get_rank(group)


def _leave(group: str) -> bool:
    col.destroy_collective_group(group)
    return col.is_group_initialized(group)


Start = Callable[..., list[Any]]


@pytest.fixture
def start_group(cluster: dict[str, Any]) -> Iterator[Start]:
    """``start_group(world, backend)``: that many actors joined in group "g"; all are
    destroyed and killed afterwards."""
    started: list[Any] = []

    def start(world: int, backend: str = "auto", group: str = "g", timeout_ms: int = 30_000,
              join: bool = True) -> list[Any]:
        members = [Member.remote() for _ in range(world)]
        started.extend(members)
        if join:
            ranks = nbdist.get([m.run.remote(_join, world, r, backend, group, timeout_ms)
                                for r, m in enumerate(members)], timeout=60)
            assert ranks == list(range(world))
        return members

    yield start
    for m in started:
        nbdist.kill(m)


def _each(members: list[Any], fn: Callable[..., Any], *args: Any, timeout: float = 60
          ) -> list[Any]:
    return nbdist.get([m.run.remote(fn, r, len(members), *args)
                       for r, m in enumerate(members)], timeout=timeout)


def _every_op(rank: int, world: int, lib: str) -> dict[str, Any]:
    """Runs every operation once in group "g"; returns the results as numpy arrays."""
    if lib == "torch":
        import torch

        def make(a: np.ndarray) -> Any:
            return torch.from_numpy(a.copy())
    else:
        def make(a: np.ndarray) -> Any:
            return a.copy()

    def back(t: Any) -> np.ndarray:
        return np.array(t)

    out: dict[str, Any] = {}
    base = np.arange(SIZE, dtype=np.float64)
    for op in col.ReduceOp:
        ints = make((base % 7 + rank + 1).astype(np.int64))
        col.allreduce(ints, "g", op=op)
        out[f"allreduce-{op.name}"] = back(ints)
    x = make((base * (rank + 1)).astype(np.float32))
    col.reduce(x, dst_rank=world - 1, group_name="g")
    out["reduce"] = back(x)
    b = make(np.full(SIZE, rank, dtype=np.float64))
    col.broadcast(b, src_rank=world - 1, group_name="g")
    out["broadcast"] = back(b)
    gathered = [make(np.zeros((2, 3), dtype=np.int32)) for _ in range(world)]
    col.allgather(gathered, make(np.full((2, 3), rank, dtype=np.int32)), "g")
    out["allgather"] = [back(t) for t in gathered]
    scattered = make(np.zeros(5, dtype=np.float64))
    col.reducescatter(scattered, [make(np.full(5, 10.0 * r + rank)) for r in range(world)],
                      "g", op=col.ReduceOp.MAX)
    out["reducescatter"] = back(scattered)
    col.barrier("g")
    if world > 1:  # a ring of send/recv: rank r sends to r + 1
        got = make(np.zeros(4, dtype=np.int64))
        if rank % 2 == 0:
            col.send(make(np.full(4, rank, dtype=np.int64)), (rank + 1) % world, "g")
            col.recv(got, (rank - 1) % world, "g")
        else:
            col.recv(got, (rank - 1) % world, "g")
            col.send(make(np.full(4, rank, dtype=np.int64)), (rank + 1) % world, "g")
        out["recv"] = back(got)
    return out


def _check_every_op(results: list[dict[str, Any]]) -> None:
    world = len(results)
    base = np.arange(SIZE, dtype=np.float64)
    inputs = [(base % 7 + r + 1).astype(np.int64) for r in range(world)]
    folds = {"SUM": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum}
    for rank, got in enumerate(results):
        for name, f in folds.items():
            expected = inputs[0]
            for a in inputs[1:]:
                expected = f(expected, a)
            np.testing.assert_array_equal(got[f"allreduce-{name}"], expected, err_msg=name)
        own = (base * (rank + 1)).astype(np.float32)
        reduced = sum((base * (r + 1)).astype(np.float32) for r in range(world))
        np.testing.assert_allclose(got["reduce"], reduced if rank == world - 1 else own)
        np.testing.assert_array_equal(got["broadcast"], np.full(SIZE, world - 1.0))
        for r, block in enumerate(got["allgather"]):
            np.testing.assert_array_equal(block, np.full((2, 3), r, dtype=np.int32))
        np.testing.assert_array_equal(got["reducescatter"], np.full(5, 10.0 * rank + world - 1))
        if world > 1:
            np.testing.assert_array_equal(got["recv"], np.full(4, (rank - 1) % world))


@pytest.mark.parametrize(("backend", "world"), [("shm", 2), ("shm", 4), ("ring", 2),
                                                ("ring", 3), ("auto", 1)])
def test_every_operation_gives_every_rank_the_right_result(start_group: Start, backend: str,
                                                           world: int) -> None:
    members = start_group(world, backend)
    _check_every_op(_each(members, _every_op, "numpy"))


@pytest.mark.parametrize("backend", ["shm", "ring"])
def test_every_operation_works_in_place_on_torch_tensors(start_group: Start, backend: str
                                                         ) -> None:
    members = start_group(3, backend)
    _check_every_op(_each(members, _every_op, "torch"))


def _strided_and_large(rank: int, world: int) -> tuple[Any, Any, bytes]:
    import torch

    t = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # not contiguous
    t.mul_(rank + 1)
    col.allreduce(t, "g")
    a = np.ones((6, 4), dtype=np.float32)[:, ::2] * (rank + 1)  # a strided numpy view
    col.allreduce(a, "g")
    big = np.full(3_000_000, float(rank + 1))  # 24 MB: the shared buffers grow
    col.allreduce(big, "g")
    leftover = sorted(glob.glob("/dev/shm/nbdist-coll-*"))
    return t.numpy().copy(), a, repr((float(big[0]), float(big[-1]), leftover)).encode()


@pytest.mark.parametrize("backend", ["shm", "ring"])
def test_non_contiguous_tensors_and_large_ones_get_their_result_in_place(
        start_group: Start, backend: str) -> None:
    members = start_group(2, backend)
    for t, a, summary in _each(members, _strided_and_large):
        np.testing.assert_array_equal(t, np.arange(12.0).reshape(3, 4).T * 3)
        np.testing.assert_array_equal(a, np.full((6, 2), 3.0, dtype=np.float32))
        # Shared buffers are unlinked once every rank has mapped them: nothing is left in
        # /dev/shm while the group runs, so nothing can be left if a process is killed.
        assert summary.decode() == repr((3.0, 3.0, [])), summary


def _sum_of_ranks(rank: int, world: int) -> tuple[int, int, list[int]]:
    x = np.array([rank, 1])
    col.allreduce(x, "declared")
    return col.get_rank("declared"), col.get_collective_group_size("declared"), x.tolist()


def test_a_group_declared_by_the_driver_is_joined_on_first_use(start_group: Start) -> None:
    members = start_group(3, join=False)
    col.create_collective_group(members[::-1], 3, [0, 1, 2], group_name="declared")
    try:
        results = _each(members, _sum_of_ranks)
    finally:
        col.destroy_collective_group("declared")
    assert [r[:2] for r in results] == [(2, 3), (1, 3), (0, 3)]
    assert all(r[2] == [3, 3] for r in results)


def test_a_group_can_be_destroyed_and_formed_again(start_group: Start) -> None:
    members = start_group(2)
    assert _each(members, lambda r, w: _leave("g")) == [False, False]
    assert nbdist.get(members[0].run.remote(col.get_rank, "g")) == -1
    nbdist.get([m.run.remote(_join, 2, r, "ring", "g", 30_000) for r, m in enumerate(members)],
               timeout=60)
    _check_every_op(_each(members, _every_op, "numpy"))


def test_wrong_ranks_are_refused(start_group: Start) -> None:
    members = start_group(2, join=False)
    with pytest.raises(ValueError, match="rank 2 is out of range for a group of world_size 2"):
        nbdist.get(members[0].run.remote(_join, 2, 2, "auto", "bad", 30_000))
    # Both join as rank 0 with a rendezvous timeout far longer than any start-up under load:
    # the duplicate must be what both report (the one already waiting too), never a timeout.
    twice = [m.run.remote(_join, 2, 0, "auto", "twice", 90_000) for m in members]
    for ref in twice:
        with pytest.raises(col.CollectiveError,
                           match="Two processes joined the group as rank 0"):
            nbdist.get(ref, timeout=100)
    with pytest.raises(ValueError, match="ranks must be unique"):
        col.create_collective_group(members, 2, [0, 0], group_name="dup")


def test_an_operation_on_a_group_this_process_has_not_joined_says_so(start_group: Start
                                                                     ) -> None:
    member = start_group(1, join=False)[0]
    with pytest.raises(col.GroupNotInitializedError, match="'nowhere' is not initialized"):
        nbdist.get(member.run.remote(col.allreduce, np.zeros(3), "nowhere"))
    assert nbdist.get(member.run.remote(col.get_rank, "nowhere")) == -1
    assert nbdist.get(member.run.remote(col.get_collective_group_size, "nowhere")) == -1
    with pytest.raises(col.GroupNotInitializedError):
        col.barrier("nowhere")


def _mismatch(rank: int, world: int) -> tuple[str, list[float]]:
    try:
        col.allreduce(np.zeros(4 + rank), "g")
        message = "no error"
    except col.CollectiveMismatchError as exc:
        message = str(exc)
    x = np.ones(3)
    col.allreduce(x, "g")  # the group stays usable
    return message, x.tolist()


@pytest.mark.parametrize("backend", ["shm", "ring"])
def test_mismatched_shapes_raise_on_every_rank_and_the_group_stays_usable(
        start_group: Start, backend: str) -> None:
    members = start_group(3, backend)
    for message, after in _each(members, _mismatch):
        assert "made different collective calls" in message
        assert "rank 1: allreduce(shape=[5]" in message, message
        assert after == [3.0, 3.0, 3.0]


def _bad_root(rank: int, world: int) -> str:
    try:
        col.broadcast(np.zeros(3), src_rank=5 if rank == 1 else 0, group_name="g")
    except col.CollectiveMismatchError as exc:
        return str(exc)
    return "no error"


def test_a_root_out_of_range_on_one_rank_fails_the_call_on_every_rank(start_group: Start
                                                                      ) -> None:
    members = start_group(2)
    for message in _each(members, _bad_root):
        assert "rank 1: src_rank 5 is not a rank of a group of 2" in message, message


def _read_only(rank: int, world: int) -> str:
    x = np.zeros(3)
    x.flags.writeable = rank != 0
    try:
        col.allreduce(x, "g")
    except col.CollectiveMismatchError as exc:
        return str(exc)
    return "no error"


def test_a_read_only_array_on_one_rank_fails_the_call_on_every_rank(start_group: Start
                                                                    ) -> None:
    members = start_group(2)
    for message in _each(members, _read_only):
        assert "read-only" in message, message


def _allreduce_expecting_loss(rank: int, world: int) -> str:
    try:
        col.allreduce(np.ones(100_000), "g")
    except (col.PeerLostError, col.CollectiveTimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


@pytest.mark.parametrize("backend", ["shm", "ring"])
def test_a_rank_that_dies_fails_the_others_promptly(start_group: Start, backend: str) -> None:
    # The timeout is far longer than the test allows: the error must come from the death.
    members = start_group(3, backend, timeout_ms=600_000)
    calls = [m.run.remote(_allreduce_expecting_loss, r, 3) for r, m in enumerate(members[:2])]
    nbdist.kill(members[2])
    for message in nbdist.get(calls, timeout=30):
        assert message.startswith("PeerLostError"), message
        assert "rank 2" in message, message


def test_a_rank_that_never_calls_times_out_with_a_clear_error(start_group: Start) -> None:
    members = start_group(2, "ring", timeout_ms=1_500)
    message = nbdist.get(members[0].run.remote(_allreduce_expecting_loss, 0, 2), timeout=30)
    assert message.startswith("CollectiveTimeoutError"), message
    assert "Rank 1 sent nothing for 1.5 s" in message


def test_a_link_refuses_a_peer_that_does_not_prove_the_secret() -> None:
    listener = transport.listen("127.0.0.1")
    addr = listener.getsockname()
    secret, uid = b"s" * 32, b"u" * 16
    links: dict[int, transport.Link] = {}
    accepted = threading.Thread(target=lambda: links.update(
        transport.connect_mesh(listener, 0, [addr, addr], uid, secret, 20)))
    accepted.start()
    impostor = socket.create_connection(addr)
    impostor.sendall(transport.HELLO.pack(transport.MAGIC, 1, b"n" * 32))
    impostor.settimeout(10)
    reply = b""
    while len(reply) < 64 and (part := impostor.recv(64 - len(reply))):
        reply += part  # the listener's nonce and its proof
    assert len(reply) == 64
    impostor.sendall(b"x" * 32)  # not the HMAC of the listener's nonce
    assert impostor.recv(1) == b""  # dropped
    impostor.close()
    assert accepted.is_alive()  # still waiting for the real rank 1
    peer = transport.dial(addr, 1, 0, uid, secret, 20)
    accepted.join(20)
    assert list(links) == [1]
    try:
        links[1].send(transport.DATA, {"hello": 1}, np.arange(3))
        assert peer.recv(1024)
    finally:
        links[1].close()
        peer.close()


def test_a_group_spanning_two_nodes_uses_the_ring(cli: Cli) -> None:
    address = start_head(cli, "--num-cpus", "1")
    cli.run("start", "--address", address, "--num-cpus", "1", "--resources", '{"beta": 1}')
    driver = cli.python(f"""
        import numpy as np
        import nbdist
        from nbdist.util import collective as col

        nbdist.init(address={address!r})

        @nbdist.remote
        class Member:
            def join(self, rank, backend, group):
                col.init_collective_group(2, rank, backend=backend, group_name=group,
                                          gloo_timeout=20_000)
                return nbdist.get_runtime_context().get_node_id()

            def allreduce(self, rank):
                x = np.arange(1_000_001, dtype=np.float64) * (rank + 1)
                col.allreduce(x, "g")
                return float(x[0]), float(x[-1]), x.size

        members = [Member.remote(), Member.options(num_cpus=0, resources={{"beta": 1}}).remote()]
        nodes = nbdist.get([m.join.remote(r, "auto", "g") for r, m in enumerate(members)])
        assert nodes[0] != nodes[1], nodes
        print("RESULTS", nbdist.get([m.allreduce.remote(r) for r, m in enumerate(members)]))
        try:
            nbdist.get([m.join.remote(r, "shm", "h") for r, m in enumerate(members)])
        except col.CollectiveError as exc:
            print("SHM REFUSED", "ranks are on several nodes" in str(exc))
    """)
    assert driver.returncode == 0, driver.stderr + driver.stdout
    assert "RESULTS [(0.0, 3000000.0, 1000001), (0.0, 3000000.0, 1000001)]" in driver.stdout
    assert "SHM REFUSED True" in driver.stdout
