"""Issue 10, items 1, 2 and 12: the selection follows the keys and the mouse, stays in view, and
stays on its breaker when the board re-sorts."""

from __future__ import annotations

from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.widgets.cards import CardList
from tests.console.conftest import AgentWorld, press, running, settle
from tests.console.helpers import cards_text

AGENTS = [f"agent-{i:02d}" for i in range(12)]  # 12 closed cards: 36 lines, more than 80x24 shows


async def many_cards(world: AgentWorld) -> None:
    await world.call_once(*AGENTS)


def selected_line(app) -> str:
    return next(line for line in cards_text(app).splitlines() if line.startswith("▶"))


async def test_down_past_the_screen_moves_the_selection_and_keeps_it_in_view(agent_world):
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        for _ in range(9):
            await press(pilot, "down")
        assert cards.selected_index == 9
        assert AGENTS[9] in selected_line(app)


async def test_page_down_end_and_home_move_the_selection(agent_world):
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        await press(pilot, "pagedown")
        assert cards.selected_index == cards.page_cards
        assert AGENTS[cards.page_cards] in selected_line(app)
        await press(pilot, "end")
        assert cards.selected_index == len(AGENTS) - 1
        assert AGENTS[-1] in selected_line(app)
        await press(pilot, "home")
        assert cards.selected_index == 0 and AGENTS[0] in selected_line(app)


async def cy_trips_after(world: AgentWorld, *keys: str) -> tuple[str, str] | None:
    """Three healthy cards; the keys pressed; then cy trips and lands on top. The selection
    after that."""
    await world.call_once("ava", "bo", "cy")
    async with running(world.engine) as (app, pilot):
        if keys:
            await press(pilot, *keys)
        await world.trip_upstream("cy")
        await settle(pilot)
        cards = app.screen.query_one(CardList)
        assert cards.cards[0].agent == "cy"
        assert cards.selected is not None and cards.selected[0] in selected_line(app)
        return cards.selected


async def test_until_a_key_moves_it_the_selection_follows_the_top_card(agent_world):
    assert await cy_trips_after(agent_world) == ("cy", "cy")


async def test_once_moved_the_selection_stays_on_its_breaker_when_a_trip_resorts(agent_world):
    assert await cy_trips_after(agent_world, "j") == ("bo", "bo")


async def test_g_makes_the_selection_follow_the_top_card_again(agent_world):
    assert await cy_trips_after(agent_world, "j", "g") == ("cy", "cy")


async def test_a_click_selects_the_card_under_the_pointer(agent_world):
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        await pilot.click(CardList, offset=(10, 7))  # the third card's lines are 6 to 8
        await settle(pilot)
        assert cards.selected_index == 2
        assert app.screen.id == "dashboard"


async def test_a_double_click_opens_the_card(agent_world):
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await pilot.click(CardList, offset=(10, 4), times=2)
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.card.agent == AGENTS[1]


async def test_a_key_on_a_selected_card_out_of_view_first_brings_it_into_view(agent_world):
    await agent_world.trip_upstream("ava")
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        assert cards.selected == ("ava", "ava")
        cards.scroll_end(animate=False, immediate=True)  # the wheel: ava is off screen
        await settle(pilot)
        assert "ava" not in cards_text(app)
        await press(pilot, "r")
        assert app.screen.id == "dashboard"  # no dialog for a card the operator cannot see
        assert "ava" in selected_line(app)
        await press(pilot, "r")
        assert app.screen.id == "confirm"


async def test_j_from_a_selection_pushed_out_of_view_selects_the_top_card_on_screen(agent_world):
    await many_cards(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        cards = app.screen.query_one(CardList)
        cards.select_index(len(AGENTS) - 1)  # the last card, then back to the top of the list
        cards.scroll_home(animate=False, immediate=True)
        await settle(pilot)
        await press(pilot, "j")
        assert cards.selected_index == 0 and AGENTS[0] in selected_line(app)
