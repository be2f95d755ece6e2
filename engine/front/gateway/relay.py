"""One request to a platform and its answer, streamed both ways (aiohttp's client, by measure).

The client was chosen by measurement (docs/gateway.md, "The relay client"): one aiohttp
session per gateway relays 4-10x what one httpx pool does on the same box. The session sets no
timeout and no connection bound of its own: the platform's deadline is enforced around the
request up to the response head (connect, upload, head; the upload's clock restarts on every
chunk, so it counts from the last request byte), body transfer in either direction has an idle
timeout instead (so a long SSE stream is never cut by the deadline), and connections are
bounded per agent and in total by `slots`, which a call waits on for at most a second.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp

#: Hop-by-hop headers (RFC 9110 section 7.6.1) and those a relay sets itself. Lower-case bytes,
#: as ASGI and aiohttp's raw headers give them.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
#: Never forwarded from the agent: the platform's host is `base_url`'s, the credential is ours,
#: the Idempotency-Key is scoped, a 100-continue is the agent's business with us, and its
#: `baggage` may carry what it tells its own services only (DESIGN, "Telemetry").
_AGENT_ONLY = frozenset({b"host", b"authorization", b"idempotency-key", b"expect", b"baggage"})
#: Proxy headers would let an agent tell the platform it is someone or somewhere else (a
#: client address, a host, a path a front proxy rewrites to): the gateway is the hop the
#: platform sees. Matched with `_` read as `-`, as some servers read them.
_PROXY = frozenset(
    {
        b"forwarded",
        b"x-real-ip",
        b"true-client-ip",
        b"x-client-ip",
        b"client-ip",
        b"cf-connecting-ip",
        b"fastly-client-ip",
        b"x-cluster-client-ip",
        b"x-original-url",
        b"x-rewrite-url",
    }
)
_PROXY_PREFIX = b"x-forwarded-"


class UploadProblem(Exception):
    """The agent's upload went wrong (too large, stalled, gone): the agent's doing, uncounted."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


Receive = Callable[[], Awaitable[dict[str, Any]]]


class RequestBody:
    """The agent's body, read as it arrives and kept (up to the replay buffer) for the one
    retry after a refresh. A body that fits in its first message is plain bytes."""

    def __init__(self, receive: Receive, limit: int, replay_limit: int, idle: float) -> None:
        self._receive = receive
        self.limit = limit
        self.replay_limit = replay_limit
        self.idle = idle
        self.kept: list[bytes] | None = []
        self.size = 0
        self.finished = False
        self.problem: UploadProblem | None = None
        self.first: bytes = b""
        #: Told when the upload starts streaming (False) and when its last byte is read (True).
        self.on_progress: Callable[[bool], None] | None = None

    async def start(self) -> None:
        """Read the first message: most bodies end there. A request that declares no body
        (neither Content-Length nor Transfer-Encoding, as most GETs) is not read at all: its
        caller skips this and calls `no_body`, one coroutine fewer on most requests."""
        chunk, more = await self._next()
        self.first = chunk
        self.finished = not more
        if self.size > self.replay_limit:
            self.kept = None

    def no_body(self) -> None:
        self.finished = True

    @property
    def replayable(self) -> bool:
        return self.kept is not None

    def for_attempt(self, attempt: int) -> bytes | AsyncIterator[bytes] | None:
        if self.finished and attempt == 1:
            return self.first or None
        if attempt > 1:
            assert self.kept is not None
            return self.first + b"".join(self.kept) or None
        return self._stream()

    async def _stream(self) -> AsyncIterator[bytes]:
        self._progress(False)
        yield self.first
        while not self.finished:
            chunk, more = await self._next()
            self.finished = not more
            if self.kept is not None:
                self.kept.append(chunk)
                if self.size > self.replay_limit:
                    self.kept = None
            if self.finished:
                self._progress(True)
            yield chunk

    def _progress(self, done: bool) -> None:
        if self.on_progress is not None:
            self.on_progress(done)

    async def _next(self) -> tuple[bytes, bool]:
        try:
            async with asyncio.timeout(self.idle):
                message = await self._receive()
        except TimeoutError:
            raise self._fail(408, "request_timeout") from None
        if message["type"] == "http.disconnect":
            raise self._fail(499, "client_closed")
        chunk: bytes = message.get("body", b"")
        self.size += len(chunk)
        if self.size > self.limit:
            raise self._fail(413, "body_too_large")
        return chunk, bool(message.get("more_body"))

    def _fail(self, status: int, error: str) -> UploadProblem:
        self.problem = UploadProblem(status, error)
        return self.problem


