"""Issue 10, item 11: the console rewrites only what changed (bench/console_bytes.py measures
the bytes on a real pty; these pin down why there are few)."""

from __future__ import annotations

from textual.geometry import Region

from breakerdeck.console.widgets.card_lines import COUNTDOWN_CELLS
from breakerdeck.console.widgets.cards import CardList
from tests.console.conftest import running, settle


def spy(cards: CardList) -> list[object]:
    """Record what the card list asks Textual to repaint."""
    asked: list[object] = []
    full, lines = cards.refresh, cards.refresh_lines

    def refresh(*regions, **kwargs):
        asked.append(regions or "everything")
        return full(*regions, **kwargs)

    def refresh_lines(y, count=1):
        asked.append(("line", y, count))
        return lines(y, count)

    cards.refresh = refresh  # type: ignore[method-assign]
    cards.refresh_lines = refresh_lines  # type: ignore[method-assign]
    return asked


async def test_news_on_one_card_repaints_only_its_changed_lines(agent_world):
    await agent_world.call_once("ava", "bo", "cy", "dee")
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        asked = spy(cards)
        agent_world.platforms["crm"].revoke_credential()
        await agent_world.call("ava", "crm")  # one counted failure: ava stays on top
        await settle(pilot)
        lines = [a for a in asked if isinstance(a, tuple) and a[0] == "line"]
        assert "everything" not in asked
        assert lines == [("line", 1, 1)]  # its counter line, not all 12 lines


async def test_the_tick_repaints_only_the_countdown_cells(agent_world):
    await agent_world.trip_upstream("ava")
    await agent_world.call("bo", "crm")
    async with running(agent_world.engine) as (app, _pilot):
        cards = app.screen.query_one(CardList)
        asked = spy(cards)
        agent_world.clock.advance(1)
        cards.tick()
        assert asked == [(Region(80 - COUNTDOWN_CELLS, 0, COUNTDOWN_CELLS, 1),)]
