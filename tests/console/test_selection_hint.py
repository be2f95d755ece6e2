"""A selection the operator cannot see is named on the status line: the selection stays on its
breaker through re-sorts (issue 10), so after trips push it off screen `r` looks dead unless
the screen says where the keys would act."""

from __future__ import annotations

from breakerdeck.console.widgets.cards import CardList
from tests.console.conftest import make_app, settle
from tests.console.helpers import status_text
from tests.console.test_selection import AGENTS
from tests.console.test_selection import many_cards as closed_cards


async def test_a_selection_pushed_off_screen_by_trips_is_named_on_the_status_line(agent_world):
    await closed_cards(agent_world)
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        cards = app.screen.query_one(CardList)
        assert cards.selected == ("agent-00", "agent-00")
        assert "off screen" not in status_text(app)
        for agent in AGENTS[4:]:  # eight trips sort above the selected card
            await agent_world.trip_upstream(agent)
        await settle(pilot)
        assert cards.selected == ("agent-00", "agent-00")
        assert "▶ agent-00 (closed) is off screen: j selects the top card shown" in status_text(app)


async def test_j_brings_the_selection_back_on_screen_and_the_hint_goes(agent_world):
    await closed_cards(agent_world)
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for agent in AGENTS[4:]:
            await agent_world.trip_upstream(agent)
        await settle(pilot)
        await pilot.press("j")
        await settle(pilot)
        cards = app.screen.query_one(CardList)
        assert cards.selected_index == 0 and cards.selected_card.state == "open"
        assert "off screen" not in status_text(app)


async def test_a_selection_on_screen_adds_nothing_to_the_status_line(agent_world):
    await closed_cards(agent_world)
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await agent_world.trip_upstream("agent-11")  # one trip: agent-00 moves one place down
        await settle(pilot)
        assert "off screen" not in status_text(app)
