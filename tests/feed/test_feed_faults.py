"""Faults around the feed: a client that never reads, a server that dies and comes back, a
restarted server with a persisted open verdict, and the client's resync without duplicates."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.client import ConnectionLost, FeedClient, FeedRefused
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.policy import AgentPolicy
from tests.feed.feedkit import OPERATOR, VIEWER, call, client, receive, trip


async def _stalled_socket(port: int) -> socket.socket:
    """A client socket with a tiny receive buffer, so an unread stream backs up quickly."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def test_a_client_that_never_reads_blocks_nobody_and_resyncs_when_it_reads(
    engine: Engine,
) -> None:
    async with serve_feed(
        engine,
        port=0,
        viewer_token=VIEWER,
        operator_token=OPERATOR,
        client_buffer_bytes=32 * 1024,
        max_batch=50,
    ) as feed:
        sock = await _stalled_socket(feed.port)
        async with (
            client(feed.url, sock=sock, max_queue=1) as stalled,
            client(feed.url) as reader,
        ):
            first = await receive(reader)
            assert isinstance(first, p.SnapshotMessage)
            seen_seq = first.seq
            resyncs = 0

            async def read_along() -> None:
                nonlocal seen_seq, resyncs
                while seen_seq < target:
                    message = await receive(reader)
                    if isinstance(message, p.SnapshotMessage):
                        resyncs += 1
                        seen_seq = message.seq
                        continue
                    events = [message.event] if isinstance(message, p.EventMessage) else []
                    if isinstance(message, p.EventsMessage):
                        events = message.events
                    for event in events:
                        assert event.seq == seen_seq + 1, "a gap or a duplicate without resync"
                        seen_seq = event.seq

            # The engine writes 20,000 events in bursts; the call path never waits for the feed.
            started = time.perf_counter()
            for _ in range(100):
                for _ in range(200):
                    call(engine, "agent-1")
                await asyncio.sleep(0)
            emitting = time.perf_counter() - started
            target = engine.seq
            await asyncio.wait_for(read_along(), 15)
            assert seen_seq == target
            assert emitting < 10

            [slow] = [c for c in feed._clients if c.ws.remote_address[1] == sock.getsockname()[1]]
            assert slow.needs_snapshot or slow.snapshots >= 2, (
                "the stalled client never fell behind"
            )
            assert slow.buffered <= 32 * 1024 + 200_000

            # It reads again: stale frames first perhaps, then a fresh snapshot, then events.
            call(engine, "agent-1")
            final = engine.seq
            got_snapshot_at = None
            async with asyncio.timeout(15):
                while True:
                    message = await receive(stalled)
                    if isinstance(message, p.SnapshotMessage) and message.seq > first.seq:
                        got_snapshot_at = message.seq
                    last = getattr(message, "seq", None)
                    if got_snapshot_at is not None and last == final:
                        break
            assert got_snapshot_at is not None
            assert slow.snapshots >= 2


async def test_a_restarted_server_reports_a_persisted_open_verdict(tmp_path) -> None:
    clock = ManualClock()
    first = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path)
    async with serve_feed(first, port=0, viewer_token=VIEWER, operator_token=OPERATOR):
        trip(first, "agent-1")
        before = first.seq
    first.close()

    clock.advance(10)
    second = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path)
    try:
        second.restore()
        async with (
            serve_feed(second, port=0, viewer_token=VIEWER, operator_token=OPERATOR) as feed,
            client(feed.url) as ws,
        ):
            snap = await receive(ws)
        [breaker] = snap.breakers
        assert (breaker.key, breaker.state, breaker.count) == ("agent-1", "open", 3)
        assert breaker.retry_after_seconds == 290.0
        assert breaker.trip_cause == "auth_failure"
        assert snap.seq > before  # the restored line follows the old run's seqs
    finally:
        second.close()


async def test_the_client_survives_a_server_that_dies_and_comes_back(engine: Engine) -> None:
    async with serve_feed(engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR) as feed:
        port = feed.port
        url = feed.url
        feed_client = FeedClient(url, VIEWER, min_backoff=0.05, max_backoff=0.2)
        stream = feed_client.messages()
        snap = await anext(stream)
        assert isinstance(snap, p.SnapshotMessage)
        call(engine, "agent-1")
        event = await anext(stream)
        assert isinstance(event, p.EventMessage)
        assert feed_client.connected
    # The server is gone: the client says so, and keeps trying.
    lost = await asyncio.wait_for(anext(stream), 5)
    assert isinstance(lost, ConnectionLost)
    assert not feed_client.connected
    call(engine, "agent-1")  # happens while nobody is watching
    async with serve_feed(engine, port=port, viewer_token=VIEWER, operator_token=OPERATOR):
        async with asyncio.timeout(10):
            message = await anext(stream)
            while isinstance(message, ConnectionLost):
                message = await anext(stream)
        assert isinstance(message, p.SnapshotMessage)
        assert message.seq == engine.seq
        assert message.breakers[0].count == 0
        call(engine, "agent-1")
        after = await asyncio.wait_for(anext(stream), 5)
        assert isinstance(after, p.EventMessage)
        assert after.seq == message.seq + 1
        await feed_client.close()
        await stream.aclose()


