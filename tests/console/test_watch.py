"""`breakerdeck watch`: the console on remote engines, over real feeds on loopback.

Each engine is driven through the real gateway over counting fake platforms (a manual clock)
and served with `serve_feed` on an ephemeral port; the console reads it with `RemoteSource`.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from textual.pilot import Pilot

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.remote_source import RemoteSource
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.dashboard import DashboardScreen
from breakerdeck.console.screens.detail import DetailScreen
from breakerdeck.engine import events as ev
from breakerdeck.engine.feed.server import FeedServer, serve_feed
from breakerdeck.fixtures.faults import Fault, FaultKind
from tests.console.conftest import OPERATOR, AgentWorld, ToolWorld
from tests.console.helpers import cards_text, countdown_of, header_text, static_text

REFUSED = Fault(FaultKind.REFUSED)
VIEWER_TOKEN = "watch-viewer-token"
OPERATOR_TOKEN = "watch-operator-token"


def served(world: AgentWorld | ToolWorld, name: str, port: int = 0):
    return serve_feed(
        world.engine,
        port=port,
        viewer_token=VIEWER_TOKEN,
        operator_token=OPERATOR_TOKEN,
        source_name=name,
    )


class Replica:
    """A world's feed that a test stops and starts again on the same port: a replica that dies
    and comes back. `async with` serves it, and stops it at the end if it is up then."""

    def __init__(self, world: AgentWorld, name: str) -> None:
        self.world, self.name, self.port = world, name, 0
        self._served: AbstractAsyncContextManager[FeedServer] | None = None

    async def start(self) -> FeedServer:
        self._served = served(self.world, self.name, port=self.port)
        feed = await self._served.__aenter__()
        self.port = feed.port
        return feed

    async def stop(self) -> None:
        up, self._served = self._served, None
        if up is not None:
            await up.__aexit__(None, None, None)

    async def __aenter__(self) -> FeedServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


async def watch(*urls: str, token: str = OPERATOR_TOKEN) -> BreakerdeckApp:
    source = RemoteSource(urls, tokens=[token], min_backoff=0.05, max_backoff=0.2)
    assert await source.prime(timeout=5) == []
    return BreakerdeckApp(source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0)


@asynccontextmanager
async def watching(
    world: AgentWorld | ToolWorld,
    name: str,
    *,
    token: str = OPERATOR_TOKEN,
    size: tuple[int, int] = (100, 30),
) -> AsyncIterator[tuple[BreakerdeckApp, Pilot]]:
    """`world`'s feed served as `name`, and a console watching it with `token`, running."""
    async with served(world, name) as feed:
        app = await watch(feed.url, token=token)
        async with app.run_test(size=size) as pilot:
            yield app, pilot


def assert_cooling_down(text: str, agent: str) -> None:
    """`agent`'s card is open, its probe counted down within the 300 s cooldown. The console
    counts on its own clock: how much of it a loaded machine lets pass before the look is not
    the behaviour under test."""
    shown = re.search(rf"OPEN +{agent} .*probe in (\d\d):(\d\d)", text)
    assert shown, text
    assert 0 < int(shown[1]) * 60 + int(shown[2]) <= 300, text


async def until(pilot, condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def test_cards_come_from_the_snapshot_and_look_as_in_demo_mode(worlds):
    a = worlds("a")
    await a.trip_auth("ava")
    await a.call("bob", "payments")
    async with watching(a, "replica-a") as (app, pilot):
        await until(pilot, lambda: "bob" in cards_text(app))
        text = cards_text(app)
        assert_cooling_down(text, "ava")
        assert "3 failures · trips at auth 3 / upstream 5 · cause auth" in text
        assert "CLOSED      bob" in text
        assert "auth×3 → open" in text  # the trip, from the snapshot's fields
        assert " on replica-a" not in text  # one source: no source labels on the cards
        assert "replica-a · operator" in header_text(app)
        assert app.source.stale_since is None


async def test_an_event_updates_its_card(worlds):
    a = worlds("a")
    await a.call("ava", "crm")
    async with watching(a, "replica-a") as (app, pilot):
        await until(pilot, lambda: "CLOSED      ava" in cards_text(app))
        await a.trip_auth("ava")
        await until(pilot, lambda: "OPEN" in cards_text(app))
        text = cards_text(app)
        assert_cooling_down(text, "ava")
        assert "reauth_failed on crm" in text
        assert "auth×3 → open" in text
        assert "denied none yet" in text
        await a.call("ava", "crm")  # refused: the breaker is open
        await until(pilot, lambda: "crm breaker open" in cards_text(app))


async def test_two_sources_reporting_a_key_show_one_aggregate_line(worlds):
    a, b = worlds("a"), worlds("b")
    await a.trip_upstream("ava")
    await b.call("ava", "crm")
    await b.call("bob", "crm")
    async with served(a, "replica-a") as fa, served(b, "replica-b") as fb:
        app = await watch(fa.url, fb.url)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "bob" in cards_text(app))
            lines = cards_text(app).splitlines()
            assert sum("ava: open on 1 of 2 · closed on 1 of 2" in line for line in lines) == 1
            assert not any(line.strip().startswith("bob:") for line in lines)  # one source
            assert any("ava on replica-a" in line and "OPEN" in line for line in lines)
            assert any("ava on replica-b" in line and "CLOSED" in line for line in lines)
            assert any("bob on replica-b" in line for line in lines)
            assert "2 sources · operator" in header_text(app)
            # the key's cards sit together, under the aggregate line
            at = next(i for i, line in enumerate(lines) if "ava: open on" in line)
            assert "ava on replica-a" in lines[at + 1]
            # an event on one source moves the aggregate
            await b.trip_upstream("ava")
            await until(pilot, lambda: "ava: open on 2 of 2" in cards_text(app))


