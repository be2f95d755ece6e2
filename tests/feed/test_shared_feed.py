"""The feed of a replica that shares its breakers through Redis (DESIGN, "Replicas"): the shared
store's health in the snapshot, a loss and a return pushed to connected clients, and other
replicas' transitions shown with their origin.

Every replica is a real `Engine` with a `SharedStore` on the real `redis-server` the suite starts
(killed and started again on its port for a loss); its feed is served on loopback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine import shared
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.client import ConnectionLost, FeedClient
from breakerdeck.engine.feed.server import FeedServer, serve_feed
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.shared import SharedStore
from tests.feed.feedkit import OPERATOR, VIEWER, client, events_until, receive, request
from tests.redis_server import RedisServer
from tests.waiting import BOUND_SECONDS, eventually

AGENT = "billing-assistant"
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")


#: A loss is noticed by the store within its listener's wait, then by the feed within a second.
class Replicas:
    """Engines on one manual clock, each with its own `SharedStore` on `url`."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.clock = ManualClock()
        self.engines: list[Engine] = []

    def engine(
        self, name: str, url: str | None = None, wall: Callable[[], float] = time.time
    ) -> Engine:
        """`wall`: the replica's real wall clock, the one checked against Redis's."""
        engine = Engine(
            AgentPolicy(),
            clock=self.clock,
            # A loaded round trip is no loss.
            shared=SharedStore(url or self.url, timeout=5.0, clock=wall),
            instance=name,
            state_dir=self.tmp_path / name,
        )
        engine.restore()
        self.engines.append(engine)
        return engine


@pytest.fixture
def replicas(session_redis: RedisServer, tmp_path: Path) -> Iterator[Replicas]:
    made = Replicas(session_redis.url, tmp_path)
    yield made
    for engine in made.engines:
        engine.close()


@asynccontextmanager
async def served(engine: Engine, name: str) -> AsyncIterator[FeedServer]:
    async with serve_feed(
        engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, source_name=name
    ) as feed:
        yield feed


def fail(engine: Engine, times: int = 1) -> None:
    for _ in range(times):
        call = engine.enter(AGENT, AGENT, "payments", "charge", 30.0)
        if engine.admit(call, AgentPolicy().probe_lease()).allowed:
            engine.complete(call, UPSTREAM, "refused", 502)


async def snapshot_where(ws, check: Callable[[p.SnapshotMessage], bool]) -> p.SnapshotMessage:
    """The next snapshot `check` accepts, skipping events (and snapshots it does not)."""
    async with asyncio.timeout(BOUND_SECONDS):
        while True:
            message = await receive(ws, BOUND_SECONDS)
            if isinstance(message, p.SnapshotMessage) and check(message):
                return message


def lost(snap: p.SnapshotMessage) -> bool:
    return snap.shared_store == "lost"


def answering(snap: p.SnapshotMessage) -> bool:
    return snap.shared_store == "ok"


# -- the snapshot says it ----------------------------------------------------------------------


async def test_without_a_shared_store_the_snapshot_says_none(engine: Engine, feed) -> None:
    async with client(feed.url) as ws:
        snap = await receive(ws)
    assert (snap.shared_store, snap.shared_store_reason) == (None, None)
    assert snap.revision == p.PROTOCOL_REVISION >= 3


async def test_a_replica_whose_store_answers_says_ok(replicas: Replicas) -> None:
    async with served(replicas.engine("a"), "replica-a") as feed, client(feed.url) as ws:
        snap = await receive(ws)
    assert (snap.shared_store, snap.shared_store_reason) == ("ok", None)


async def test_a_replica_started_with_its_store_down_says_lost_and_why(tmp_path: Path) -> None:
    replicas = Replicas("redis://127.0.0.1:1/0", tmp_path)  # nothing listens on port 1
    try:
        async with served(replicas.engine("a"), "replica-a") as feed, client(feed.url) as ws:
            snap = await receive(ws)
    finally:
        replicas.engines[0].close()
    assert snap.shared_store == "lost"
    assert snap.shared_store_reason is not None
    assert snap.shared_store_reason.startswith("127.0.0.1:1/0: ")


