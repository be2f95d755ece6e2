"""Snapshots of the console with a fixed story on a manual clock (no seed needed: the gateway
and fake platforms are deterministic, and time only moves when the story says so).

Review the report before accepting a changed snapshot (`pytest --snapshot-update`).
"""

from __future__ import annotations

from breakerdeck.fixtures.faults import Fault, FaultKind
from tests.console.conftest import OPERATOR, AgentWorld, make_app, settle

REFUSED = Fault(FaultKind.REFUSED)


async def tell_the_story(world: AgentWorld) -> None:
    """Seven agents, every state a card can show, ending at 12:18:20."""
    engine, clock = world.engine, world.clock
    # fay: tripped on search, then recovered by a good probe
    await world.trip_upstream("fay", "search")
    clock.advance(300)
    engine.poll()
    world.heal("search")
    await world.call("fay", "search")
    # gus: tripped on search, reset by the operator
    await world.trip_upstream("gus", "search")
    engine.reset("gus", OPERATOR, "vendor confirmed the fix")
    world.heal("search")
    # ava: payments is down; two failed probes in a row page
    await world.trip_upstream("ava", "payments")
    clock.advance(300)
    engine.poll()
    await world.call("ava", "payments")
    # cy: email is down; cy's breaker goes half-open at the end
    await world.trip_upstream("cy", "email")
    clock.advance(300)
    engine.poll()
    await world.call("ava", "payments")
    # bo: crm's credential is revoked; an auth trip, then a denied call
    await world.trip_auth("bo", "crm")
    clock.advance(200)
    await world.call("bo", "crm")
    # dee: two counted failures, still closed; eve: healthy
    await world.call("dee", "email", 2)
    await world.call("eve", "search")
    engine.poll()


def story_app(world: AgentWorld, *, toasts: bool = True):
    app = make_app(world.engine, speed=5.0)

    async def run_before(pilot) -> None:
        await tell_the_story(world)
        await settle(pilot, 6)
        if not toasts:  # the page's toast would cover the screen under test
            app.clear_notifications()
            await settle(pilot)

    return app, run_before


def test_the_dashboard_at_80x24(snap_compare, agent_world):
    app, run_before = story_app(agent_world)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_the_dashboard_at_160x48(snap_compare, agent_world):
    app, run_before = story_app(agent_world)
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_the_reset_dialog_for_an_auth_trip(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(app, press=["j", "r", "_"], terminal_size=(80, 24), run_before=run_before)


def test_the_detail_screen(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(app, press=["enter", "_"], terminal_size=(80, 24), run_before=run_before)


def test_the_help_screen(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(
        app, press=["question_mark", "_"], terminal_size=(80, 24), run_before=run_before
    )
