"""Issue 10, item 8: the probe, out for under a second, stays visible; the hint names what the
failures were."""

from __future__ import annotations

from tests.console.conftest import make_app, running, settle
from tests.console.helpers import cards_text


async def half_open_card(world, size: tuple[int, int]) -> str:
    """ava tripped at 12:00:00 and half-open by time alone at 12:05:00: its cards' text."""
    await world.trip_upstream("ava")
    world.clock.advance(300)
    world.engine.poll()
    app = make_app(world.engine)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        return cards_text(app)


async def test_half_open_with_no_call_yet_says_the_next_call_is_the_probe(agent_world):
    text = await half_open_card(agent_world, (80, 24))
    assert "next call is the probe" in text and "probe out" not in text


async def test_a_wide_half_open_card_also_says_since_when(agent_world):
    text = await half_open_card(agent_world, (200, 50))
    assert "next call is the probe" in text and "since 12:05:00" in text


async def test_a_probe_admitted_without_a_line_shows_as_out_since_its_admission(agent_world):
    engine, clock = agent_world.engine, agent_world.clock
    await agent_world.trip_upstream("ava")
    clock.advance(300)
    engine.poll()
    async with running(engine) as (app, pilot):
        clock.advance(69)
        probe = engine.enter("ava", "ava", "payments", "charge", 30)
        assert engine.admit(probe, lease=30).as_probe  # in flight: no line written
        app.tick()
        await settle(pilot)
        assert "probe out since 12:06:09" in cards_text(app)


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
    async with running(agent_world.engine) as (app, _pilot):
        assert "since 12:00:00" in cards_text(app)


async def test_a_refused_connection_is_called_refused_in_the_hint(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, _pilot):
        assert "payments or the path to it is down (refused)" in cards_text(app)
