"""The HTTP doors' connections (`gateway`, `mcp --http`): uvicorn's httptools protocol,
bounded for strangers.

The gateway is a shared service, and everything here happens before any token is checked, so
anyone who reaches the port can try it; so is `mcp --http` (300 unfinished heads held it past
15 s, and 1,100 of them under `ulimit -n 1024` locked out a host with the right token and
wrote 661 KB of tracebacks). uvicorn with httptools bounds none of it: a request
head of any size (20 heads of 50 MB took a gateway to 1 GB), any number of headers, any time to
send a head (a byte every few seconds holds a connection for ever), and any number of
connections from one address (a thousand half-sent heads under `ulimit -n 1024` locked every
other client out). This subclass adds those bounds and nothing else (DESIGN, "A shared
service"); the parsing, flow control and the ASGI cycle stay uvicorn's. Both doors' tables
take the same keys (`front.options.StrangerBounds`).

It also gives the app one thing ASGI lacks: `scope["extensions"]["breakerdeck.connection"]`,
through which a relayed stream learns at once that its agent left (`watch`) and cuts a
connection whose agent stopped reading (`abort`), without a task per request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from breakerdeck.engine.feed.repeats import RepeatFilter
from breakerdeck.engine.front.options import ClientLimits, DoorTable
from breakerdeck.engine.front.serving import split_address

log = logging.getLogger(__name__)

EXTENSION = "breakerdeck.connection"
#: How long a refused connection is kept open, its input read and dropped, after its answer:
#: closing at once with unread input makes the kernel reset it, and the client loses the
#: answer it was about to read.
LINGER_SECONDS = 2.0
#: How often slow heads are looked for: a head may take up to this much longer than its bound.
SWEEP_SECONDS = 0.25


#: File descriptors a door keeps back from its clients' connections, besides its upstreams':
#: the feed, the state dir, Redis, logs.
SPARE_FDS = 64


def door_config(
    app: Any,
    listen: str,
    table: DoorTable,
    *,
    reserved: int,
    drain_seconds: float,
    backlog: int,
    say: Callable[[str], None],
) -> uvicorn.Config:
    """uvicorn as every HTTP door runs it: the bounded httptools protocol (its own `Clients`,
    the connection cap within the file descriptors left after `reserved`), no websocket
    upgrades (refused 400 by the protocol), uvicorn's records through the door's one handler
    (`engine.front.logs`), no headers of its own or trusted from a client, TLS from the
    table's `tls_cert` and `tls_key`, and the drain's bound in whole seconds (`front.drain`)."""
    host, port = split_address(listen)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=bounded_protocol(Clients(table.limits(reserved, say))),
        ws="none",
        log_config=None,
        lifespan="on",
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=math.ceil(drain_seconds) or 1,
        backlog=backlog,
        ssl_certfile=table.tls_cert,
        ssl_keyfile=table.tls_key,
    )


@dataclass(slots=True)
class Clients:
    """The connections one server holds, by source address (shared by its protocols), and the
    once-a-second sweep that closes heads sent too slowly (one timer for the server, not one
    per request)."""

    limits: ClientLimits
    total: int = 0
    by_address: Counter[str] = field(default_factory=Counter)
    #: A thousand bad requests are one line and a count, not a thousand lines.
    repeats: RepeatFilter = field(default_factory=lambda: RepeatFilter(interval=10.0))
    open: set[BoundedProtocol] = field(default_factory=set)
    _sweeping: asyncio.TimerHandle | None = None

    def complain(self, message: str) -> None:
        if log.isEnabledFor(logging.WARNING):
            record = log.makeRecord(log.name, logging.WARNING, __file__, 0, message, (), None)
            if self.repeats.filter(record):
                log.handle(record)

    def admit(self, connection: BoundedProtocol, address: str) -> str | None:
        """Count a new connection in, or name the bound it would cross."""
        if self.total >= self.limits.connections:
            return "max_client_connections"
        if self.by_address[address] >= self.limits.connections_per_address:
            return "max_client_connections_per_address"
        self.total += 1
        self.by_address[address] += 1
        self.open.add(connection)
        if self._sweeping is None:
            self._sweeping = connection.loop.call_later(SWEEP_SECONDS, self._sweep, connection.loop)
        return None

    def leave(self, connection: BoundedProtocol, address: str) -> None:
        self.total -= 1
        left = self.by_address[address] - 1
        if left:
            self.by_address[address] = left
        else:
            del self.by_address[address]
        self.open.discard(connection)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for connection in [c for c in self.open if c.head_overdue(now)]:
            connection.head_timed_out()
        self._sweeping = loop.call_later(SWEEP_SECONDS, self._sweep, loop) if self.open else None


def bounded_protocol(clients: Clients) -> type[HttpToolsProtocol]:
    """A protocol class for one server (uvicorn's `http=`), counting into `clients`."""
    return type("BoundedProtocol", (BoundedProtocol,), {"clients": clients})


class BoundedProtocol(HttpToolsProtocol):
    clients: ClassVar[Clients]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None
        #: While a head is being read (or awaited on a fresh connection, from its start):
        #: since when, and how many bytes it has taken.
        self._head_open = True
        self._head_since = 0.0
        self._head_size = 0
        self._read_size = 0
        self._on_lost: Callable[[], None] | None = None
        self._refused = False

    # -- connections -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) else "local"
        refused = self.clients.admit(self, address)
        if refused is not None:
            self._refused = True
            self.clients.complain(f"refused a connection: {refused} reached")
            transport.write(_answer(503, {"error": "too_many_connections", "limit": refused}))
            transport.close()
            return
        self._address = address
        self._head_since = self.loop.time()
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is None:
            return  # refused in connection_made: never counted, never set up
        self.clients.leave(self, self._address)
        self._address = None
        on_lost, self._on_lost = self._on_lost, None
        super().connection_lost(exc)
        if on_lost is not None:
            on_lost()

    def watch(self, on_lost: Callable[[], None] | None) -> None:
        """Call `on_lost` once if the agent's connection goes (None stops watching)."""
        self._on_lost = on_lost

    def abort(self) -> None:
        """Drop the agent's connection now: its response cannot be finished."""
        if self.cycle is not None:
            self.cycle.disconnected = True
        self.transport.abort()

    @property
    def write_paused(self) -> bool:
        """Whether the agent has stopped taking what is written to it (flow control)."""
        return bool(self.flow.write_paused)

    # -- the request head ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered and closing: what is still queued is not read
        self._unset_keepalive_if_required()
        self._read_size = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if not self._refused:  # else a callback below refused it and stopped the parser
                self._refuse(400, "bad_request", "refused a malformed request")
            return
        if not self._head_open:
            return
        self._head_size += len(data)
        if self._head_size > self.clients.limits.head_bytes:
            self._refuse(431, "request_head_too_large", "refused a request head over its size")

    def on_message_begin(self) -> None:
        """A head starts: its time and size bounds count from its first byte (between
        requests, uvicorn's keep-alive timeout closes an idle connection)."""
        super().on_message_begin()
        self._head_open = True
        self._head_since = self.loop.time()
        self._head_size = 0

    def on_headers_complete(self) -> None:
        self._head_open = False
        limits = self.clients.limits
        if self._head_size + self._read_size > limits.head_bytes and self._parsed_size() > (
            limits.head_bytes
        ):
            # The whole head came in this read, too fast for the check after each read.
            self._refuse(431, "request_head_too_large", "refused a request head over its size")
            raise _Stop
        if len(self.headers) > limits.header_count:
            # Bounded in memory meanwhile by the head's size, checked as each read arrives.
            self._refuse(431, "too_many_headers", "refused a request head over the header bound")
            raise _Stop
        if self.parser.should_upgrade():
            self._refuse(400, "upgrade_not_supported", "refused an upgrade request")
            raise _Stop
        super().on_headers_complete()
        # A top-level scope key rather than `extensions`: no dict made per request.
        self.scope[EXTENSION] = self  # type: ignore[literal-required]

    def on_response_complete(self) -> None:
        """An answer sent before its request's body was read (a refusal, a 413): the rest of
        the body is never read, so a stranger cannot hold the connection by trickling it."""
        if self.cycle is not None and self.cycle.more_body:
            self._linger()
            return
        super().on_response_complete()

    def _parsed_size(self) -> int:
        """The head's size as parsed: the target and each header line (only asked of heads
        that may be too big, since it walks every header)."""
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def head_overdue(self, now: float) -> bool:
        return (
            self._head_open
            and not self._refused
            and now - self._head_since > self.clients.limits.head_seconds
        )

    def head_timed_out(self) -> None:
        if self.transport.is_closing():
            return
        if self._head_size:
            self._refuse(408, "request_timeout", "closed a connection slow to send its head")
        elif self.cycle is None or self.cycle.response_complete:
            self.transport.close()  # nothing was sent: nobody to answer

    def _refuse(self, status: int, error: str, what: str) -> None:
        """Answer a head the gateway will not read, and close. Mid-response (a pipelined
        request behind one still answering) there is no room for an answer: just close."""
        self.clients.complain(f"{what} ({status} {error})")
        self._refused = True
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()
            return
        self.transport.write(_answer(status, {"error": error}))
        self._linger()

    def _linger(self) -> None:
        """Finish writing, then read and drop input for a while before closing: closing with
        unread input makes the kernel reset the connection, and the client lose its answer."""
        self._refused = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class _Stop(Exception):
    """Raised from a parser callback to stop parsing a refused head."""


def _answer(status: int, body: dict[str, str]) -> bytes:
    content = json.dumps(body).encode()
    reason = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, reason.get(status, b"Service Unavailable")),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(content),
            b"connection: close\r\n\r\n",
            content,
        ]
    )
