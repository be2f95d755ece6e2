"""Issue 10, items 5 and 6: at 80 columns nothing is cut silently, and history says how much
more there is."""

from __future__ import annotations

import re

from textual.widgets import DataTable

from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.fixtures.faults import Fault, FaultKind
from tests.console.conftest import OPERATOR, press, running
from tests.console.helpers import cards_text, static_text, status_text
from tests.console.test_no_color import page
from tests.console.test_operator import FakeControls

PLATFORMS = [f"platform-{name}" for name in ("alpha", "bravo", "charlie", "delta", "echo", "zulu")]


class ManyPlatforms(FakeControls):
    def __init__(self, down: str | None = None) -> None:
        super().__init__()
        self.platforms = list(PLATFORMS)
        self.down = down

    def status(self) -> dict[str, str]:
        return {p: "DOWN (refused)" if p == self.down else "ok" for p in self.platforms}


async def test_a_status_line_too_long_for_80_columns_ends_in_an_ellipsis(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine, controls=ManyPlatforms()) as (app, _pilot):
        assert status_text(app).endswith("…")


async def test_filtering_on_a_platform_keeps_its_own_fault_on_the_status_line(agent_world):
    await agent_world.call("ava", "crm")
    controls = ManyPlatforms(down="platform-zulu")
    async with running(agent_world.engine, controls=controls) as (app, pilot):
        await press(pilot, "slash", *"platform-zulu", "enter")
        assert "platform-zulu DOWN (refused)" in status_text(app)


async def test_a_paged_card_with_a_long_name_keeps_its_countdown_at_80_columns(agent_world):
    name = "agent-with-a-long-name-for-the-page-test-0001"
    await page(agent_world, name)
    async with running(agent_world.engine) as (app, _pilot):
        title = cards_text(app).splitlines()[0]
        assert " PAGED " in title and re.search(r"… +PAGED +probe in \d\d:\d\d$", title.rstrip())


async def test_a_card_says_how_many_more_trips_it_does_not_show(agent_world):
    for _ in range(4):
        await agent_world.trip_upstream("ava")
        agent_world.engine.reset("ava", OPERATOR, "again")
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, _pilot):
        trips = next(line for line in cards_text(app).splitlines() if "┃ trips  " in line)
        assert "+4 more" in trips or "+3 more" in trips
        shown = trips.count("→")
        assert f"+{5 - shown} more" in trips


async def test_details_list_earlier_trips_behind_a_flood_of_denied_calls(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", OPERATOR, "first episode over")
    await agent_world.trip_upstream("ava")
    await agent_world.call("ava", "payments", 250)  # 250 denied rows: more than the table reads
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        trips = static_text(app.screen, "#detail-trips")
        assert "still open" in trips and "reset by oncall-ann" in trips


async def test_h_hides_the_denied_calls_in_the_audit_table(agent_world):
    await agent_world.trip_upstream("ava")
    await agent_world.call("ava", "payments", 3)
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        table = screen.query_one(DataTable)

        def events() -> list[str]:
            return [str(table.get_row_at(i)[2]) for i in range(table.row_count)]

        assert "call.denied" in events()
        await press(pilot, "h")
        assert "call.denied" not in events() and "tripped" in events()


async def test_audit_rows_cut_at_80_columns_end_in_an_ellipsis(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", OPERATOR, "a long reason " * 8)
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        table = app.screen.query_one(DataTable)
        lines = [table.render_line(y).text.rstrip() for y in range(table.size.height)]
        reset = next(line for line in lines if "by oncall-ann" in line)
        assert reset.endswith("…")


async def test_a_closed_cards_last_failure_is_said_whole_at_80_columns(agent_world):
    agent_world.platforms["payments"].set_fault(Fault(FaultKind.REFUSED))
    await agent_world.call("billing-assistant", "payments", 4)  # counted, not tripped
    async with running(agent_world.engine) as (app, _pilot):
        line = cards_text(app).splitlines()[1].rstrip()
        assert line.endswith(
            "4 failures · trips at auth 3 / upstream 5 · last: upstream on payments"
        )
