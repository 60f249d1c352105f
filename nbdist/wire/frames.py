"""Frames: message lists as length-prefixed pickles, large buffers out of band (layer L2).

The format is described in `transport`'s docstring. `encode_parts` / `encode` make a frame;
`FrameReader` splits a byte stream back into message lists, reading a large out-of-band frame
straight into memory of its own.
"""

from __future__ import annotations

import mmap
import pickle
import struct
from collections.abc import Callable
from typing import Any

_LEN = struct.Struct("!I")
_OOB = struct.Struct("!II")
OOB_FLAG = 0x80000000
DEFAULT_MAX_FRAME = 256 << 20
# An out-of-band frame at least this large is read straight into a buffer of its own.
BIG_FRAME = 1 << 20


class TransportError(ConnectionError):
    pass


def encode_parts(msgs: list[Any]) -> list[Any]:
    """A frame as a list of buffers to write in order (one, unless the messages carry
    `pickle.PickleBuffer` objects: those follow, uncopied)."""
    bufs: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(msgs, protocol=5, buffer_callback=bufs.append)
    if not bufs:
        return [_LEN.pack(len(payload)) + payload]
    raws = [b.raw() for b in bufs]
    lengths = [r.nbytes for r in raws]
    head = _OOB.pack(len(payload), len(raws)) + struct.pack(f"!{len(raws)}Q", *lengths)
    total = len(head) + len(payload) + sum(lengths)
    if total >= OOB_FLAG:
        raise TransportError(f"a frame of {total} bytes is too large to send")
    return [_LEN.pack(total | OOB_FLAG) + head + payload, *raws]


def encode(msgs: list[Any]) -> bytes:
    parts = encode_parts(msgs)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _decode(payload: memoryview, oob: bool) -> list[Any]:
    try:
        if oob:
            plen, nbuf = _OOB.unpack_from(payload, 0)
            lengths = struct.unpack_from(f"!{nbuf}Q", payload, _OOB.size)
            pos = _OOB.size + 8 * nbuf
            pickled = payload[pos : pos + plen]
            pos += plen
            views = []
            for n in lengths:
                views.append(payload[pos : pos + n])
                pos += n
            if pos != len(payload):
                raise ValueError("buffer lengths do not add up to the frame")
            msgs = pickle.loads(pickled, buffers=views)
        else:
            msgs = pickle.loads(payload)
    except Exception as exc:
        raise TransportError(f"malformed frame: {exc!r}") from None
    if not isinstance(msgs, list):
        raise TransportError("malformed frame: not a message list")
    return msgs


class FrameReader:
    """Splits a byte stream into decoded message lists; rejects frames over ``limit``.

    The buffers of a large out-of-band frame are read into memory of their own, which callers
    can also receive into directly (`direct`): by default anonymous pages, or what ``alloc``
    gives (a node daemon gives shared-memory files, so a value arriving from another node lands
    in its store with no further copy); the messages are unpickled with views of them."""

    def __init__(self, limit: int = DEFAULT_MAX_FRAME,
                 alloc: Callable[[int], memoryview] | None = None) -> None:
        self.buf = bytearray()
        self.limit = limit
        self.alloc = alloc or _anonymous
        self.big: list[memoryview] | None = None  # where each part of the frame goes
        self.big_head: bytes = b""  # the frame's header and pickle
        self.big_part = 0
        self.big_have = 0

    def direct(self) -> memoryview | None:
        """Where the next bytes of a large frame go, if one is being read."""
        if self.big is None:
            return None
        return self.big[self.big_part][self.big_have :]

    def received(self, n: int) -> list[list[Any]]:
        """``n`` bytes were received into `direct`'s buffer."""
        assert self.big is not None
        self.big_have += n
        if self.big_have == self.big[self.big_part].nbytes:
            self.big_part += 1
            self.big_have = 0
            while self.big_part < len(self.big) and not self.big[self.big_part].nbytes:
                self.big_part += 1
        if self.big_part < len(self.big):
            return []
        parts, self.big = self.big, None
        return [_decode_parts(self.big_head, parts)]

    def _fill(self, data: memoryview) -> tuple[list[list[Any]], memoryview]:
        """Copy ``data`` into the large frame being read; returns what completed and the
        bytes after the frame."""
        out: list[list[Any]] = []
        while self.big is not None and data.nbytes:
            target = self.direct()
            assert target is not None
            take = min(target.nbytes, data.nbytes)
            target[:take] = data[:take]
            out += self.received(take)
            data = data[take:]
        return out, data

    def feed(self, data: bytes | memoryview) -> list[list[Any]]:
        if not self.buf and self.big is None and len(data) >= 4:
            # The common case, one whole small frame: decoded where it lies.
            (length,) = _LEN.unpack_from(data, 0)
            if length == len(data) - 4 and length <= self.limit:
                return [_decode(memoryview(data)[4:], False)]
        out: list[list[Any]] = []
        if self.big is not None:
            done, rest = self._fill(memoryview(data).cast("B"))
            out += done
            if not rest.nbytes:
                return out
            data = rest
        self.buf += data
        buf = self.buf
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (length,) = _LEN.unpack_from(buf, pos)
            oob = bool(length & OOB_FLAG)
            length &= ~OOB_FLAG
            if length > self.limit:
                raise TransportError(f"frame of {length} bytes exceeds the limit {self.limit}")
            if n - pos - 4 < length:
                if oob and length >= BIG_FRAME and self._start_big(buf, pos + 4, n, length):
                    # The rest of the stream so far is all this frame's.
                    pos = n
                break
            if oob:
                # Copied out: views into `buf` would pin it.
                out.append(_decode(memoryview(bytearray(buf[pos + 4 : pos + 4 + length])), True))
            else:
                out.append(_decode(memoryview(buf)[pos + 4 : pos + 4 + length], False))
            pos += 4 + length
        if pos:
            del buf[:pos]
        return out

    def _start_big(self, buf: bytearray, start: int, end: int, length: int) -> bool:
        """Begin reading a large frame whose first bytes are ``buf[start:end]``, once its
        header and pickle are all there (False: wait for more)."""
        if end - start < _OOB.size:
            return False
        plen, nbuf = _OOB.unpack_from(buf, start)
        head_len = _OOB.size + 8 * nbuf + plen
        if end - start < head_len or head_len > length:
            return False
        lengths = struct.unpack_from(f"!{nbuf}Q", buf, start + _OOB.size)
        if head_len + sum(lengths) != length:
            raise TransportError("malformed frame: buffer lengths do not add up to the frame")
        self.big_head = bytes(buf[start : start + head_len])
        self.big = [self.alloc(n) for n in lengths]
        self.big_part = self.big_have = 0
        while self.big_part < len(self.big) and not self.big[self.big_part].nbytes:
            self.big_part += 1
        done, rest = self._fill(memoryview(buf)[start + head_len : end])
        assert not done and not rest.nbytes
        return True


def _anonymous(n: int) -> memoryview:
    # Anonymous pages: not zeroed up front, unlike a bytearray.
    return memoryview(mmap.mmap(-1, max(n, 1)))[:n]


def _decode_parts(head: bytes, parts: list[memoryview]) -> list[Any]:
    try:
        plen, nbuf = _OOB.unpack_from(head, 0)
        pickled = memoryview(head)[_OOB.size + 8 * nbuf : _OOB.size + 8 * nbuf + plen]
        msgs = pickle.loads(pickled, buffers=parts)
    except Exception as exc:
        raise TransportError(f"malformed frame: {exc!r}") from None
    if not isinstance(msgs, list):
        raise TransportError("malformed frame: not a message list")
    return msgs
