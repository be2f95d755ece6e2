"""Issue 10, item 10: at 200x50 the cards leave half the screen empty; `t` shows every breaker
as a row of a sortable table."""

from __future__ import annotations

from textual.widgets import DataTable

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.table import TableScreen
from tests.console.conftest import press, running, settle
from tests.console.helpers import screen_text

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


async def open_table(pilot) -> None:
    await settle(pilot)
    await press(pilot, "t")
    assert isinstance(pilot.app.screen, TableScreen)


def row_line(app, name: str) -> str:
    """The line of the table's row for `name` on screen as drawn (it must be scrolled into
    view), spaces folded."""
    line = next(line for line in screen_text(app).splitlines() if f" {name} " in f"{line} ")
    return " ".join(line.split())


async def fleet_at_80x24(world) -> None:
    """30 agents and more: a list longer than the screen. agent-00 held by oncall:dana for 30
    minutes, ava open in shadow, agent-29 (last of all) closed in shadow."""
    for agent in AGENTS:
        await world.call(agent, "crm")
    world.engine.hold("agent-00", "oncall:dana", "vendor window", 30 * 60)
    world.engine.set_mode("agent-29", "shadow", "oncall:dana", "trial")
    await world.call("ava", "payments")
    world.engine.set_mode("ava", "shadow", "oncall:dana", "trial")
    await world.trip_upstream("ava")


async def test_at_80x24_the_state_column_says_shadow_beside_the_state_and_held_with_time_left(
    agent_world,
):
    await fleet_at_80x24(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await open_table(pilot)
        assert row_line(app, "ava").startswith("OPEN · SHADOW ava 5 upstream 05:00")
        assert row_line(app, "agent-00").startswith("HELD 30:00 agent-00 0 12:00:00 ")
        assert "agent-29" not in screen_text(app)  # below the fold
        await press(pilot, "ctrl+end")  # the last row (`end` scrolls to the rightmost column)
        assert row_line(app, "agent-29").startswith("CLOSED · SHADOW agent-29 ")
        assert all(len(line) <= 80 for line in screen_text(app).splitlines())


async def test_a_held_rows_time_left_counts_down_in_its_state(agent_world):
    await fleet_at_80x24(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await open_table(pilot)
        agent_world.clock.advance(61)
        app.tick()
        await settle(pilot)
        assert row_line(app, "agent-00").startswith("HELD 28:59 agent-00 ")
        assert column(app, "probe in")[:2] == ["03:59", ""]  # a hold has no probe to count to
