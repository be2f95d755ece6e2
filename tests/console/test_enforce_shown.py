"""`M`: a shadow rollout's end, every shadow breaker shown (the filter's) switched to enforce
from one dialog, one mode write each through the gate of `m`; never from a viewer's console."""

from __future__ import annotations

from breakerdeck.console.messages import EnforceShownRequested
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.engine import events as ev
from tests.console.conftest import OPERATOR, filter_by, press, running, settle
from tests.console.helpers import static_text
from tests.console.test_palette import titles
from tests.console.test_steer import open_dialog, written
from tests.console.test_table import open_table
from tests.console.test_watch import Replica, until, watch

#: In shadow: the billing agents and ops-cy; billing-dee enforces.
SHADOW = ("billing-ava", "billing-bo", "ops-cy")


async def rollout(world) -> None:
    for agent in (*SHADOW, "billing-dee"):
        await world.call(agent, "payments")
    for agent in SHADOW:
        world.engine.set_mode(agent, "shadow", "deploy", "rollout")


def modes(world) -> dict[str, str]:
    return {agent: world.engine.view(agent).mode for agent in (*SHADOW, "billing-dee")}


async def test_M_switches_every_shadow_breaker_shown_to_enforce_once_confirmed(agent_world):
    await rollout(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await filter_by(pilot, "agent:billing*")  # ops-cy is not shown
        screen = await open_dialog(pilot, "M")
        assert static_text(screen, "#write-title") == "Switch 2 shadow breakers shown to enforce?"
        body = static_text(screen, "#write-body")
        assert "billing-ava: CLOSED" in body and "billing-bo: CLOSED" in body
        assert "ops-cy" not in body and "billing-dee" not in body
        await press(pilot, "y")
        assert isinstance(app.screen, DashboardScreen)
    assert modes(agent_world) == {
        "billing-ava": "enforce",
        "billing-bo": "enforce",
        "ops-cy": "shadow",
        "billing-dee": "enforce",
    }
    for agent in ("billing-ava", "billing-bo"):
        [row] = [
            r for r in written(agent_world.engine, agent, ev.MODE) if r.fields["to"] == "enforce"
        ]
        assert row.fields["actor"] == OPERATOR
        assert row.fields["reason"] == "switched to enforce from the console (M)"


async def test_M_cancelled_switches_nothing(agent_world):
    await rollout(agent_world)
    async with running(agent_world.engine) as (_app, pilot):
        await open_dialog(pilot, "M")
        await press(pilot, "escape")
    assert set(modes(agent_world).values()) == {"shadow", "enforce"}
    assert modes(agent_world)["billing-ava"] == "shadow"


async def test_the_table_offers_M_over_its_rows_and_the_palette_lists_it(agent_world):
    await rollout(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        await open_table(pilot)
        assert "Enforce all shown" in titles(app)
        screen = await open_dialog(pilot, "M")
        assert "Switch 3 shadow breakers" in static_text(screen, "#write-title")


async def test_M_is_greyed_out_with_no_shadow_breaker_shown(agent_world):
    await agent_world.call("ava", "payments")
    async with running(agent_world.engine) as (app, pilot):
        assert app.screen.check_action("enforce_shown", ()) is None
        assert "Enforce all shown" not in titles(app)
        await press(pilot, "M")
        assert not isinstance(app.screen, WriteScreen)


async def test_a_viewers_console_offers_no_M_from_any_key_or_message(agent_world, as_web):
    as_web("viewer")
    await rollout(agent_world)
    async with running(agent_world.engine) as (app, pilot):
        assert app.screen.check_action("enforce_shown", ()) is False
        await press(pilot, "M")
        app.post_message(EnforceShownRequested(app.board.cards()))  # a palette command, a click
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
    assert modes(agent_world)["billing-ava"] == "shadow"


async def test_M_refused_for_many_names_three_and_counts_the_rest(agent_world):
    five = [f"fleet-{n}" for n in range(5)]
    for agent in five:
        await agent_world.call(agent, "payments")
        agent_world.engine.set_mode(agent, "shadow", "deploy", "rollout")
    replica = Replica(agent_world, "replica-a")
    async with replica as feed:
        app = await watch(feed.url)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: sum(card.shadow for card in app.board.cards()) == 5)
            await open_dialog(pilot, "M")
            await replica.stop()  # the engine goes away while the operator reads the dialog
            await until(pilot, lambda: app.source.stale_since is not None)
            await press(pilot, "y")
            await until(pilot, lambda: any("more" in n.message for n in app._notifications))
            said = [n.message for n in app._notifications if n.severity == "error"]
    assert len(said) == 4
    assert all(" not switched: " in line and "not connected" in line for line in said[:3])
    assert said[3] == "… and 2 more not switched."
    assert {agent_world.engine.view(agent).mode for agent in five} == {"shadow"}