def forwarded_headers(raw: list[tuple[bytes, bytes]], *, streamed: bool) -> list[tuple[str, str]]:
    """The agent's headers a platform may see: no hop-by-hop ones (also those the agent's
    `Connection` names), no Host, no agent token, and Content-Length only when the body is
    streamed as it came (aiohttp sets it for a body it holds)."""
    named = _connection_named(raw)
    kept = []
    for name, value in raw:
        if name in HOP_BY_HOP or name in _AGENT_ONLY or name in named:
            continue
        if b"_" in name or name in _PROXY or name.startswith(_PROXY_PREFIX):
            continue  # a name with `_` is dropped: `X_Forwarded_For` is `X-Forwarded-For` to some
        if name == b"content-length" and not streamed:
            continue
        kept.append((name.decode("latin-1"), value.decode("latin-1")))
    return kept


def relayed_headers(raw: tuple[tuple[bytes, bytes], ...]) -> list[tuple[bytes, bytes]]:
    """The platform's headers as they came, minus hop-by-hop ones (lower-cased names)."""
    lowered = [(name.lower(), value) for name, value in raw]
    named = _connection_named(lowered)
    return [(n, v) for n, v in lowered if n not in HOP_BY_HOP and n not in named]


def _connection_named(raw: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    names: set[bytes] = set()
    for name, value in raw:
        if name == b"connection":
            names.update(part.strip().lower() for part in value.split(b","))
    return frozenset(names)


def new_session() -> aiohttp.ClientSession:
    """The gateway's one client session, made inside the running loop (the ASGI lifespan).

    No timeouts and no connection limit here (`limit=0`): aiohttp's default 300 s total would
    cut a long stream, a `sock_read` would cut a platform whose normal answer takes longer
    than it, and a pool limit is what one agent's streams once exhausted for everyone."""
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30, ttl_dns_cache=300)
    session = aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
        timeout=aiohttp.ClientTimeout(total=None),
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )
    # One attempt means one request: aiohttp would silently send an idempotent request again
    # when the connection drops, a second request the platform sees and the policy does not.
    # There is no public switch for it in 3.x.
    session._retry_connection = False
    return session


def fault_and_detail(error: BaseException, platform: str, deadline: float) -> tuple[str, str]:
    """The call line's `fault` and the 502's words for a failure below HTTP, naming the
    platform as the agent knows it. Never the URL, host or port (the agent has no use for
    them, and a query string may carry what the agent would not have logged) or a
    credential: no exception's text is used at all, since the event loop's connect error
    reads `Connect call failed ('10.0.0.7', 8443)`; the words are the gateway's own."""
    if isinstance(error, TimeoutError | aiohttp.ServerTimeoutError):
        return "timeout", f"{platform} did not answer within {deadline:g} s"
    if isinstance(error, aiohttp.ClientConnectorCertificateError | ssl.SSLError):
        return "tls", f"the TLS handshake with {platform} failed"
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return "dns", f"{platform}'s host name could not be resolved"
    if isinstance(error, aiohttp.ClientConnectorError):
        return "refused", f"could not connect to {platform}: {_connect_words(error.os_error)}"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "reset", f"{platform} closed the connection without an answer"
    if isinstance(error, aiohttp.ClientResponseError):
        return "protocol", f"{platform}'s answer was not valid HTTP"
    if isinstance(error, aiohttp.ClientOSError | ConnectionError):
        return "reset", f"the connection to {platform} failed mid-request"
    return "network", f"the call to {platform} could not be completed ({type(error).__name__})"


#: A failed connect's plain words, by errno; any other is only "the connection failed".
_CONNECT_WORDS = {
    errno.ECONNREFUSED: "the connection was refused",
    errno.ETIMEDOUT: "the connection timed out",
    errno.EHOSTUNREACH: "the host is unreachable",
    errno.ENETUNREACH: "the network is unreachable",
    errno.ECONNRESET: "the connection was reset",
}


def _connect_words(error: OSError) -> str:
    return _CONNECT_WORDS.get(error.errno or 0, "the connection failed")