async def test_the_client_drops_events_its_snapshot_already_covers() -> None:
    feed_client = FeedClient("ws://127.0.0.1:1", "t")

    def event(seq: int) -> dict:
        return {"seq": seq, "t": 0.0, "at": "2026-01-01T00:00:00.000Z", "type": "x", "key": "k"}

    snapshot = p.SnapshotMessage(
        seq=10, source="s", policy="agent", at="a", epoch="e", breakers=[]
    ).model_dump_json()
    assert isinstance(feed_client._accept(snapshot), p.SnapshotMessage)
    old = p.encode_events([{**event(9), "agent": None}])
    assert feed_client._accept(old) is None
    mixed = p.encode_events([{**event(s), "agent": None} for s in (9, 10, 11, 12)])
    trimmed = feed_client._accept(mixed)
    assert [e.seq for e in trimmed.events] == [11, 12]
    assert feed_client._accept(p.encode_events([{**event(12), "agent": None}])) is None
    fresh = feed_client._accept(p.encode_events([{**event(13), "agent": None}]))
    assert fresh.seq == 13
    # A new snapshot (a restarted engine without a state dir) starts the count over.
    restarted = p.SnapshotMessage(seq=2, source="s", policy="agent", at="a", epoch="e", breakers=[])
    feed_client._accept(restarted.model_dump_json())
    assert feed_client._accept(p.encode_events([{**event(3), "agent": None}])).seq == 3


async def test_the_client_stops_on_a_refused_token(feed) -> None:
    feed_client = FeedClient(feed.url, "wrong", min_backoff=0.01)
    stream = feed_client.messages()
    try:
        await anext(stream)
    except FeedRefused as refused:
        assert "401" in str(refused)
    else:
        raise AssertionError("a refused token must end the stream")
    finally:
        with contextlib.suppress(Exception):
            await stream.aclose()


async def test_the_client_refuses_another_protocol_version() -> None:
    from breakerdeck.engine.feed.client import FeedProtocolError

    feed_client = FeedClient("ws://127.0.0.1:1", "t")
    bad = '{"type": "snapshot", "version": 2, "seq": 1}'
    try:
        feed_client._accept(bad)
    except p.ProtocolError as error:
        assert error.code == "unsupported_version"
    else:
        raise AssertionError("version 2 must be refused")
    assert FeedProtocolError


def test_a_server_from_before_revisions_is_still_read_as_version_1_revision_1() -> None:
    snap = p.parse_server_message(
        '{"type": "snapshot", "version": 1, "seq": 4, "source": "old", "policy": "agent",'
        ' "at": "2026-01-01T00:00:00.000Z", "epoch": "2026-01-01T00:00:00.000Z",'
        ' "breakers": []}'
    )
    event = p.parse_server_message(
        '{"type": "event", "seq": 5, "event": {"seq": 5, "t": 1.0,'
        ' "at": "2026-01-01T00:00:01.000Z", "type": "call.completed", "key": "a",'
        ' "agent": "a", "outcome": "success"}}'
    )
    assert isinstance(snap, p.SnapshotMessage) and snap.revision == 1
    assert isinstance(event, p.EventMessage) and event.event.view is None
    assert event.event.fields == {"outcome": "success"}


async def test_operator_requests_through_the_client(engine: Engine, feed) -> None:
    trip(engine, "agent-1")
    feed_client = FeedClient(feed.url, OPERATOR)
    stream = feed_client.messages()

    async def pump() -> None:
        async for _ in stream:
            pass

    await anext(stream)
    reader = asyncio.create_task(pump())
    try:
        ack = await feed_client.reset("agent-1", "fixed the vault", actor="bob")
        assert ack.seq is not None
        assert engine.view("agent-1").state == "closed"
        try:
            await feed_client.reset("ghost")
        except Exception as error:
            assert "unknown_key" in str(error)
        else:
            raise AssertionError("an unknown key must fail")
    finally:
        await feed_client.close()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
