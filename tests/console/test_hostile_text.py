"""Text from outside (keys, actors, reasons, source names) on the console's screens.

A reset typed by one operator reaches every watching console: escape codes in it would drive
those terminals, and Rich markup in it would be interpreted (or crash a screen). Everything is
fed through a real engine (the reset is the engine's own), then read off what the screen draws.
"""

from __future__ import annotations

from textual.widgets import DataTable, Static

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.engine.text import printable
from tests.console.conftest import make_app, press, running, settle
from tests.console.helpers import cards_text, header_text
from tests.console.test_watch import served, until, watch

#: An OSC title change, a bell and a screen clear: what a hostile actor would type.
ESCAPES = "mallory\x1b]0;owned\x07\x1b[2J"
#: Closing tags that Rich markup would interpret (and fail on: nothing is open).
MARKUP = "fixed [/key] for real [/] [bold]now"
#: A key carrying both, as an agent name the gateway passes on.
HOSTILE_KEY = "ev\x1b[31mil[/]"


def table_text(screen) -> str:
    """Every cell of the detail screen's audit table, as drawn."""
    table = screen.query_one(DataTable)
    rows = [table.get_row_at(row) for row in range(table.row_count)]
    return "\n".join(" ".join(str(cell) for cell in cells) for cells in rows)


def static(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_an_actor_with_escape_codes_is_shown_escaped_on_the_card(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", ESCAPES, "vault fixed")
    await agent_world.trip_upstream("ava")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(119, 24)) as pilot:  # wide cards, and no event log
        await settle(pilot)
        shown = cards_text(app)
        assert "\x1b" not in shown and "\x07" not in shown
        assert f"reset by {printable(ESCAPES)}" in shown


async def test_an_actor_with_escape_codes_is_shown_escaped_in_the_event_log(agent_world):
    from tests.console.test_event_log import log_lines

    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", ESCAPES, "vault fixed")
    async with running(agent_world.engine, size=(200, 30)) as (app, _pilot):
        shown = "\n".join(log_lines(app))
        assert "\x1b" not in shown and "\x07" not in shown
        assert f"by {printable(ESCAPES)}:" in shown


async def test_a_reason_with_closing_markup_tags_opens_the_detail_screen(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", "ann", MARKUP)
    async with running(agent_world.engine, size=(160, 30)) as (app, pilot):
        await press(pilot, "enter")
        assert isinstance(app.screen, DetailScreen)
        assert f"by ann: {MARKUP}" in table_text(app.screen)
        assert f"reset by ann ({MARKUP})" in static(app.screen, "#detail-trips")


async def test_escape_codes_in_a_reason_are_escaped_on_the_detail_screen(agent_world):
    await agent_world.trip_upstream("ava")
    agent_world.engine.reset("ava", ESCAPES, ESCAPES)
    async with running(agent_world.engine, size=(160, 30)) as (app, pilot):
        await press(pilot, "enter")
        rows = table_text(app.screen)
        trips = static(app.screen, "#detail-trips")
        assert "\x1b" not in rows + trips
        assert f"by {printable(ESCAPES)}: {printable(ESCAPES)}" in rows
        assert f"reset by {printable(ESCAPES)} ({printable(ESCAPES)})" in trips


async def test_a_hostile_key_is_escaped_on_its_card_and_detail_title(agent_world):
    await agent_world.trip_upstream(HOSTILE_KEY)
    async with running(agent_world.engine, size=(160, 30)) as (app, pilot):
        assert printable(HOSTILE_KEY) in cards_text(app)
        assert "\x1b" not in cards_text(app)
        await press(pilot, "enter")
        title = static(app.screen, "#detail-title")
        assert printable(HOSTILE_KEY) in title and "\x1b" not in title


async def test_a_hostile_key_in_the_reset_dialog_and_its_toast(agent_world):
    await agent_world.trip_upstream(HOSTILE_KEY)
    async with running(agent_world.engine, size=(160, 30)) as (app, pilot):
        await press(pilot, "r")
        assert isinstance(app.screen, ConfirmScreen)
        title = static(app.screen, "#confirm-title")
        body = static(app.screen, "#confirm-body")
        assert title == f"Reset {printable(HOSTILE_KEY)}?"
        assert f"Agent: {printable(HOSTILE_KEY)}" in body and "\x1b" not in body
        await press(pilot, "y")
        assert agent_world.engine.view(HOSTILE_KEY).state == "closed"
        [toast] = [n for n in app._notifications if "reset by" in n.message]
        assert toast.message.startswith(printable(HOSTILE_KEY)) and not toast.markup


async def test_a_paged_hostile_key_is_escaped_in_the_header(agent_world):
    await agent_world.trip_upstream(HOSTILE_KEY)
    app = make_app(agent_world.engine)
    async with app.run_test(size=(160, 24)) as pilot:
        for _ in range(2):  # two failed probes: the page
            agent_world.clock.advance(300)
            agent_world.engine.poll()
            await agent_world.call(HOSTILE_KEY, "payments")
        await settle(pilot)
        assert agent_world.engine.view(HOSTILE_KEY).paged
        header = header_text(app)
        assert f"PAGED 1: {printable(HOSTILE_KEY)}" in header and "\x1b" not in header


async def test_a_hostile_source_name_is_escaped_in_a_watching_console(worlds):
    world = worlds("one")
    await world.trip_upstream("ava")
    async with served(world, f"replica{ESCAPES}[/]") as feed:
        app = await watch(feed.url)
        async with app.run_test(size=(150, 24)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            world.engine.reset("ava", ESCAPES, MARKUP)
            await until(pilot, lambda: "reset by" in cards_text(app))
            shown = cards_text(app) + header_text(app)
            assert "\x1b" not in shown
            assert f"replica{printable(ESCAPES)}[/]" in header_text(app)
            assert f"reset by {printable(ESCAPES)}" in cards_text(app)
