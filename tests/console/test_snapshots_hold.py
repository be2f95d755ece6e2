"""Snapshots of a held card, a shadow card and the dialogs of `o` and `O`, on a manual clock
(review the report before accepting a changed snapshot: `pytest --snapshot-update`)."""

from __future__ import annotations

from tests.console.conftest import AgentWorld
from tests.console.test_snapshots import story_app


async def hold_and_shadow(world: AgentWorld) -> None:
    """ava held by the on-call for 30 minutes; bo tripped in shadow, a call it would refuse
    let through; eve healthy."""
    engine = world.engine
    await world.call("ava", "payments")
    await world.call("eve", "search")
    await world.call("bo", "email")
    engine.set_mode("bo", "shadow", "oncall:dana", "trial week")
    await world.trip_upstream("bo", "email")
    await world.call("bo", "email")
    engine.hold("ava", "oncall:dana", "vendor [b]window[/b] (announced)", 30 * 60)
    world.clock.advance(95)


def held_app(world: AgentWorld):
    return story_app(world, toasts=False, story=hold_and_shadow)


def test_a_held_card_and_a_shadow_card_at_80x24(snap_compare, agent_world):
    app, run_before = held_app(agent_world)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_the_hold_dialog_at_80x24(snap_compare, agent_world):
    app, run_before = held_app(agent_world)
    assert snap_compare(app, press=["G", "o", "_"], terminal_size=(80, 24), run_before=run_before)


def test_the_release_dialog_at_80x24(snap_compare, agent_world):
    app, run_before = held_app(agent_world)
    assert snap_compare(
        app, press=["g", "j", "O", "_"], terminal_size=(80, 24), run_before=run_before
    )
