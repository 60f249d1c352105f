"""Direct links (nbdist/wire/links.py) between two endpoints in this process: the cluster's secret
and the actor's id are both proven before a link exists, frames flow both ways, and a broken
frame closes the link, not the process."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from nbdist.wire import links
from nbdist.wire import protocol as P
from nbdist.wire.frames import TransportError

SECRET = os.urandom(32)
ACTOR = 0x1234


@pytest.fixture
def endpoint(tmp_path: Path):
    accepted: list[links.Link] = []
    received: list[list] = []
    arrived = threading.Event()

    def on_link(sock: socket.socket, pid: int) -> None:
        def deliver(msgs: list) -> None:
            received.append(msgs)
            arrived.set()

        link = links.Link(sock, deliver, lambda _: None, pid)
        accepted.append(link)
        threading.Thread(target=lambda: [None for _ in iter(link.read, False)],
                         daemon=True).start()

    ep = links.Endpoint(str(tmp_path), SECRET, ACTOR, on_link)
    yield ep, accepted, received, arrived
    ep.close()
    for link in accepted:
        link.close()


def test_a_link_carries_frames_both_ways(endpoint, tmp_path: Path) -> None:
    ep, accepted, received, arrived = endpoint
    sock = links.connect(str(tmp_path), os.getpid(), ACTOR, SECRET)
    back: list[list] = []
    closed: list[links.Link] = []
    link = links.Link(sock, back.append, closed.append, os.getpid())
    link.send([(P.CALL, ("spec",), [None])])
    assert arrived.wait(5)
    assert received == [[(P.CALL, ("spec",), [None])]]
    assert accepted[0].peer_pid == os.getpid()
    accepted[0].send([(P.DONE, 1, True, [], 0.0, 0.0, 1)])
    assert link.read() and back == [[(P.DONE, 1, True, [], 0.0, 0.0, 1)]]
    accepted[0].close()
    assert not link.read() and closed == [link], "EOF closes the link and tells its owner once"
    link.close()
    assert closed == [link]


def test_a_link_to_another_actor_is_refused(endpoint, tmp_path: Path) -> None:
    with pytest.raises(TransportError, match="does not host"):
        links.connect(str(tmp_path), os.getpid(), ACTOR + 1, SECRET)
    assert not endpoint[1]


def test_a_wrong_secret_is_refused(endpoint, tmp_path: Path) -> None:
    with pytest.raises((TransportError, OSError)):
        links.connect(str(tmp_path), os.getpid(), ACTOR, os.urandom(32))
    assert not endpoint[1]


def test_no_endpoint_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        links.connect(str(tmp_path), 99999, ACTOR, SECRET)


def test_a_malformed_frame_closes_the_link_only(endpoint, tmp_path: Path) -> None:
    ep, accepted, received, arrived = endpoint
    sock = links.connect(str(tmp_path), os.getpid(), ACTOR, SECRET)
    sock.settimeout(5)
    sock.sendall(b"\x00\x00\x00\x05garbage")  # 5 bytes that are no pickle
    assert sock.recv(16) == b"", "the endpoint's side should close the link"
    assert accepted[0].closed and not received
    other = links.connect(str(tmp_path), os.getpid(), ACTOR, SECRET)  # still accepting
    other.close()
    sock.close()


def test_the_endpoint_is_private_and_removed_on_close(tmp_path: Path) -> None:
    ep = links.Endpoint(str(tmp_path), SECRET, ACTOR, lambda s, p: s.close())
    path = Path(links.endpoint_path(str(tmp_path), os.getpid()))
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    ep.close()
    assert not path.exists()
