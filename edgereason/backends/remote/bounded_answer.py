"""A server's answer read within bounds (issue 62): its body at most `max_bytes` after inflating,
the whole exchange within `wait_s` (not only the time between bytes), its JSON at most one value per
BYTES_PER_VALUE bytes of the limit.

Why: httpx's `request()` reads a body whole, whatever its size, and inflates gzip without a limit
(a 2 MB gzip answer drove `solve` to 6.4 GB); its timeouts hold between bytes only, so a server
sending one byte a second kept a request alive until the batch's deadline, and one sending without
end grew memory until it ran out. So here:
- the body is read raw and inflated here, never more than the room left under the limit at a time
  (zlib's max_length): httpx inflates each network read (64 KiB) whole, up to 64 MiB of a bomb;
- Accept-Encoding names only the codings inflated here (gzip, deflate), and another is refused;
- an error answer (3xx, 4xx, 5xx) is read to ERROR_BYTES at most: only its first words are quoted;
- headers are bounded by h11, which refuses an incomplete event (a header block, a chunk line) over
  httpcore's 100 KiB; that is one line too.
Each bound broken is a RemoteError naming the server and the limit, not retried: the answer is the
server's own doing and would come again, so a retry would only spend the time and memory again.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from edgereason.backends.remote.errors import RemoteError, unreadable
from edgereason.backends.remote_settings import MiB

ACCEPT_ENCODING = "gzip, deflate"  # httpx would add br and zstd where their packages are installed
ERROR_BYTES = 64 * 1024  # of an error answer: server_messages quotes its first 300 characters
# a JSON value costs Python up to ~72 bytes (an empty dict and its slot): at one per 16 bytes of the
# limit, a 4 MiB answer parses into at most ~20 MB; real answers hold one per 25 bytes or more
BYTES_PER_VALUE = 16
HEADER_BYTES = "100 KiB"  # httpcore's h11 max_incomplete_event_size


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes  # inflated; an error answer's cut at ERROR_BYTES

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Bounds:
    root: str  # the server, as messages name it
    wait_s: float  # the whole exchange: connecting, sending, and the answer to its last byte
    max_bytes: int  # of a body, after inflating it
    wait_flag: str = "--remote-timeout raises it"  # what sets wait_s, for the message

    def too_large(self, path: str) -> RemoteError:
        size = f"{self.max_bytes / MiB:g} MiB"
        return RemoteError(
            f"the server at {self.root} sent more than {size} in its answer to {path} "
            "(--remote-max-answer raises it)"
        )


async def receive(http: httpx.AsyncClient, request: httpx.Request, bounds: Bounds) -> Answer:
    """The answer to `request`, within `bounds`. A timeout before the headers came is raised as it
    is (TimeoutError or httpx's: the caller retries it, as a server that did not answer); once the
    server is answering, running out of time is a RemoteError."""
    path = request.url.path
    body: _Body | None = None
    try:
        async with asyncio.timeout(bounds.wait_s):
            response = await http.send(request, stream=True)
            try:
                error = response.status_code >= 300
                body = _Body(response.headers, ERROR_BYTES if error else bounds.max_bytes)
                async for raw in response.aiter_raw():
                    if not body.add(raw, cut=error):
                        break  # an error answer, cut: its first words are all that is quoted
                return Answer(response.status_code, response.headers, body.content())
            finally:  # before the whole answer came: the connection is closed, not drained
                await response.aclose()
    except TimeoutError:
        if body is None:
            raise
        raise RemoteError(
            f"the server at {bounds.root} sent its answer to {path} too slowly: "
            f"{body.size} bytes in {bounds.wait_s:g}s ({bounds.wait_flag})"
        ) from None
    except _Unreadable as err:
        raise unreadable(bounds.root, path, str(err)) from None
    except _TooLarge:
        raise bounds.too_large(path) from None


def load_json(answer: Answer, bounds: Bounds, path: str) -> Any:
    """The body's JSON, read only where it holds at most one value per BYTES_PER_VALUE bytes of the
    limit (each value past a container's first follows a comma: counting commas and brackets bounds
    them, strings' own included); ValueError where it is not JSON."""
    body = answer.body
    most = bounds.max_bytes // BYTES_PER_VALUE
    if body.count(b",") + body.count(b"[") + body.count(b"{") > most:
        raise RemoteError(
            f"the server at {bounds.root} answered {path} with more than {most} JSON values "
            "(--remote-max-answer raises it)"
        )
    return json.loads(body)


def header_overrun(err: httpx.TransportError, root: str, path: str) -> RemoteError | None:
    """The line for h11's refusal of a header block or chunk line over its limit; None for another
    transport error."""
    if not isinstance(err, httpx.RemoteProtocolError) or "buffer too long" not in str(err):
        return None
    return RemoteError(
        f"the server at {root} answered {path} with a header block or chunk line over "
        f"{HEADER_BYTES}"
    )


class _TooLarge(Exception):
    pass


class _Unreadable(Exception):
    pass


class _Body:
    """A body inflated as its bytes come, at most `limit` bytes of it."""

    def __init__(self, headers: httpx.Headers, limit: int) -> None:
        self.limit, self.size = limit, 0
        self._chunks: list[bytes] = []
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("identity", "gzip", "x-gzip", "deflate"):
            raise _Unreadable(f"Content-Encoding {coding!r} (it was asked for {ACCEPT_ENCODING})")
        self._deflate = coding == "deflate"
        # gzip: its header; deflate: zlib's, or raw where that fails on the first bytes (as httpx)
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflater = None if coding == "identity" else zlib.decompressobj(wbits)

    def add(self, raw: bytes, cut: bool) -> bool:
        """Take `raw`; False once full where `cut` (the rest is not read), else _TooLarge past the
        limit."""
        room = self.limit - self.size
        data = self._inflate(raw, room + 1)  # one byte more than the room tells an overrun
        if len(data) > room:
            if not cut:
                raise _TooLarge
            data = data[:room]
        self._chunks.append(data)
        self.size += len(data)
        return not cut or self.size < self.limit

    def content(self) -> bytes:
        return b"".join(self._chunks)

    def _inflate(self, raw: bytes, most: int) -> bytes:
        """At most `most` bytes of `raw` inflated; the rest is past the limit and never inflated
        (the output stops short of `most` only where all of `raw` was read)."""
        if self._inflater is None:
            return raw
        try:
            return self._inflater.decompress(raw, most)
        except zlib.error as err:
            if not (self._deflate and self.size == 0):
                raise _Unreadable("a body that cannot be decoded") from err
            self._deflate, self._inflater = False, zlib.decompressobj(-zlib.MAX_WBITS)
            return self._inflate(raw, most)
