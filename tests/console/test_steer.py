"""Hold, release and mode from the console (`o`, `O`, `m`): each a dialog with No focused,
checked in the dialog, sent to the engine only on `y`."""

from __future__ import annotations

from textual.widgets import Button, Input

from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.engine import events as ev
from tests.console.conftest import OPERATOR, make_app, settle
from tests.console.helpers import static_text


def written(engine, key: str, kind: str) -> list:
    return engine.audit.query(key=key, types=[kind])


async def open_dialog(pilot, key: str) -> WriteScreen:
    await settle(pilot)
    await pilot.press(key)
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, WriteScreen)
    return screen


async def fill(pilot, screen: WriteScreen, **fields: str) -> None:
    for name, text in fields.items():
        screen.query_one(f"#write-{name}", Input).focus()
        await settle(pilot)
        await pilot.press(*text)


async def test_o_with_a_reason_and_a_duration_holds_the_breaker(agent_world):
    await agent_world.call("ava", "payments")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
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
    await agent_world.call("ava", "payments")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_dialog(pilot, "o")
        await pilot.press("tab")
        assert app.focused.id == "write-reason"
        await pilot.press("a", "b", "tab")
        assert app.focused.id == "write-duration"


async def test_a_bad_duration_is_said_in_the_dialog_and_changes_nothing(agent_world):
    await agent_world.call("ava", "payments")
    app = make_app(agent_world.engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dialog(pilot, "o")
        await fill(pilot, screen, reason="vendor window", duration="30x")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen
        assert "whole number of s, m or h" in static_text(screen, "#write-error")
        assert agent_world.engine.view("ava").state == "closed"
        assert written(agent_world.engine, "ava", ev.HELD) == []
