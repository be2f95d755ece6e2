"""Operator writes from the console: reset and mark-credential-fixed, always confirmed first."""

from __future__ import annotations

import re

from textual.widgets import Button

from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.screens.help import KEYS, HelpScreen
from breakerdeck.console.widgets.cards import CardList
from breakerdeck.engine import events as ev
from tests.console.conftest import OPERATOR, press, running
from tests.console.helpers import cards_text, static_text


def resets(engine, key: str) -> list:
    return engine.audit.query(key=key, types=[ev.RESET])


async def test_r_then_n_leaves_the_breaker_open(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        assert isinstance(app.screen, ConfirmScreen)
        await press(pilot, "n")
        assert isinstance(app.screen, DashboardScreen)
        view = agent_world.engine.view("ava")
        assert (view.state, view.count) == ("open", 5)
        assert resets(agent_world.engine, "ava") == []


async def test_r_then_y_closes_it_and_audits_the_operator(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r", "y")
        view = agent_world.engine.view("ava")
        assert (view.state, view.count) == ("closed", 0)
        [reset] = resets(agent_world.engine, "ava")
        assert reset.fields["actor"] == OPERATOR
        assert "upstream_failure" in reset.fields["reason"]
        assert f"upstream×5 → reset by {OPERATOR}" in cards_text(app)


async def test_the_reset_dialog_focuses_no_so_enter_cancels(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        assert isinstance(app.focused, Button) and app.focused.id == "no"
        await press(pilot, "enter")
        assert agent_world.engine.view("ava").state == "open"
        assert resets(agent_world.engine, "ava") == []


async def test_escape_cancels_the_reset(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r", "escape")
        assert isinstance(app.screen, DashboardScreen)
        assert agent_world.engine.view("ava").state == "open"


async def test_the_reset_dialog_names_agent_state_cause_and_warns_on_auth_trips(agent_world):
    await agent_world.trip_auth("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        body = static_text(app.screen, "#confirm-body")
        assert "Agent: ava" in body
        assert "State: OPEN" in body and "auth_failure" in body
        warning = static_text(app.screen, "#confirm-warning")
        assert "trips it again after 3 calls" in warning


async def test_an_upstream_trip_gets_no_credential_warning(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        assert not app.screen.query("#confirm-warning")


async def test_reset_is_not_offered_on_a_closed_breaker(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "r")
        assert isinstance(app.screen, DashboardScreen)


async def test_reset_from_the_detail_screen(agent_world):
    await agent_world.trip_auth("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        assert "reconnect that credential" in static_text(app.screen, "#detail-hint")
        await press(pilot, "r", "y")
        assert isinstance(app.screen, DetailScreen)
        assert agent_world.engine.view("ava").state == "closed"
        table = app.screen.query_one("#audit")
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[2] == "reset"
        assert OPERATOR in row[-1]
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_the_detail_screen_shows_the_failures_that_led_to_the_trip(agent_world):
    await agent_world.trip_upstream("ava")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "enter")
        trips = static_text(app.screen, "#detail-trips")
        assert "12:00:00 upstream ×5 → still open" in trips
        assert "after: payments refused ×5 (12:00:00)" in trips
        assert "or the path to it is down" in static_text(app.screen, "#detail-hint")


# -- the tool policy: shared breakers and paused credentials ---------------------------------


async def test_a_shared_breaker_is_shown_under_each_agent_marked_shared(tool_world):
    from breakerdeck.fixtures.faults import Fault, FaultKind

    tool_world.platforms["payments"].set_fault(Fault(FaultKind.REFUSED))
    await tool_world.harness.call_tool("ava", "charge")
    await tool_world.harness.call_tool("bo", "charge")
    await tool_world.harness.call_tool("ava", "charge")
    async with running(tool_world.engine) as (app, _pilot):
        text = cards_text(app)
        assert "ava · payments@default shared" in text
        assert "bo · payments@default shared" in text
        assert "3 failures · trips at 3" in text


async def test_f_then_y_marks_a_paused_credential_fixed(tool_world):
    from breakerdeck.fixtures.faults import Fault, FaultKind

    await tool_world.harness.call_tool("ava", "lookup")  # the credential has worked
    tool_world.platforms["crm"].revoke_credential()
    await tool_world.harness.call_tool("ava", "lookup")
    assert tool_world.engine.credential_paused("crm@default")
    tool_world.platforms["crm"].set_fault(Fault(FaultKind.OK))
    async with running(tool_world.engine) as (app, pilot):
        assert "PAUSED      ava · crm@default" in cards_text(app)
        await press(pilot, "f")
        assert isinstance(app.screen, ConfirmScreen)
        await press(pilot, "y")
        assert not tool_world.engine.credential_paused("crm@default")
        [restored] = tool_world.engine.audit.query(
            key="crm@default", types=[ev.CREDENTIAL_RESTORED]
        )
        assert restored.fields["actor"] == OPERATOR
        assert "CLOSED      ava · crm@default" in cards_text(app)


async def test_f_then_n_leaves_the_credential_paused(tool_world):
    await tool_world.harness.call_tool("ava", "lookup")
    tool_world.platforms["crm"].revoke_credential()
    await tool_world.harness.call_tool("ava", "lookup")
    async with running(tool_world.engine) as (_app, pilot):
        await press(pilot, "f", "n")
        assert tool_world.engine.credential_paused("crm@default")


# -- demo fault controls, help, quit ---------------------------------------------------------


class FakeControls:
    def __init__(self) -> None:
        self.platforms = ["crm", "payments"]
        self.calls: list[tuple[str, str]] = []
        self.revoked: set[str] = set()

    def status(self) -> dict[str, str]:
        return {p: "CRED REVOKED" if p in self.revoked else "ok" for p in self.platforms}

    def take_down(self, platform: str) -> None:
        self.calls.append(("take_down", platform))

    def bring_back(self, platform: str) -> None:
        self.calls.append(("bring_back", platform))

    def revoke(self, platform: str) -> None:
        self.calls.append(("revoke", platform))
        self.revoked.add(platform)

    def fix(self, platform: str) -> None:
        self.calls.append(("fix", platform))
        self.revoked.discard(platform)


async def test_demo_keys_act_on_the_selected_cards_platform(agent_world):
    await agent_world.trip_auth("ava", platform="crm")
    controls = FakeControls()
    async with running(agent_world.engine, controls=controls) as (app, pilot):
        assert "demo ok: crm payments" in str(app.screen.query_one("#status").content)
        await pilot.press("d", "u", "x")
        await press(pilot, "f", "y")
        assert controls.calls == [
            ("take_down", "crm"),
            ("bring_back", "crm"),
            ("revoke", "crm"),
            ("fix", "crm"),
        ]
        assert agent_world.engine.view("ava").state == "open"  # fixing is not resetting
        assert "credential fixed on crm: reset it now (r)" in cards_text(app)


async def test_question_mark_lists_every_dashboard_key(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        listed = set()
        for keys, what in KEYS:
            if what:
                listed |= {"/"} if keys == "/" else {k.strip() for k in re.split("[/,]", keys)}
        names = {"question_mark": "?", "slash": "/", "down": "↓", "up": "↑"}
        names |= {"pagedown": "pgdn", "pageup": "pgup"}
        for binding in app.screen_stack[-2].BINDINGS:
            for key in binding.key.split(","):
                assert names.get(key, key) in listed, key
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_q_quits(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, pilot):
        await press(pilot, "q")
    assert app.return_code == 0
    assert not app.is_running


async def test_the_card_list_has_focus_at_start(agent_world):
    await agent_world.call("ava", "crm")
    async with running(agent_world.engine) as (app, _pilot):
        assert isinstance(app.focused, CardList)


def test_caller_mistakes_are_not_called_down_in_the_status_line():
    from breakerdeck.console.demo import fault_word

    assert fault_word("http_400") == "caller errors (http_400)"
    assert fault_word("http_429") == "rate limiting (http_429)"
    assert fault_word("refused") == "DOWN (refused)"
    assert fault_word("http_503") == "DOWN (http_503)"
