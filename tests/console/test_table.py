"""Issue 10, item 10: at 200x50 the cards leave half the screen empty; `t` shows every breaker
as a row of a sortable table."""

from __future__ import annotations

from textual.widgets import DataTable

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.table import TableScreen
from tests.console.conftest import press, running, settle

AGENTS = [f"agent-{i:02d}" for i in range(30)]


def column(app, name: str) -> list[str]:
    table = app.screen.query_one(DataTable)
    return [
        str(table.get_cell_at((row, table.get_column_index(name))))
        for row in range(table.row_count)
    ]


async def test_t_shows_every_breaker_as_a_row_trouble_first(agent_world):
    await agent_world.call_once(*AGENTS)
    await agent_world.trip_upstream("zed")
    async with running(agent_world.engine, size=(200, 50)) as (app, pilot):
        await press(pilot, "t")
        assert isinstance(app.screen, TableScreen)
        assert app.screen.query_one(DataTable).row_count == len(AGENTS) + 1
        assert column(app, "agent")[0] == "zed" and column(app, "state")[0] == "OPEN"
        assert column(app, "probe in")[0] == "05:00"
        await press(pilot, "t")
        assert isinstance(app.screen, DashboardScreen)


async def test_s_sorts_by_the_next_column_and_again_reverses(agent_world):
    await agent_world.call_once("cy", "ava", "bo")
    async with running(agent_world.engine, size=(200, 50)) as (app, pilot):
        await press(pilot, "t", "s", "s")  # state, then agent
        assert column(app, "agent") == ["ava", "bo", "cy"]
        app.screen._sort(1)  # agent again: reversed
        await settle(pilot)
        assert column(app, "agent") == ["cy", "bo", "ava"]


async def test_the_countdown_column_moves_with_the_clock(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine, size=(200, 50)) as (app, pilot):
        await press(pilot, "t")
        agent_world.clock.advance(61)
        app.tick()
        await settle(pilot)
        assert column(app, "probe in") == ["03:59"]


async def test_enter_and_r_act_on_the_selected_row(agent_world):
    await agent_world.trip_upstream("ava")
    await agent_world.call("bo", "crm")
    async with running(agent_world.engine, size=(200, 50)) as (app, pilot):
        await press(pilot, "t", "r")
        assert isinstance(app.screen, ConfirmScreen)
        await press(pilot, "y")
        assert agent_world.engine.view("ava").state == "closed"
        await press(pilot, "enter")
        assert isinstance(app.screen, DetailScreen)


async def test_the_denied_column_counts_every_refusal_of_the_episode(agent_world):
    """It read `6+` for about 70 denials: it counted the card's last few, kept for its lines."""
    await agent_world.trip_upstream("ava")
    await agent_world.call("ava", "payments", 70)
    async with running(agent_world.engine, size=(200, 50)) as (app, pilot):
        await press(pilot, "t")
        assert column(app, "denied") == ["70"]
        await agent_world.call("ava", "payments", 2)
        await settle(pilot)
        assert column(app, "denied") == ["72"]
