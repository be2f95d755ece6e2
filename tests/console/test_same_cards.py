"""`watch` and `demo` show the same cards for the same history.

One engine on a manual clock is driven through the real gateway; the in-process console
(`demo`'s source) and a watching console (over the real feed on loopback, its local clock
pinned to the engine's) read it at the same time, both at 80x24. After each step of the
story both card lists must read alike, line for line.
"""

from __future__ import annotations

from types import SimpleNamespace

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.remote_source import RemoteSource
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.fixtures.faults import Fault, FaultKind
from tests.console.conftest import OPERATOR, AgentWorld, make_app
from tests.console.helpers import cards_text

TOKEN = "same-cards-operator-token"
SIZE = (80, 24)


async def _settled(pilots, apps, world: AgentWorld) -> tuple[str, str]:
    """Both card lists once the watching console has read every event the engine wrote."""
    demo, watch = apps
    for _ in range(250):
        for pilot in pilots:
            await pilot.pause(0.02)
        if watch.board.seen_seq >= world.engine.seq and demo.board.seen_seq >= world.engine.seq:
            break
    else:
        raise AssertionError("the watching console never caught up with the engine")
    for pilot in pilots:
        await pilot.pause(0.05)
    return cards_text(demo), cards_text(watch)


async def test_watch_and_demo_show_the_same_cards_through_trips_probes_and_the_window(
    agent_world, monkeypatch
):
    from breakerdeck.console import remote_source

    world = agent_world
    monkeypatch.setattr(remote_source, "time", SimpleNamespace(time=world.clock.wall))
    await world.call("ava", "crm")
    await world.call("bob", "payments")
    async with serve_feed(
        world.engine, port=0, viewer_token="v" * 24, operator_token=TOKEN, source_name="eng"
    ) as feed:
        source = RemoteSource([feed.url], tokens=[TOKEN], min_backoff=0.05, max_backoff=0.2)
        assert await source.prime(timeout=5) == []
        watch = BreakerdeckApp(source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0)
        demo = make_app(world.engine)
        apps = (demo, watch)
        async with demo.run_test(size=SIZE) as p1, watch.run_test(size=SIZE) as p2:
            pilots = (p1, p2)

            async def same() -> str:
                shown_demo, shown_watch = await _settled(pilots, apps, world)
                assert shown_watch == shown_demo
                return shown_demo

            # Two upstream failures, then the agent policy's window passes: the next failure
            # starts the count again (a second state machine kept counting to 3).
            world.platforms["payments"].set_fault(Fault(FaultKind.REFUSED))
            await world.call("bob", "payments", 2)
            await same()
            world.clock.advance(700)
            await world.call("bob", "payments")
            assert "1 failure" in await same()

            # A trip, its cooldown, a probe that fails and reopens, then one that recovers.
            await world.trip_auth("ava")
            await world.call("ava", "crm")  # refused while open
            assert "OPEN" in await same()
            world.clock.advance(301)
            world.engine.poll()
            await same()
            await world.call("ava", "crm")  # the probe: the credential is still bad
            await same()
            world.heal("crm")
            world.clock.advance(700)
            world.engine.poll()
            await same()
            await world.call("ava", "crm")
            text = await same()
            assert "CLOSED" in text and "ava" in text
