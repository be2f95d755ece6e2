"""Serve an engine's breakers over a websocket: a snapshot, then every event in order.

Embedding in a service that already runs an engine (one per replica)::

    from breakerdeck.engine.feed.server import serve_feed

    async def main(engine):
        async with serve_feed(
            engine,
            host="127.0.0.1",
            port=8765,
            viewer_token=read("viewer.token"),
            operator_token=read("operator.token"),
            source_name="payments-gateway-1",
        ) as feed:
            print("feed on", feed.url)
            await run_the_service()  # the feed serves until this block exits

How it moves data (docs/feed.md has the protocol):

- One subscription to the engine feeds one pump task. The pump turns what arrived since its
  last turn into frames (`event` for one, `events` for a batch, at most `max_batch` each),
  serialises each frame once, and hands the same bytes to every connection.
- Each connection has a bounded outbox (`client_buffer_bytes`) and one sender task. A
  connection whose outbox overflows (it stopped reading, or reads slower than the engine
  writes) loses the outbox and gets a fresh snapshot when its sender gets going again: memory
  per client stays bounded, and neither the engine nor the other clients ever wait for it.
- A snapshot is taken under the engine's lock, so its `seq` and its breakers agree; frames
  queued before it are trimmed to events after its `seq`, so nothing is sent twice.
- Requests (`reset`, `mark_fixed`, `hold`, `release`, `mode`) need the operator token.
  Answers go ahead of queued event frames and are never dropped.
- An engine with a shared store (a gateway replica) is looked at once a second: when the store
  is lost or back, every client is resynced with a snapshot, which says so (`shared_store`).

How it holds up against clients that misbehave (`FeedLimits` has the numbers):

- At most `max_connections` connections at once; the next is refused at the handshake with
  HTTP 503, so idle clients cannot use up the process's file descriptors.
- A peer that takes none of the bytes waiting for it for `send_timeout` seconds is not reading:
  its connection is aborted. The websocket keepalive cannot see such a peer (websockets queues
  its ping behind the unsent frames), and it ends the quiet ones that stop answering pings.
- Repeats of the same log line or traceback are logged once per `repeat_log_seconds` with a
  count (engine.feed.repeats), on this module's logger, websockets' and asyncio's (whose
  accept loop logs a traceback per attempt once the process is out of file descriptors).
- Text from clients (keys, actors, reasons, error details) reaches the log only through
  `printable`, so it cannot forge a line or drive the terminal that shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from weakref import WeakKeyDictionary

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State as ConnectionState

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import NotHeld, UnknownKey
from breakerdeck.engine.events import Event
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.auth import OPERATOR, VIEWER, Tokens
from breakerdeck.engine.feed.bus import Missed, Subscription
from breakerdeck.engine.feed.encoding import feed_record, shared_store_health, snapshot
from breakerdeck.engine.feed.limits import FeedLimits
from breakerdeck.engine.feed.outbox import MAX_PENDING_ANSWERS, Client
from breakerdeck.engine.feed.repeats import RepeatFilter
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024
#: Per-connection outbox bound. A client this far behind gets a snapshot instead.
DEFAULT_CLIENT_BUFFER_BYTES = 1024 * 1024
#: Events per `events` frame, so a frame stays well under a client's size limit.
DEFAULT_MAX_BATCH = 500
#: Events the pump may hold before it gives up and resyncs every client from a snapshot.
PUMP_BUFFER_EVENTS = 100_000
#: How long the pump lets a burst gather after the engine wakes it (see EventBus.get).
PUMP_LINGER_SECONDS = 0.002
#: Seconds a client refused at the connection cap is asked to wait (the Retry-After header).
BUSY_RETRY_AFTER_SECONDS = 5
#: Seconds between looks at the engine's shared store: a loss or a return reaches every
#: client within this (the store notices within its command timeout or its listener's wait).
HEALTH_CHECK_SECONDS = 1.0
#: The loggers whose repeats the feed collapses while it serves (see the module docstring).
_QUIETED_LOGGERS = (__name__, "websockets.server", "asyncio")


class _Refused(Exception):
    """A request the engine would not take as asked: its error code, and its words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class FeedServer:
    """The running feed; `serve_feed` is the way to get one."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str,
        port: int,
        viewer_token: str,
        operator_token: str,
        source_name: str,
        max_message_bytes: int,
        client_buffer_bytes: int,
        max_batch: int,
        limits: FeedLimits,
    ) -> None:
        self._tokens = Tokens(viewer_token, operator_token)
        self.engine = engine
        self.host = host
        self.requested_port = port
        self.source = source_name
        self.max_message_bytes = max_message_bytes
        self.client_buffer_bytes = client_buffer_bytes
        self.max_batch = max(1, max_batch)
        self.limits = limits
        self._roles: WeakKeyDictionary[ServerConnection, p.Role] = WeakKeyDictionary()
        self._clients: set[Client] = set()
        self._server: Server | None = None
        self._pump: asyncio.Task[None] | None = None
        self._health: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None
        #: Set while the pump listens to the engine (`_follow`).
        self._unfollow: Callable[[], None] | None = None
        #: Connections refused at the cap, and aborted for not reading.
        self.refused_busy = 0
        self.dropped_stalled = 0
        self._repeats = RepeatFilter(limits.repeat_log_seconds)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._subscription = Subscription(asyncio.get_running_loop(), PUMP_BUFFER_EVENTS)
        self._pump = asyncio.create_task(self._run_pump(), name="feed-pump")
        if shared_store_health(self.engine)[0] is not None:
            self._health = asyncio.create_task(self._watch_health(), name="feed-health")
        for name in _QUIETED_LOGGERS:
            logging.getLogger(name).addFilter(self._repeats)
        limits = self.limits
        self._server = await serve(
            self._handle,
            self.host,
            self.requested_port,
            process_request=self._authenticate,
            max_size=self.max_message_bytes,
            # Frames go out as the same bytes to everyone; per-connection compression would
            # cost a deflate per client per frame.
            compression=None,
            server_header=None,
            ping_interval=limits.ping_interval,
            ping_timeout=limits.ping_timeout,
            write_limit=limits.write_limit,
            open_timeout=limits.open_timeout,
            close_timeout=limits.close_timeout,
        )

    async def stop(self) -> None:
        try:
            await self._stop()
        finally:
            for name in _QUIETED_LOGGERS:
                logging.getLogger(name).removeFilter(self._repeats)

    async def _stop(self) -> None:
        if self._unfollow is not None:
            self._unfollow()
            self._unfollow = None
        if self._subscription is not None:
            self._subscription.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        for task in (self._pump, self._health):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    @property
    def port(self) -> int:
        assert self._server is not None, "the feed is not started"
        # `sockets` is a tuple in websockets 17 and an iterable in 15 (which google-adk pins).
        port: int = next(iter(self._server.sockets)).getsockname()[1]
        return port

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"ws://{host}:{self.port}"

    @property
    def client_count(self) -> int:
        return len(self._clients)

    # -- the handshake ---------------------------------------------------------------------

    def _authenticate(self, connection: ServerConnection, request: Request) -> Response | None:
        role = self._tokens.admit(connection, request)
        if isinstance(role, Response):
            return role
        if self._connections() >= self.limits.max_connections:
            return self._busy(connection)
        self._roles[connection] = role
        return None

    def _connections(self) -> int:
        """Open connections plus those admitted whose handshake is still finishing (a
        handshake that failed leaves a closed connection here until it is collected)."""
        admitted = sum(1 for conn in self._roles if conn.state is not ConnectionState.CLOSED)
        return len(self._clients) + admitted

    def _busy(self, connection: ServerConnection) -> Response:
        self.refused_busy += 1
        cap = self.limits.max_connections
        log.warning("feed: at its cap of %d connections; refusing new ones", cap)
        response = connection.respond(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"This feed serves at most {cap} connections at once and has that many: "
            f"try again later.\n",
        )
        response.headers["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
        return response

    # -- one connection --------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        role = self._roles.pop(ws, VIEWER)
        client = Client(ws, role, self.client_buffer_bytes)
        self._clients.add(client)
        self._follow()  # before its snapshot: whatever comes after it reaches the pump
        sender = asyncio.create_task(self._send_loop(client), name="feed-sender")
        peer = _peer(ws)
        log.info("feed: %s connected as %s", peer, role)
        try:
            async for raw in ws:
                if self.engine.sharing:  # a reset is a round trip to the shared store
                    client.answer(await asyncio.to_thread(self._answer, client, raw, peer))
                else:
                    client.answer(self._answer(client, raw, peer))
                # A client that sends requests but never reads the answers is simply not read
                # from any more: TCP pushes back on it, and nobody else notices.
                await client.room.wait()
        except ConnectionClosed as closed:
            if closed.rcvd is not None and closed.rcvd.code == 1009:
                log.info("feed: %s sent a message over the size limit", peer)
        finally:
            self._clients.discard(client)
            self._follow()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await sender
            log.info("feed: %s disconnected (%s)", peer, ws.close_code)

    def _follow(self) -> None:
        """The pump listens to the engine only while someone is connected: with nobody to send
        to, a healthy call on a closed breaker writes no line (the engine's fast path), and a
        client that connects starts from a snapshot anyway."""
        assert self._subscription is not None
        if self._clients and self._unfollow is None:
            self._unfollow = self.engine.subscribe(self._subscription.offer)
        elif not self._clients and self._unfollow is not None:
            self._unfollow()
            self._unfollow = None

    async def _send_loop(self, client: Client) -> None:
        try:
            while True:
                if client.answers and client.snapshots:
                    await self._send(client, client.answers.popleft())
                    if len(client.answers) < MAX_PENDING_ANSWERS:
                        client.room.set()
                elif client.needs_snapshot:
                    seq, frame = self._snapshot_frame(client.role)
                    client.needs_snapshot = False
                    client.after_seq = seq
                    # Whatever got queued while this was pending is trimmed below.
                    await self._send(client, frame)
                    client.snapshots += 1
                elif client.frames:
                    frame, first, last, records = client.frames.popleft()
                    client.buffered -= len(frame)
                    if last <= client.after_seq:
                        continue
                    if first <= client.after_seq:
                        later = [r for r in records if r["seq"] > client.after_seq]
                        frame = p.encode_events(later)
                    client.after_seq = last
                    await self._send(client, frame)
                else:
                    client.wake.clear()
                    await client.wake.wait()
        except ConnectionClosed:
            pass
        finally:
            if client.watchdog is not None:
                client.watchdog.cancel()

    async def _send(self, client: Client, frame: bytes) -> None:
        """Hand `frame` to the connection, under a watchdog.

        websockets waits here while more than `write_limit` bytes are queued for the peer, and
        would wait forever for one that never reads (even its close handshake and keepalive
        ping queue behind those bytes). So a timer checks that the queue shrinks; when it has
        not for `send_timeout` seconds the connection is aborted, which ends this wait.
        """
        transport = client.ws.transport
        backlog = transport.get_write_buffer_size() + len(frame)
        loop = asyncio.get_running_loop()
        client.watchdog = loop.call_later(
            self.limits.send_timeout, self._check_progress, client, backlog
        )
        try:
            await client.ws.send(frame, text=True)
        finally:
            client.watchdog.cancel()
            client.watchdog = None

    def _check_progress(self, client: Client, backlog: int) -> None:
        transport = client.ws.transport
        queued = transport.get_write_buffer_size()
        if queued < backlog:  # slow, but reading: look again later
            client.watchdog = asyncio.get_running_loop().call_later(
                self.limits.send_timeout, self._check_progress, client, queued
            )
            return
        self.dropped_stalled += 1
        log.warning(
            "feed: %s read nothing for %gs with %d bytes waiting; disconnected",
            _peer(client.ws),
            self.limits.send_timeout,
            queued,
        )
        transport.abort()

    # -- requests --------------------------------------------------------------------------

    def _answer(self, client: Client, raw: str | bytes, peer: str) -> bytes:
        try:
            request = p.parse_client_message(raw)
        except p.ProtocolError as error:
            log.info("feed: %s sent a bad message: %s", peer, printable(error.message))
            return p.error_frame(error.code, error.message, error.request_id)
        rid = request.request_id
        if client.role != OPERATOR:
            return p.error_frame(
                p.FORBIDDEN,
                f"{request.type} needs the operator token; this connection has the viewer token",
                rid,
            )
        actor = f"remote:{client.role}" + (f":{request.actor}" if request.actor else "")
        try:
            event = self._write(request, actor)
        except _Refused as refused:
            return p.error_frame(refused.code, str(refused), rid)
        except UnknownKey:
            return p.error_frame(
                p.UNKNOWN_KEY,
                f"no breaker with key {request.key!r} on {self.source}; nothing was changed",
                rid,
            )
        except Exception as error:  # the engine's failure must not end the connection
            # The summary is escaped (an engine error may quote the key); the traceback, which
            # would quote it raw, is for debugging only.
            log.error(
                "feed: %s on %s from %s failed: %s",
                request.type,
                printable(request.key),
                peer,
                printable(repr(error)),
            )
            log.debug("feed: %s failed", request.type, exc_info=error)
            return p.error_frame(p.INTERNAL, f"{request.type} failed: {error}", rid)
        log.warning(
            "feed: %s on %s by %s from %s (reason: %s)",
            request.type,
            printable(request.key),
            printable(actor),
            peer,
            printable(request.reason) or "-",
        )
        return p.encode(p.AckMessage(request_id=rid, seq=event.seq))

    def _write(self, request: p.ClientRequest, actor: str) -> Event:
        """The engine's write a request asks for; a fault of the request that only the engine
        can see (a hold past its `max_hold_seconds`, a release of a breaker not held) is
        `_Refused` with the code a client reads, and nothing is changed."""
        engine, key = self.engine, request.key
        if isinstance(request, p.ResetRequest):
            return engine.reset(key, actor, request.reason or "reset over the live feed")
        if isinstance(request, p.MarkFixedRequest):
            return engine.restore_credential(key, actor)
        if isinstance(request, p.ModeRequest):
            return engine.set_mode(key, request.mode, actor, request.reason)
        if isinstance(request, p.HoldRequest):
            try:
                seconds = request.seconds_within(engine.policy.max_hold_seconds)
            except ValueError as error:
                raise _Refused(p.INVALID, f"invalid hold message: {error}") from None
            return engine.hold(key, actor, request.reason, seconds)
        not_held = _Refused(p.NOT_HELD, f"{key!r} is not held; nothing was changed")
        if engine.view(key).state is not State.HELD:
            raise not_held
        try:
            return engine.release(key, actor, request.reason, close=request.close)
        except NotHeld:  # on replicas: another released it a moment ago
            raise not_held from None

    # -- snapshots and events --------------------------------------------------------------

    def _snapshot_frame(self, role: p.Role | None = None) -> tuple[int, bytes]:
        seq, message = snapshot(self.engine, self.source, role=role)
        return seq, p.encode(message)

    async def _run_pump(self) -> None:
        assert self._subscription is not None
        epoch = self.engine.epoch
        while True:
            got = await self._subscription.get(linger=PUMP_LINGER_SECONDS)
            if isinstance(got, Missed):
                log.warning("feed: fell %d events behind the engine; resyncing", got.count)
                self._resync()
                continue
            if not got:
                if self._subscription.closed:
                    return
                continue
            if not self._clients:
                continue
            for start in range(0, len(got), self.max_batch):
                chunk = [
                    feed_record(event, epoch, self.source)
                    for event in got[start : start + self.max_batch]
                ]
                try:
                    frame = p.encode_events(chunk)
                except (TypeError, ValueError):
                    log.exception("feed: could not encode events %s..", chunk[0]["seq"])
                    for client in self._clients:
                        client.needs_snapshot = True
                        client.wake.set()
                    continue
                first, last = chunk[0]["seq"], chunk[-1]["seq"]
                for client in self._clients:
                    client.offer(frame, first, last, chunk)

    def _resync(self) -> None:
        """Every client's backlog dropped; each gets a fresh snapshot when it can take one."""
        for client in self._clients:
            client.needs_snapshot = True
            client.frames.clear()
            client.buffered = 0
            client.wake.set()

    async def _watch_health(self) -> None:
        """Resync every client when the shared store is lost or comes back, or when what is
        wrong though it answers (the clock) changes. A snapshot says
        so, and it is the one message every client of version 1 applies whenever it comes: a
        new message type would be a bad frame to an older console, costing it a reconnect."""
        engine = self.engine
        answering, warning = engine.shared_lost is None, engine.shared_warning
        while True:
            await asyncio.sleep(HEALTH_CHECK_SECONDS)
            lost = engine.shared_lost
            if (lost is None) == answering and engine.shared_warning == warning:
                continue
            answering, warning = lost is None, engine.shared_warning
            said = "is back" if lost is None else f"is lost ({printable(lost)})"
            if lost is None and warning is not None:
                said = f"answers, but {printable(warning)}"
            log.warning("feed: the shared store %s; resyncing %d clients", said, self.client_count)
            self._resync()


def _peer(ws: ServerConnection) -> str:
    address = ws.remote_address
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


@contextlib.asynccontextmanager
async def serve_feed(
    engine: Engine,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    viewer_token: str,
    operator_token: str,
    source_name: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    client_buffer_bytes: int = DEFAULT_CLIENT_BUFFER_BYTES,
    max_batch: int = DEFAULT_MAX_BATCH,
    limits: FeedLimits | None = None,
) -> AsyncIterator[FeedServer]:
    """Serve `engine`'s feed on `host:port` (port 0 picks a free one) until the block exits.

    `source_name` labels this engine's breakers in every console (default `host:port`).
    `max_message_bytes` bounds what a client may send; a bigger message closes that
    connection with code 1009. `limits` bounds connections, timeouts and repeated log lines
    (`FeedLimits`' defaults when omitted). The engine may run on this loop or another thread.
    """
    feed = FeedServer(
        engine,
        host=host,
        port=port,
        viewer_token=viewer_token,
        operator_token=operator_token,
        source_name=source_name or "",
        max_message_bytes=max_message_bytes,
        client_buffer_bytes=client_buffer_bytes,
        max_batch=max_batch,
        limits=limits or FeedLimits(),
    )
    try:
        # A start that fails (the port is taken) still undoes what it did: the pump, the
        # subscription and the log filters.
        await feed.start()
        if not feed.source:
            feed.source = f"{host}:{feed.port}"
        yield feed
    finally:
        await feed.stop()


__all__ = ["FeedLimits", "FeedServer", "serve_feed"]
