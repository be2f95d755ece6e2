"""A selection the operator cannot see is named on a line of its own under the cards: once
moved, the selection stays on its breaker through re-sorts (issue 10), so after trips push it
off screen `r` looks dead unless the screen says where the keys would act. It never takes the
platforms' health off the status line (issue 22)."""

from __future__ import annotations

from breakerdeck.console.widgets.bars import SelectionHint
from breakerdeck.console.widgets.cards import CardList
from tests.console.conftest import press, running, settle
from tests.console.helpers import status_text
from tests.console.test_selection import AGENTS
from tests.console.test_selection import many_cards as closed_cards


class Faults:
    """Demo fault controls as the status line reads them."""

    platforms = ("crm", "payments")

    def status(self) -> dict[str, str]:
        return {"crm": "ok", "payments": "DOWN (refused)"}


def hint_text(app) -> str:
    hint = app.screen.query_one(SelectionHint)
    return str(hint.content) if hint.display else ""


async def test_a_selection_pushed_off_screen_by_trips_is_named_under_the_cards(agent_world):
    await closed_cards(agent_world)
    async with running(agent_world.engine, controls=Faults()) as (app, pilot):
        await press(pilot, "j")  # the operator picks agent-01
        cards = app.screen.query_one(CardList)
        assert cards.selected == ("agent-01", "agent-01")
        assert hint_text(app) == ""
        for agent in AGENTS[4:]:  # eight trips sort above the selected card
            await agent_world.trip_upstream(agent)
        await settle(pilot)
        assert cards.selected == ("agent-01", "agent-01")
        assert hint_text(app).startswith(
            "▶ agent-01 (closed) is off screen: j selects the top card shown"
        )
        assert "payments DOWN (refused)" in status_text(app)


async def test_j_brings_the_selection_back_on_screen_and_the_hint_goes(agent_world):
    await closed_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await pilot.press("j")
        for agent in AGENTS[4:]:
            await agent_world.trip_upstream(agent)
        await settle(pilot)
        await press(pilot, "j")
        cards = app.screen.query_one(CardList)
        assert cards.selected_index == 0 and cards.selected_card.state == "open"
        assert hint_text(app) == ""


async def test_a_selection_on_screen_adds_no_line(agent_world):
    await closed_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await pilot.press("j")
        await agent_world.trip_upstream("agent-11")  # one trip: agent-01 moves one place down
        await settle(pilot)
        assert hint_text(app) == ""
