"""`o`, `O` and `m` in a console attached to a remote engine: sent over the live feed (a real
served engine on loopback), refusals said in the dialog, a viewer token offered none."""

from __future__ import annotations

from textual.widgets import Input

from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.engine import events as ev
from tests.console.conftest import OPERATOR
from tests.console.helpers import cards_text, static_text
from tests.console.test_watch import VIEWER_TOKEN, until, watching


async def type_in(pilot, screen: WriteScreen, name: str, text: str) -> None:
    screen.query_one(f"#write-{name}", Input).focus()
    await pilot.pause()
    await pilot.press(*text)


async def test_a_hold_goes_over_the_feed_and_a_refusal_is_said_in_the_dialog(worlds):
    a = worlds("a")
    await a.call("ava", "payments")
    async with watching(a, "gw-1", size=(80, 24)) as (app, pilot):
        await until(pilot, lambda: "ava" in cards_text(app))
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, WriteScreen))
        screen = app.screen
        await type_in(pilot, screen, "reason", "vendor window")
        await type_in(pilot, screen, "duration", "25h")
        await pilot.press("enter")
        await until(pilot, lambda: static_text(screen, "#write-error") != "")
        assert "max_hold_seconds" in static_text(screen, "#write-error")  # the engine's
        assert a.engine.view("ava").state == "closed"
        await pilot.press("backspace", "backspace", "backspace", "3", "0", "m", "enter")
        await until(pilot, lambda: a.engine.view("ava").state == "held")
        assert a.engine.view("ava").held_by == f"remote:operator:{OPERATOR}"
        await until(pilot, lambda: "HELD        ava" in cards_text(app))
        assert "why: “vendor window”" in cards_text(app)
        await pilot.press("O", "y")
        await until(pilot, lambda: a.engine.view("ava").state == "half_open")
        await pilot.press("m", "y")
        await until(pilot, lambda: a.engine.view("ava").mode == "shadow")
    [mode] = a.engine.audit.query(key="ava", types=[ev.MODE])
    assert mode.fields["reason"] == "switched to shadow from the console"


async def test_a_viewer_token_is_offered_no_hold_release_or_mode(worlds):
    a = worlds("a")
    await a.call("ava", "payments")
    async with watching(a, "gw-1", token=VIEWER_TOKEN, size=(80, 24)) as (app, pilot):
        await until(pilot, lambda: "ava" in cards_text(app))
        offers = {w: app.screen.check_action(w, ()) for w in ("hold", "release", "mode")}
        assert offers == {"hold": False, "release": False, "mode": False}
        await pilot.press("o", "m")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
    assert a.engine.audit.query(key="ava", types=[ev.HELD, ev.MODE]) == []
