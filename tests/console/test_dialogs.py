"""Issue 10, items 4 and 8: dialogs that tell the truth as it changes."""

from __future__ import annotations

from textual.widgets import Footer

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from tests.console.conftest import make_app, press, running, settle
from tests.console.helpers import cards_text, header_text, static_text
from tests.console.test_no_color import page
from tests.console.test_operator import FakeControls


async def test_after_f_then_y_the_card_and_the_reset_dialog_say_the_credential_is_fixed(
    agent_world,
):
    await agent_world.trip_auth("ava", platform="crm")
    controls = FakeControls()
    controls.revoked.add("crm")
    async with running(agent_world.engine, controls=controls) as (app, pilot):
        assert "reconnect that credential (f), then reset (r)" in cards_text(app)
        await press(pilot, "f", "y")
        assert "credential fixed on crm: reset it now (r)" in cards_text(app)
        await press(pilot, "r")
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert not dialog.query("#confirm-warning")  # no "Fix it first (f)"
        assert "marked fixed" in static_text(dialog, "#confirm-body")


async def test_r_on_a_stale_source_refuses_at_once_without_a_dialog(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        app.source.stale_since = agent_world.clock.wall()
        await press(pilot, "r")
        assert not isinstance(app.screen, ConfirmScreen)
        said = [n.message for n in app._notifications]
        assert any("Cannot reset ava" in text and "stale" in text for text in said)
        assert agent_world.engine.view("ava").state == "open"


async def test_the_reset_dialogs_footer_lists_its_own_keys(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        footer = app.screen.query_one(Footer)
        keys = {binding.key for (_, binding, enabled, _) in footer.screen.active_bindings.values()}
        assert {"y", "n", "escape"} <= keys
        assert "q" not in keys and "slash" not in keys


async def test_the_reset_dialogs_countdown_moves_with_the_clock(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        assert "OPEN 05:00 to the probe" in static_text(app.screen, "#confirm-body")
        agent_world.clock.advance(65)
        app.tick()
        await settle(pilot)
        body = static_text(app.screen, "#confirm-body")
        assert "OPEN 03:55 to the probe" in body and "OPEN 05:00" not in body
        assert body.startswith("Agent: ava")


async def test_a_page_rings_once_and_shouts_in_the_header_and_card_not_in_a_toast(agent_world):
    app = make_app(agent_world.engine)
    bells: list[int] = []
    app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await page(agent_world, "ava")
        await settle(pilot)
        assert bells == [1]
        assert not [n for n in app._notifications if n.title == "PAGED"]
        assert "!! PAGED 1: ava !!" in header_text(app)
        assert " PAGED " in cards_text(app).splitlines()[0]


async def test_escape_dismisses_the_toasts_when_no_filter_is_set(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        app.notify("something to read", timeout=30)
        await settle(pilot)
        assert list(app._notifications)
        await press(pilot, "escape")
        assert not list(app._notifications)


async def test_one_page_shown_by_every_replica_that_shares_it_rings_once(agent_world):
    app = make_app(agent_world.engine)
    bells: list[int] = []
    app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app._announce_pages([Event(1, ev.PAGE, "ava", "ava", 0.0, {})])
        app._announce_pages([ev.decoded(1, ev.PAGE, "ava", "ava", 0.0, {"origin": "replica-b"})])
        app._announce_pages([Event(2, ev.PAGE, "bob", "bob", 0.0, {})])
        assert bells == [1, 1]


async def test_the_reset_dialog_and_its_card_read_one_countdown_between_ticks(agent_world):
    import re

    from tests.console.helpers import screen_text

    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        app.tick()
        agent_world.clock.advance(7)  # between two ticks, news for another card
        await agent_world.call("bo", "crm")
        await settle(pilot)
        dialog = re.search(r"OPEN (\d\d:\d\d) to the probe", screen_text(app))
        card = re.search(r"OPEN +ava .*probe in (\d\d:\d\d)", screen_text(app))
        assert dialog is not None and card is not None
        assert dialog.group(1) == card.group(1) == "04:53"
