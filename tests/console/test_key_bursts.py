"""Keys that arrive in one burst (fast typing, a paste, a slow link delivering them at once) are
queued for the dashboard before the first one's dialog opens: the ones after it are the
dialog's to ignore, never a second dialog over the first."""

from __future__ import annotations

from textual import events

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.write import WriteScreen
from tests.console.conftest import running, settle


async def burst(app, *keys: str) -> None:
    """`keys` queued at once, as one read of the terminal delivers them to the app."""
    for key in keys:
        app.post_message(events.Key(key, key))


async def test_r_twice_in_one_burst_opens_one_reset_dialog(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await burst(app, "r", "r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert sum(isinstance(s, ConfirmScreen) for s in app.screen_stack) == 1


async def test_o_then_m_in_one_burst_opens_only_the_hold_dialog(agent_world):
    await agent_world.call("ava", "payments")
    async with running(agent_world.engine) as (app, pilot):
        await burst(app, "o", "m")
        await settle(pilot)
        assert isinstance(app.screen, WriteScreen)
        assert sum(isinstance(s, WriteScreen) for s in app.screen_stack) == 1
        assert "Hold" in app.screen.form.title
