"""`FeedClient.request` sends hold, release and mode as it sends reset (the console attached
to a remote engine writes through it): a real served engine on a loopback socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.client import FeedClient, FeedRequestError
from tests.feed.feedkit import OPERATOR, call


@pytest.fixture
async def connected(feed) -> AsyncIterator[FeedClient]:
    """An operator's client whose messages are being read (a request's answer comes that way)."""
    feed_client = FeedClient(feed.url, OPERATOR)
    stream = feed_client.messages()
    await anext(stream)  # the snapshot: connected

    async def pump() -> None:
        async for _ in stream:
            pass

    reader = asyncio.create_task(pump())
    yield feed_client
    await feed_client.close()
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader


async def test_a_hold_sent_by_the_client_lands_in_the_served_engine(
    engine: Engine, connected: FeedClient
) -> None:
    call(engine, "agent-1")
    ack = await connected.request(
        "hold", "agent-1", reason="vendor window", actor="bob", duration="30m"
    )
    view = engine.view("agent-1")
    assert (view.state, view.held_by, view.held_reason) == (
        "held",
        "remote:operator:bob",
        "vendor window",
    )
    assert view.held_until == pytest.approx(engine.clock.wall() + 1800)
    [held] = engine.audit.query(types=ev.HELD)
    assert held.seq == ack.seq


async def test_release_and_mode_go_the_same_way(engine: Engine, connected: FeedClient) -> None:
    call(engine, "agent-1")
    await connected.request("hold", "agent-1", reason="window", actor="bob", duration="90s")
    await connected.request("release", "agent-1", actor="bob", close=True)
    assert engine.view("agent-1").state == "closed"
    await connected.request("mode", "agent-1", reason="trial", actor="bob", mode="shadow")
    assert engine.view("agent-1").mode == "shadow"


async def test_the_servers_refusal_comes_back_as_its_code_and_words(
    engine: Engine, connected: FeedClient
) -> None:
    call(engine, "agent-1")
    with pytest.raises(FeedRequestError) as refused:
        await connected.request("release", "agent-1", actor="bob")
    assert refused.value.code == p.NOT_HELD
    with pytest.raises(FeedRequestError) as too_long:
        await connected.request("hold", "agent-1", reason="w", actor="bob", duration="25h")
    assert too_long.value.code == p.INVALID and "max_hold_seconds" in too_long.value.message
    assert engine.view("agent-1").state == "closed"


async def test_a_request_it_cannot_send_as_given_is_refused_before_the_wire(
    engine: Engine, connected: FeedClient
) -> None:
    call(engine, "agent-1")
    seq = engine.seq
    with pytest.raises(FeedRequestError) as refused:
        await connected.request("hold", "agent-1", reason=" ", actor="bob", duration="30m")
    assert refused.value.code == p.INVALID and "reason" in refused.value.message
    assert engine.seq == seq
