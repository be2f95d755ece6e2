"""Issue 22: a lost source's `STALE since … (Ns ago)` ticks with the clock, also when no card
is open (it froze until a key was pressed)."""

from __future__ import annotations

from tests.console.conftest import make_app, settle
from tests.console.helpers import screen_text


async def test_a_stale_cards_age_ticks_with_nothing_open(agent_world):
    await agent_world.call("ava", "crm")
    app = make_app(agent_world.engine)
    app.source.stale_since = agent_world.clock.wall() - 5
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "(5s ago)" in screen_text(app)
        agent_world.clock.advance(10)
        app.tick()
        await settle(pilot)
        assert "(15s ago)" in screen_text(app)
