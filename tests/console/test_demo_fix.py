"""In demo mode `f` (the credential is fixed) applies where there is a credential to fix: a
card tripped on auth, or one whose platform's credential was revoked; not a healthy card."""

from __future__ import annotations

from tests.console.conftest import make_app, press, settle
from tests.console.test_operator import FakeControls


def on_crm(key: str) -> str:
    return "crm"  # every agent of these tests calls crm, as the demo's roster maps them


async def test_f_is_not_offered_on_a_healthy_card_in_demo_mode(agent_world):
    await agent_world.call("ava", "crm")
    app = make_app(agent_world.engine, controls=FakeControls(), platform_of=on_crm)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.screen.check_action("fix", ()) is None
        await press(pilot, "f")
        assert app.screen.id == "dashboard"  # no "Credential for crm fixed?" dialog


async def test_f_is_offered_once_the_cards_platform_credential_is_revoked(agent_world):
    await agent_world.call("ava", "crm")
    controls = FakeControls()
    app = make_app(agent_world.engine, controls=controls, platform_of=on_crm)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("x")  # revoke crm's credential
        await settle(pilot)
        assert app.screen.check_action("fix", ()) is True


async def test_f_is_offered_on_a_card_tripped_on_its_credential(agent_world):
    await agent_world.trip_auth("ava", platform="crm")
    app = make_app(agent_world.engine, controls=FakeControls())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.screen.check_action("fix", ()) is True
