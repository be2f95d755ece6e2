"""A console started by `breakerdeck web` as a viewer writes nothing, from any key, the command
palette or a message; as an operator its resets are audited under the web actor."""

from __future__ import annotations

from textual.command import CommandPalette

from breakerdeck.console.hint import hint
from breakerdeck.console.messages import DemoFaultRequested, FixRequested, ResetRequested
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.web_role import ROLE_VARIABLE, web_session
from tests.console.conftest import WEB_ACTOR, make_app, press, running, settle
from tests.console.helpers import cards_text
from tests.console.test_operator import FakeControls, resets


async def test_a_viewers_console_opens_no_dialog_on_any_write_key(agent_world, as_web):
    as_web("viewer")
    await agent_world.trip_auth("ava", platform="crm")
    controls = FakeControls()
    async with running(agent_world.engine, controls=controls) as (app, pilot):
        for key in ("r", "R", "f", "d", "u", "x"):
            await press(pilot, key)
            assert isinstance(app.screen, DashboardScreen), key
        # The palette opens (saved views, Textual's own commands): nothing in it resets.
        await press(pilot, "ctrl+p", *"reset", "enter")
        assert not isinstance(app.screen, ConfirmScreen)
        if isinstance(app.screen, CommandPalette):
            await press(pilot, "escape")
        await press(pilot, "enter")  # the detail screen has r and f too
        for key in ("r", "f"):
            await press(pilot, key)
            assert not isinstance(app.screen, ConfirmScreen), key
    assert controls.calls == []
    assert resets(agent_world.engine, "ava") == []


async def test_a_viewers_footer_offers_no_write(agent_world, as_web):
    as_web("viewer")
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine, controls=FakeControls()) as (app, _pilot):
        offers = {a: app.screen.check_action(a, ()) for a in ("reset", "fix", "platform_down")}
        assert offers == {"reset": False, "fix": False, "platform_down": False}


async def test_a_viewers_console_ignores_write_messages(agent_world, as_web):
    """Whatever posts them (a binding, a click, a palette command): the app refuses again."""
    as_web("viewer")
    await agent_world.trip_upstream("ava")
    controls = FakeControls()
    async with running(agent_world.engine, controls=controls) as (app, pilot):
        [card] = app.board.cards_of({"ava"})
        for message in (
            ResetRequested(card),
            ResetRequested(card, every=True),
            FixRequested(card),
            DemoFaultRequested("take_down", card),
        ):
            app.post_message(message)
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen)
    assert controls.calls == []
    assert agent_world.engine.view("ava").state == "open"


async def test_a_reset_from_a_web_operators_console_is_audited_with_the_web_actor(
    agent_world, as_web
):
    as_web("operator")
    await agent_world.trip_upstream("ava")
    async with make_app(agent_world.engine).run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "r")
        said = " ".join(pilot.app.screen.lines)
        assert f"circuit_breaker_reset by {WEB_ACTOR}" in said
        await press(pilot, "y")
    assert [r.fields["actor"] for r in resets(agent_world.engine, "ava")] == [WEB_ACTOR]


def test_an_unknown_role_reads_as_a_viewers():
    session = web_session({ROLE_VARIABLE: "admin"})
    assert session is not None and session.read_only


async def test_a_viewers_cards_name_no_key_it_does_not_offer(agent_world, as_web):
    as_web("viewer")
    await agent_world.trip_auth("ava", platform="crm")
    async with make_app(agent_world.engine).run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = cards_text(app := pilot.app)
        assert "→ reauth_failed on crm: reconnect that credential, then reset" in text
        assert "(r)" not in text and "(r)" in hint(app.board.cards()[0], keys=True, resettable=True)