async def test_a_replica_whose_clock_is_off_says_so_while_its_store_answers(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared, "CLOCK_CHECK_SECONDS", 0.05)
    offset = [3600.0]
    engine = replicas.engine("a", wall=lambda: time.time() + offset[0])
    async with served(engine, "replica-a") as feed, client(feed.url) as ws:
        snap = await receive(ws)
        assert snap.shared_store == "ok"
        assert "3600.0 s ahead of the shared store's" in (snap.shared_store_reason or "")
        offset[0] = 0.0
        right = await snapshot_where(ws, lambda snap: snap.shared_store_reason is None)
    assert right.shared_store == "ok"


# -- a change reaches connected clients --------------------------------------------------------


async def test_a_lost_store_reaches_a_connected_client_with_the_reason_and_so_does_its_return(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    replicas = Replicas(redis_server.url, tmp_path)
    try:
        engine = replicas.engine("a")
        async with served(engine, "replica-a") as feed, client(feed.url) as ws:
            assert answering(await receive(ws))
            redis_server.kill()
            gone = await snapshot_where(ws, lost)
            assert gone.shared_store_reason == engine.shared_lost
            assert f"127.0.0.1:{redis_server.port}/0" in (gone.shared_store_reason or "")
            redis_server.start()
            back = await snapshot_where(ws, answering)
    finally:
        for made in replicas.engines:
            made.close()
    assert back.shared_store_reason is None


async def test_a_client_of_the_feed_reads_the_change_without_losing_its_connection(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The change comes as a snapshot, which every client of version 1 applies in place: no
    reconnect, no stale mark, and events go on after it."""
    replicas = Replicas(redis_server.url, tmp_path)
    try:
        engine = replicas.engine("a")
        async with served(engine, "replica-a") as feed:
            reader = FeedClient(feed.url, VIEWER)
            seen: list[object] = []
            async with asyncio.timeout(BOUND_SECONDS):
                async for message in reader:
                    seen.append(message)
                    if len(seen) == 1:
                        redis_server.kill()
                    elif isinstance(message, p.SnapshotMessage) and lost(message):
                        fail(engine)  # counted alone while the store is lost
                    elif isinstance(message, p.EventMessage | p.EventsMessage):
                        break
            await reader.close()
    finally:
        for made in replicas.engines:
            made.close()
    assert not any(isinstance(message, ConnectionLost) for message in seen)
    snapshots = [m for m in seen if isinstance(m, p.SnapshotMessage)]
    assert [s.shared_store for s in snapshots] == ["ok", "lost"]


# -- what other replicas did -------------------------------------------------------------------


async def test_another_replicas_trip_reaches_this_feed_with_its_origin_and_no_cause_seq(
    replicas: Replicas,
) -> None:
    a, b = replicas.engine("a"), replicas.engine("b")
    async with served(b, "replica-b") as feed, client(feed.url) as ws:
        await receive(ws)
        fail(a, 5)
        await eventually(lambda: b.view(AGENT).state == "open", "the trip reaching replica b")
        got = await events_until(ws, b.seq)
    [tripped] = [event for event in got if event.type == ev.TRIPPED]
    assert tripped.fields == {
        "failure_class": "upstream_failure",
        "count": 5,
        "cooldown_seconds": 300.0,
        "origin": "a",
    }
    assert tripped.view is not None and tripped.view.state == "open"


async def test_a_reset_over_one_replicas_feed_reaches_the_other_feeds_audited_once(
    replicas: Replicas,
) -> None:
    a, b, c = (replicas.engine(name) for name in "abc")
    fail(a, 5)
    async with (
        served(a, "replica-a") as fa,
        served(c, "replica-c") as fc,
        client(fa.url, OPERATOR) as wa,
        client(fc.url) as wc,
    ):
        await receive(wa)
        await receive(wc)
        ack = await request(wa, type="reset", key=AGENT, request_id="r1")
        assert isinstance(ack, p.AckMessage)
        resets: list[p.EventRecord] = []
        async with asyncio.timeout(BOUND_SECONDS):
            while not resets:
                message = await receive(wc)
                if isinstance(message, p.EventMessage):
                    resets = [message.event] if message.event.type == ev.RESET else []
                elif isinstance(message, p.EventsMessage):
                    resets = [event for event in message.events if event.type == ev.RESET]
    assert resets[0].fields["origin"] == "a"
    assert resets[0].fields["actor"] == "remote:operator"
    assert resets[0].view is not None and resets[0].view.state == "closed"
    for engine, rows in ((a, 1), (b, 0), (c, 0)):
        assert engine.audit is not None and engine.audit.flush(5)
        assert len(engine.audit.query(key=AGENT, types=[ev.RESET])) == rows
