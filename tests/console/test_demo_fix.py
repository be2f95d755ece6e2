"""In demo mode `f` (the credential is fixed) applies where there is a credential to fix: a
card tripped on auth, or one whose platform's credential was revoked; not a healthy card."""

from __future__ import annotations

from tests.console.conftest import press, running
from tests.console.test_operator import FakeControls


def on_crm(key: str) -> str:
    return "crm"  # every agent of these tests calls crm, as the demo's roster maps them


async def test_f_is_not_offered_on_a_healthy_card_in_demo_mode(agent_world):
    await agent_world.call("ava", "crm")
    controls = FakeControls()
    async with running(agent_world.engine, controls=controls, platform_of=on_crm) as (app, pilot):
        assert app.screen.check_action("fix", ()) is None
        await press(pilot, "f")
        assert app.screen.id == "dashboard"  # no "Credential for crm fixed?" dialog


async def test_f_is_offered_once_the_cards_platform_credential_is_revoked(agent_world):
    await agent_world.call("ava", "crm")
    controls = FakeControls()
    async with running(agent_world.engine, controls=controls, platform_of=on_crm) as (app, pilot):
        await press(pilot, "x")  # revoke crm's credential
        assert app.screen.check_action("fix", ()) is True


async def test_f_is_offered_on_a_card_tripped_on_its_credential(agent_world):
    await agent_world.trip_auth("ava", platform="crm")
    async with running(agent_world.engine, controls=FakeControls()) as (app, _pilot):
        assert app.screen.check_action("fix", ()) is True
