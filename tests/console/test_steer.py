"""Hold, release and mode from the console (`o`, `O`, `m`): each a dialog with No focused,
checked in the dialog, sent to the engine only on `y`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from textual.pilot import Pilot
from textual.widgets import Button, Input

from breakerdeck.console.messages import SteerRequested
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.engine import events as ev
from tests.console.conftest import OPERATOR, make_app, open_screen, settle
from tests.console.helpers import cards_text, static_text


def written(engine, key: str, kind: str) -> list:
    return engine.audit.query(key=key, types=[kind])


@asynccontextmanager
async def ava_console(world, *, held: bool = False) -> AsyncIterator[Pilot[None]]:
    """The console at 80x24 on ava, which has made one call; held by oncall:dana for 10
    minutes before the console starts when `held`."""
    await world.call("ava", "payments")
    if held:
        world.engine.hold("ava", "oncall:dana", "window", 600)
    app = make_app(world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        yield pilot


async def open_dialog(pilot, key: str) -> WriteScreen:
    await settle(pilot)
    return await open_screen(pilot, key, WriteScreen)


async def fill(pilot, screen: WriteScreen, **fields: str) -> None:
    """The fields as if typed (typing is `test_tab_from_no_…`'s), the last one focused."""
    for name, text in fields.items():
        field = screen.query_one(f"#write-{name}", Input)
        field.value = text
        field.focus()
    await pilot.pause()


async def test_o_with_a_reason_and_a_duration_holds_the_breaker(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        screen = await open_dialog(pilot, "o")
        assert isinstance(app.focused, Button) and app.focused.id == "no"
        await fill(pilot, screen, reason="vendor window", duration="30m")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        view = agent_world.engine.view("ava")
        assert (view.state, view.held_by, view.held_reason) == ("held", OPERATOR, "vendor window")
        assert view.held_until == agent_world.clock.wall() + 30 * 60
        [held] = written(agent_world.engine, "ava", ev.HELD)
        assert held.fields["actor"] == OPERATOR


async def test_tab_from_no_reaches_the_reason_then_the_duration(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        await open_dialog(pilot, "o")
        await pilot.press("tab")
        assert app.focused.id == "write-reason"
        await pilot.press("a", "b", "tab")
        assert app.focused.id == "write-duration"


async def test_a_bad_duration_is_said_in_the_dialog_and_changes_nothing(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        screen = await open_dialog(pilot, "o")
        await fill(pilot, screen, reason="vendor window", duration="30x")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen
        assert "whole number of s, m or h" in static_text(screen, "#write-error")
        assert agent_world.engine.view("ava").state == "closed"
        assert written(agent_world.engine, "ava", ev.HELD) == []


async def test_an_empty_reason_is_said_in_the_dialog_and_changes_nothing(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        screen = await open_dialog(pilot, "o")
        await fill(pilot, screen, duration="30m")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen
        assert "a hold needs a reason" in static_text(screen, "#write-error")
        assert agent_world.engine.view("ava").state == "closed"


async def test_a_hold_past_max_hold_seconds_is_said_in_the_dialog(agent_world):
    async with ava_console(agent_world) as pilot:
        screen = await open_dialog(pilot, "o")
        assert "at most 24h (max_hold_seconds)" in static_text(screen, "#write-body")
        await fill(pilot, screen, reason="long one", duration="25h")
        await pilot.press("enter")
        await settle(pilot)
        assert "at most 86400 s (max_hold_seconds)" in static_text(screen, "#write-error")
        assert written(agent_world.engine, "ava", ev.HELD) == []


async def test_enter_on_no_and_escape_cancel_the_hold(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        await open_dialog(pilot, "o")
        await pilot.press("enter")  # No is focused
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        screen = await open_dialog(pilot, "o")
        await fill(pilot, screen, reason="x", duration="1m")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert written(agent_world.engine, "ava", ev.HELD) == []


async def test_hold_is_offered_only_where_not_held_and_release_only_where_held(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        await settle(pilot)
        offers = {a: app.screen.check_action(a, ()) for a in ("hold", "release", "mode")}
        assert offers == {"hold": True, "release": None, "mode": True}
        agent_world.engine.hold("ava", "oncall:dana", "window", 600)
        await settle(pilot)
        offers = {a: app.screen.check_action(a, ()) for a in ("hold", "release", "mode")}
        assert offers == {"hold": None, "release": True, "mode": True}
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)


async def test_shift_o_releases_into_half_open(agent_world):
    async with ava_console(agent_world, held=True) as pilot:
        app = pilot.app
        screen = await open_dialog(pilot, "O")
        assert "State: HELD, held by oncall:dana" in static_text(screen, "#write-body")
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert agent_world.engine.view("ava").state == "half_open"
        [released] = written(agent_world.engine, "ava", ev.RELEASED)
        assert released.fields["actor"] == OPERATOR


async def test_shift_o_with_closed_chosen_closes_it(agent_world):
    async with ava_console(agent_world, held=True) as pilot:
        screen = await open_dialog(pilot, "O")
        assert static_text(screen, "#write-closed").startswith("Then: HALF-OPEN")
        await pilot.press("c")
        await settle(pilot)
        assert static_text(screen, "#write-closed").startswith("Then: CLOSED")  # in words
        await pilot.press("y")
        await settle(pilot)
        assert agent_world.engine.view("ava").state == "closed"
        assert written(agent_world.engine, "ava", ev.RESET)[0].fields["actor"] == OPERATOR


async def test_m_switches_the_mode_and_back_with_a_reason_or_without(agent_world):
    async with ava_console(agent_world) as pilot:
        screen = await open_dialog(pilot, "m")
        assert static_text(screen, "#write-title") == "Switch ava to shadow?"
        await fill(pilot, screen, reason="trial week")
        await pilot.press("enter")
        await settle(pilot)
        assert agent_world.engine.view("ava").mode == "shadow"
        await open_dialog(pilot, "m")
        await pilot.press("y")
        await settle(pilot)
        assert agent_world.engine.view("ava").mode == "enforce"
        first, second = reversed(written(agent_world.engine, "ava", ev.MODE))
        assert (first.fields["to"], first.fields["reason"]) == ("shadow", "trial week")
        assert (second.fields["to"], second.fields["reason"]) == (
            "enforce",
            "switched to enforce from the console",
        )


async def test_a_viewers_console_offers_no_hold_release_or_mode(agent_world, as_web):
    as_web("viewer")
    async with ava_console(agent_world, held=True) as pilot:
        app = pilot.app
        await settle(pilot)
        offers = {a: app.screen.check_action(a, ()) for a in ("hold", "release", "mode")}
        assert offers == {"hold": False, "release": False, "mode": False}
        for key in ("o", "O", "m"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen), key
        [card] = app.board.cards_of({"ava"})
        for what in ("hold", "release", "mode"):
            app.post_message(SteerRequested(card, what))  # a palette command, a click
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen), what
        assert "(O)" not in cards_text(app)
    assert agent_world.engine.view("ava").state == "held"
    assert written(agent_world.engine, "ava", ev.MODE) == []


async def test_the_table_and_the_details_offer_o_too(agent_world):
    async with ava_console(agent_world) as pilot:
        app = pilot.app
        await settle(pilot)
        for opening in ("t", "enter"):
            await pilot.press(opening)
            await settle(pilot)
            await open_dialog(pilot, "o")
            await pilot.press("escape", "escape")
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen)
