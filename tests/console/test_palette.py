"""The command palette (`ctrl+p`): every action the screen offers now, and never one its
`check_action` refuses (a viewer's web console and a replay have no reset there)."""

from __future__ import annotations

from textual.command import CommandPalette

from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.console.web_role import ACTOR_VARIABLE, ROLE_VARIABLE
from tests.console.conftest import make_app, press, settle
from tests.console.test_operator import FakeControls


def titles(app) -> list[str]:
    return [command.title for command in app.get_system_commands(app.screen)]


async def test_the_palette_offers_every_action_of_the_dashboard(agent_world):
    await agent_world.trip_upstream("ava")
    async with make_app(agent_world.engine, controls=FakeControls()).run_test() as pilot:
        await settle(pilot)
        offered = titles(pilot.app)
        for title in ("Help", "Quit", "Filter", "Details", "Table", "Reset", "Export"):
            assert title in offered
        assert "Platform down (demo)" in offered and "Theme" in offered
        assert offered.count("Quit") == 1


async def test_the_palette_leaves_out_what_does_not_apply_to_the_selected_card(agent_world):
    await agent_world.call("bo", "crm")
    async with make_app(agent_world.engine).run_test() as pilot:
        await settle(pilot)
        assert "Reset" not in titles(pilot.app)  # a closed breaker: r is greyed out


async def test_a_viewers_palette_has_no_write(agent_world, monkeypatch):
    monkeypatch.setenv(ROLE_VARIABLE, "viewer")
    monkeypatch.setenv(ACTOR_VARIABLE, "web:203.0.113.7")
    await agent_world.trip_auth("ava")
    async with make_app(agent_world.engine, controls=FakeControls()).run_test() as pilot:
        await settle(pilot)
        offered = titles(pilot.app)
        assert "Details" in offered and "Export" in offered
        assert not {"Reset", "Reset all", "Fixed", "Platform down (demo)"} & set(offered)
        assert not {"reset", "mark a credential fixed"} & set(offered)  # nor the notice's keys
        await press(pilot, "ctrl+p")
        assert isinstance(pilot.app.screen, CommandPalette)
        await press(pilot, *"reset")
        await press(pilot, "enter", "enter")
    assert agent_world.engine.view("ava").state == "open"


async def test_a_command_chosen_in_the_palette_runs_its_action(agent_world):
    await agent_world.trip_upstream("ava")
    async with make_app(agent_world.engine).run_test() as pilot:
        await settle(pilot)
        await press(pilot, "ctrl+p")
        await press(pilot, *"details")
        await press(pilot, "down", "enter")
        assert isinstance(pilot.app.screen, DetailScreen)
        assert "Reset" in titles(pilot.app)  # the detail screen's own r