async def test_a_lost_source_goes_stale_and_resyncs_without_duplicates(worlds):
    a, b = worlds("a"), worlds("b")
    await a.call("ava", "crm")
    await b.call("bob", "crm")
    replica_a = Replica(a, "replica-a")
    async with replica_a as fa, served(b, "replica-b") as fb:
        app = await watch(fa.url, fb.url)
        source: RemoteSource = app.source  # type: ignore[assignment]
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "bob" in cards_text(app))
            await a.trip_auth("ava")  # a trip and a denial, received live
            await a.call("ava", "crm")
            await until(pilot, lambda: "crm breaker open" in cards_text(app))

            await replica_a.stop()  # replica-a dies
            await until(pilot, lambda: "STALE since" in cards_text(app))
            lines = cards_text(app).splitlines()
            assert any("ava on replica-a" in x and "STALE since" in x for x in lines)
            assert not any("bob on replica-b" in x and "STALE" in x for x in lines)
            assert "STALE since" in header_text(app)
            assert "1 stale" in header_text(app)

            await a.call("ava", "crm")  # happens while nobody is watching replica-a
            await replica_a.start()  # it comes back on the same port
            await until(pilot, lambda: "STALE" not in cards_text(app))
            assert source.stale_since is None
            # the cards read staleness when drawn; the header at the next repaint
            await until(pilot, lambda: "STALE" not in header_text(app))
            text = cards_text(app)
            assert text.count("auth×3 → open") == 1  # history not doubled by the resync
            await a.call("ava", "crm")  # and live again after the snapshot
            ident = next(v.key for v in source.snapshot() if v.key.endswith("ava"))
            await until(pilot, lambda: _received(source, ident) >= 6)
            rows = await source.audit(ident)
            seqs = [row.seq for row in rows]
            assert len(seqs) == len(set(seqs))
            assert seqs == sorted(seqs, reverse=True)


def _received(source: RemoteSource, ident: str) -> int:
    feed, key = source._locate(ident)
    return len(feed.received.get(key, ())) if feed is not None else 0


async def test_r_then_y_with_an_operator_token_resets_over_the_feed(worlds):
    a = worlds("a")
    await a.trip_auth("ava")
    async with watching(a, "replica-a") as (app, pilot):
        await until(pilot, lambda: "OPEN" in cards_text(app))
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert static_text(app.screen, "#confirm-title") == "Reset ava on replica-a?"
        await pilot.press("y")
        await until(pilot, lambda: a.engine.view("ava").state == "closed")
        [reset] = a.engine.audit.query(key="ava", types=[ev.RESET])
        assert reset.fields["actor"] == f"remote:operator:{OPERATOR}"
        await until(pilot, lambda: "CLOSED      ava" in cards_text(app))
        assert f"auth×3 → reset by remote:operator:{OPERATOR}" in cards_text(app)


async def test_with_a_viewer_token_reset_is_not_offered(worlds):
    a = worlds("a")
    await a.trip_auth("ava")
    async with watching(a, "replica-a", token=VIEWER_TOKEN) as (app, pilot):
        await until(pilot, lambda: "OPEN" in cards_text(app))
        assert "· viewer" in header_text(app)
        assert app.screen.check_action("reset", ()) is False
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert a.engine.view("ava").state == "open"
        assert a.engine.audit.query(key="ava", types=[ev.RESET]) == []


