"""Snapshots of the console with a fixed story on a manual clock (no seed needed: the gateway
and fake platforms are deterministic, and time only moves when the story says so).

Review the report before accepting a changed snapshot (`pytest --snapshot-update`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.remote_source import RemoteSource
from breakerdeck.fixtures.faults import Fault, FaultKind
from tests.console.conftest import OPERATOR, AgentWorld, make_app, settle
from tests.console.helpers import cards_text
from tests.console.test_watch import OPERATOR_TOKEN, served

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


# The story is told after the app started; until a key moves it, the selection follows the top
# card (issue 22), so the dashboard's snapshots are the state no key reached.
def story_app(world: AgentWorld, *, toasts: bool = True, story=tell_the_story):
    app = make_app(world.engine, speed=5.0)

    async def run_before(pilot) -> None:
        await story(world)
        await settle(pilot, 6)
        if not toasts:  # the page's toast would cover the screen under test
            app.clear_notifications()
            await settle(pilot)

    return app, run_before


def test_the_dashboard_at_80x24(snap_compare, agent_world):
    app, run_before = story_app(agent_world)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_the_dashboard_at_200x50_with_the_event_log(snap_compare, agent_world):
    app, run_before = story_app(agent_world)
    assert snap_compare(app, terminal_size=(200, 50), run_before=run_before)


def test_the_reset_dialog_for_an_auth_trip(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(
        app, press=["g", "j", "r", "_"], terminal_size=(80, 24), run_before=run_before
    )


def test_the_detail_screen(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(
        app, press=["g", "enter", "_"], terminal_size=(80, 24), run_before=run_before
    )


def test_the_help_screen(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(
        app, press=["question_mark", "_"], terminal_size=(80, 24), run_before=run_before
    )


def test_the_table_view_at_200x50(snap_compare, agent_world):
    app, run_before = story_app(agent_world, toasts=False)
    assert snap_compare(app, press=["g", "t", "_"], terminal_size=(200, 50), run_before=run_before)


class ServedInThread:
    """The engine's live feed on its own thread and loop, as another process would serve it,
    so the snapshot's own loop holds only the console."""

    def __init__(self, world: AgentWorld, name: str) -> None:
        self.world, self.name = world, name
        self.url: str | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with served(self.world, self.name) as feed:
            self.url = feed.url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> str:
        self._thread.start()
        assert self._ready.wait(5), "the feed did not start"
        assert self.url is not None
        return self.url

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)


def test_watch_at_80x24(snap_compare, agent_world, monkeypatch):
    """The same story over a live feed, with this machine's clock pinned to the engine's. What
    happened before the console connected is not on the feed (no denied calls, the trip from
    the snapshot's fields), so it differs from the demo's snapshot there."""
    from breakerdeck.console import remote_source

    world = agent_world
    asyncio.run(tell_the_story(world))
    monkeypatch.setattr(remote_source, "time", SimpleNamespace(time=world.clock.wall))
    with ServedInThread(world, "replica-a") as url:
        source = RemoteSource([url], tokens=[OPERATOR_TOKEN], min_backoff=0.02, max_backoff=0.05)
        assert asyncio.run(source.prime(timeout=5)) == []
        app = BreakerdeckApp(source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0)

        async def run_before(pilot) -> None:
            deadline = time.monotonic() + 5
            while "fay" not in cards_text(app) and time.monotonic() < deadline:
                await pilot.pause(0.02)
            await settle(pilot)

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
