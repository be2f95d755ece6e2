"""Issue 10, item 8: the probe, out for under a second, stays visible; the hint names what the
failures were."""

from __future__ import annotations

from tests.console.conftest import make_app, settle
from tests.console.helpers import cards_text


async def test_half_open_says_since_when_the_next_call_is_the_probe(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.clock.advance(300)
    agent_world.engine.poll()
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "probe out since 12:05:00" in cards_text(app)


async def test_a_failed_probe_stays_on_the_card_with_its_time(agent_world):
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        agent_world.clock.advance(300)
        agent_world.engine.poll()
        await agent_world.call("ava", "payments")  # the probe: refused again
        await settle(pilot)
        text = cards_text(app)
        assert "OPEN" in text and "probe failed 12:05:00" in text


async def test_an_open_card_says_since_when_it_is_open(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.clock.advance(42)
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "since 12:00:00" in cards_text(app)


async def test_a_refused_connection_is_called_refused_in_the_hint(agent_world):
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "payments or the path to it is down (refused)" in cards_text(app)