async def test_shift_r_resets_the_key_on_every_source_where_it_is_open(worlds):
    a, b, c = worlds("a"), worlds("b"), worlds("c")
    await a.trip_upstream("ava")
    await b.trip_auth("ava")
    await c.call("ava", "crm")
    async with (
        served(a, "replica-a") as fa,
        served(b, "replica-b") as fb,
        served(c, "replica-c") as fc,
    ):
        app = await watch(fa.url, fb.url, fc.url)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "open on 2 of 3" in cards_text(app))
            await pilot.press("r")  # one source: the dialog says which
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "on replica-" in static_text(app.screen, "#confirm-title")
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            body = static_text(app.screen, "#confirm-body")
            assert "On 2 of the 3 sources reporting it" in body
            assert "replica-a: OPEN" in body and "replica-b: OPEN" in body
            assert "replica-c" not in body.split("left alone")[0].split("reporting it:")[1]
            await pilot.press("y")
            await until(pilot, lambda: a.engine.view("ava").state == "closed")
            await until(pilot, lambda: b.engine.view("ava").state == "closed")
            assert c.engine.audit.query(key="ava", types=[ev.RESET]) == []
            await until(pilot, lambda: "closed on 3 of 3" in cards_text(app))


async def test_details_show_the_events_received_and_where_the_full_log_is(worlds):
    a = worlds("a")
    await a.call("ava", "crm")
    async with served(a, "replica-a") as feed:
        app = await watch(feed.url)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "ava" in cards_text(app))
            await a.trip_auth("ava")
            await until(pilot, lambda: "OPEN" in cards_text(app))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen))
            screen = app.screen
            await until(pilot, lambda: len(screen.rows) == 4)
            assert [r.type for r in screen.rows] == [ev.TRIPPED] + [ev.CALL_FAILED] * 3
            note = static_text(screen, "#detail-note")
            assert "since this console connected" in note
            assert f"full audit log lives on the engine ({feed.url})" in note
            assert "auth ×3 → still open" in static_text(screen, "#detail-trips")


async def test_replicas_served_under_one_name_keep_their_own_event_counters(worlds):
    a, b = worlds("a"), worlds("b")
    await b.call("bob", "crm")
    async with served(a, "replica") as fa, served(b, "replica") as fb:
        app = await watch(fa.url, fb.url)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "bob" in cards_text(app))
            await a.trip_upstream("ava")
            await a.call("ava", "payments", 20)  # denied: A's seqs run far ahead of B's
            await until(pilot, lambda: "payments breaker open" in cards_text(app))
            await b.trip_upstream("bob")  # B's events carry seqs A already used
            await until(
                pilot,
                lambda: (
                    "bob: open on 1 of 1" in cards_text(app)
                    or any(
                        "bob on replica" in line and "OPEN" in line
                        for line in cards_text(app).splitlines()
                    )
                ),
                timeout=3,
            )
            assert any(
                "bob on replica" in line and "OPEN" in line for line in cards_text(app).splitlines()
            )


async def test_a_gateway_and_an_mcp_proxy_are_watched_together(worlds, tool_world):
    a = worlds("a")
    await a.trip_auth("ava")
    tool_world.platforms["payments"].set_fault(REFUSED)
    for _ in range(3):
        await tool_world.harness.call_tool("bot", "charge", {})
    async with served(a, "gateway") as fa, served(tool_world, "mcp") as fb:
        app = await watch(fa.url, fb.url)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "payments@" in cards_text(app))
            text = cards_text(app)
            assert "3 failures · trips at auth 3 / upstream 5" in text  # the gateway's card
            assert "3 failures · trips at 3" in text  # the proxy's card


class LocalClock:
    """This machine's clock as the watching console reads it (`remote_source.time`)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


async def test_countdowns_against_a_sped_up_engine_run_at_its_speed(worlds, monkeypatch):
    from breakerdeck.console import remote_source

    a = worlds("a")
    local = LocalClock(a.clock.wall())
    monkeypatch.setattr(remote_source, "time", local)
    await a.trip_upstream("ava")
    async with watching(a, "replica-a") as (app, pilot):
        await until(pilot, lambda: countdown_of(cards_text(app), "ava") == "05:00")
        # The engine runs five times as fast as this machine: two samples of its clock (an
        # event each) that agree, as one alone could be a manual clock's jump.
        for agent in ("bo", "cy"):
            a.clock.advance(25)
            local.now += 5
            await a.call(agent, "crm")
            await until(pilot, lambda agent=agent: agent in cards_text(app))
        local.now += 2  # ten more engine seconds
        app.tick()  # the one timer: the clock is read afresh
        await pilot.pause()
        assert countdown_of(cards_text(app), "ava") == "04:00"
