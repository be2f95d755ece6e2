"""`breakerdeck watch` on gateway replicas that share their breakers through Redis (DESIGN,
"Replicas"): one aggregate per agent across the replicas, a reset through one replica that
resets the agent on all of them (audited once), and the shared store's health in the header,
per replica, at 80x24 and without colour.

Each replica is a real `Engine` with a `SharedStore` on the suite's real `redis-server` (or on
`redis://127.0.0.1:1/0`, where nothing listens: a store lost from the start), all on one manual
clock, each serving its own feed on loopback; the console reads them with `RemoteSource`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import pytest
from rich.text import Text

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.remote_source import RemoteSource
from breakerdeck.console.screens.confirm import ConfirmScreen
from breakerdeck.console.screens.write import WriteScreen
from breakerdeck.console.widgets.bars import SummaryBar
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.shared import SharedStore
from tests.console.conftest import OPERATOR, running, settle
from tests.console.helpers import cards_text, header_text, static_text, status_text
from tests.console.test_no_color import LOUD, contrast, find, screen_segments
from tests.console.test_watch import until
from tests.console.test_watch import watch as watch_feeds
from tests.redis_server import RedisServer

AGENT = "ava"
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
NOWHERE = "redis://127.0.0.1:1/0"
VIEWER_TOKEN = "shared-viewer-token"
OPERATOR_TOKEN = "shared-operator-token"


class Fleet:
    """Replicas on one manual clock (which reads real time, so the console's countdowns are
    right), each with its own store and its own feed."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clock = ManualClock(epoch=time.time())
        self.engines: dict[str, Engine] = {}
        self.events: dict[str, list[Event]] = {}
        self.urls: list[str] = []
        self._feeds = AsyncExitStack()

    def replica(self, name: str, redis_url: str, wall: Callable[[], float] = time.time) -> Engine:
        """`wall`: the replica's real wall clock, the one checked against Redis's."""
        engine = Engine(
            AgentPolicy(),
            clock=self.clock,
            # A loaded round trip is no loss.
            shared=SharedStore(redis_url, timeout=5.0, clock=wall),
            instance=name,
            state_dir=self.tmp_path / name,
        )
        self.events[name] = []
        engine.subscribe(self.events[name].append)
        engine.restore()
        self.engines[name] = engine
        return engine

    async def serve(self) -> list[str]:
        """Each replica's feed, as `replica-<name>`; their URLs in the replicas' order."""
        for name, engine in self.engines.items():
            feed = await self._feeds.enter_async_context(
                serve_feed(
                    engine,
                    port=0,
                    viewer_token=VIEWER_TOKEN,
                    operator_token=OPERATOR_TOKEN,
                    source_name=f"replica-{name}",
                )
            )
            self.urls.append(feed.url)
        return self.urls

    async def close(self) -> None:
        await self._feeds.aclose()
        for engine in self.engines.values():
            engine.close()


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    made = Fleet(tmp_path)
    yield made
    await made.close()


@pytest.fixture
def no_color(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NO_COLOR", "1")
    yield


def fail(engine: Engine, times: int = 1) -> None:
    for _ in range(times):
        call = engine.enter(AGENT, AGENT, "payments", "charge", 30.0)
        if engine.admit(call, AgentPolicy().probe_lease()).allowed:
            engine.complete(call, UPSTREAM, "refused", 502)


#: The console watching this fleet's feeds (test_watch's, with this file's token).
watch = partial(watch_feeds, token=OPERATOR_TOKEN)


def header_fits(app: BreakerdeckApp) -> bool:
    bar = app.screen.query_one(SummaryBar)
    shown = bar.content
    return isinstance(shown, Text) and shown.cell_len <= app.size.width


# -- three replicas, one breaker ---------------------------------------------------------------


async def test_three_replicas_show_one_card_for_the_agent_open_on_3_of_3(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b, c = (fleet.replica(name, session_redis.url) for name in "abc")
    fail(a, 2)
    fail(b, 2)
    fail(c)  # the fifth, on the third replica: one breaker trips for all three
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 3 of 3" in cards_text(app))
        lines = cards_text(app).splitlines()
        assert sum(f"{AGENT}: open on" in line for line in lines) == 1
        [title] = [line for line in lines if line.strip().startswith(("▶ OPEN", "OPEN"))]
        assert f"{AGENT} on replica-a +2" in title
        assert "5 failures · trips at auth 3 / upstream 5 · cause upstream" in cards_text(app)
        assert header_text(app).startswith("OPEN 1  HALF-OPEN 0  PAUSED 0  CLOSED 0")
        assert "shared store" not in header_text(app)  # every store answers


async def test_a_replica_that_lost_its_store_keeps_its_own_card(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a", session_redis.url)
    fleet.replica("b", session_redis.url)
    alone = fleet.replica("c", NOWHERE)
    fail(a, 5)
    fail(alone, 5)  # tripped alone: open too, but its own breaker
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 3 of 3" in cards_text(app))
        titles = [line for line in cards_text(app).splitlines() if "probe in" in line]
        assert len(titles) == 2
        assert f"{AGENT} on replica-a +1 " in titles[0]
        assert f"{AGENT} on replica-c " in titles[1]


async def test_a_reset_through_one_replica_resets_the_agent_on_all_three_audited_once(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    engines = [fleet.replica(name, session_redis.url) for name in "abc"]
    fail(engines[0], 5)
    app = await watch(*await fleet.serve())
    source: RemoteSource = app.source  # type: ignore[assignment]
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 3 of 3" in cards_text(app))
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        title = static_text(app.screen, "#confirm-title")
        took = title.removeprefix(f"Reset {AGENT} on replica-").removesuffix("?")
        assert took in "abc" and len(took) == 1, title
        await pilot.press("y")
        await until(pilot, lambda: f"{AGENT}: closed on 3 of 3" in cards_text(app))
        # every feed carried the reset: the others' as relayed, with the taker's origin
        for feed in source.feeds:
            [reset] = [e for e in feed.received[AGENT] if e.type == ev.RESET]
            origin = reset.fields.get("origin")
            assert origin == (None if feed.label == f"replica-{took}" else took)
    for name, engine in fleet.engines.items():
        assert engine.view(AGENT).state == "closed"
        assert engine.audit is not None and engine.audit.flush(5)
        rows = engine.audit.query(key=AGENT, types=[ev.RESET])
        assert len(rows) == (1 if name == took else 0), name
        if name == took:
            assert rows[0].fields["actor"] == f"remote:operator:{OPERATOR}"


async def test_reset_all_sends_one_reset_to_the_replicas_that_share_the_breaker(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    engines = [fleet.replica(name, session_redis.url) for name in "abc"]
    fail(engines[0], 5)
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 3 of 3" in cards_text(app))
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert static_text(app.screen, "#confirm-title") == f"Reset {AGENT} on 1 source?"
        await pilot.press("y")
        await until(pilot, lambda: f"{AGENT}: closed on 3 of 3" in cards_text(app))
    rows = []
    for engine in engines:
        assert engine.audit is not None and engine.audit.flush(5)
        rows += engine.audit.query(key=AGENT, types=[ev.RESET])
    assert len(rows) == 1


async def test_enforce_all_shown_sends_one_write_to_the_replicas_that_share_the_breaker(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    engines = [fleet.replica(name, session_redis.url) for name in "abc"]
    fail(engines[0], 5)
    engines[0].set_mode(AGENT, "shadow", "deploy", "rollout")
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 3 of 3" in cards_text(app))
        await until(pilot, lambda: all(card.shadow for card in app.board.cards()))
        assert len(app.board.cards()) == 1  # one card for the breaker they share
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, WriteScreen))
        title = "Switch 1 shadow breaker shown to enforce?"
        assert static_text(app.screen, "#write-title") == title
        await pilot.press("y")
        await until(pilot, lambda: not any(card.shadow for card in app.board.cards()))
    rows = []
    for engine in engines:
        assert engine.view(AGENT).mode == "enforce"
        assert engine.audit is not None and engine.audit.flush(5)
        rows += [
            r for r in engine.audit.query(key=AGENT, types=[ev.MODE]) if r.fields["to"] == "enforce"
        ]
    assert len(rows) == 1


async def test_the_reset_dialog_says_a_shared_breaker_resets_on_every_replica(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a", session_redis.url)
    fleet.replica("b", session_redis.url)
    fail(a, 5)
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: open on 2 of 2" in cards_text(app))
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        said = " ".join(str(s.content) for s in app.screen.query("Static"))
        assert "every replica on the store is reset" in said
        assert " only" not in said  # not "Source: replica-a only": it reaches the others


# -- the shared store's health in the header ---------------------------------------------------


async def test_the_header_names_the_replica_that_lost_its_store_at_80x24(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    fleet.replica("a", session_redis.url)
    fleet.replica("b", session_redis.url)
    lost = fleet.replica("c", NOWHERE)
    fail(fleet.engines["a"], 5)
    fail(lost)  # counted alone: c's breaker stays closed
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "replica-c" in cards_text(app))
        header = header_text(app)
        assert "shared store lost on replica-c" in header
        assert header.startswith("OPEN 1  HALF-OPEN 0  PAUSED 0  CLOSED 1")  # a and b: one
        assert header_fits(app)
        # the line below says why, cut where the screen ends
        said = f"store lost on replica-c: {lost.shared_lost}"
        assert status_text(app) in (said, said[:79] + "…")


async def test_when_every_replica_lost_its_store_the_80_column_header_counts_them(
    fleet: Fleet,
) -> None:
    for name in "abc":
        fail(fleet.replica(name, NOWHERE))
    fail(fleet.engines["a"], 4)  # each decides alone: only replica a's breaker is open
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "replica-c" in cards_text(app))
        header = header_text(app)
        assert "shared store lost on 3 of 3" in header
        assert header.startswith("OPEN 1  HALF-OPEN 0  PAUSED 0  CLOSED 2")
        assert header_fits(app)
        # one Redis, one reason: said once, for the three of them
        assert status_text(app).startswith("store lost on replica-a, replica-b, replica-c: ")
        assert status_text(app).count("127.0.0.1:1/0") == 1


async def test_with_one_engine_the_header_says_shared_store_lost(fleet: Fleet) -> None:
    fleet.replica("a", NOWHERE)
    fail(fleet.engines["a"])
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: AGENT in cards_text(app))
        assert " shared store lost " in header_text(app)
        assert " on " not in header_text(app)
        assert header_fits(app)


async def test_a_replica_whose_clock_is_off_the_stores_is_named_under_the_header(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    fleet.replica("a", session_redis.url)
    fail(fleet.replica("b", session_redis.url, wall=lambda: time.time() + 3600))
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(200, 24)) as pilot:
        await until(pilot, lambda: "3600.0 s ahead" in status_text(app))
        assert status_text(app).startswith("shared store on replica-b: this replica's clock")
        assert "store lost" not in header_text(app)


async def test_with_no_color_the_lost_store_is_as_loud_as_an_open_breaker(
    fleet: Fleet, session_redis: RedisServer, no_color: None
) -> None:
    fleet.replica("a", session_redis.url)
    fail(fleet.replica("b", NOWHERE))
    fail(fleet.engines["a"], 5)
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "replica-b" in cards_text(app))
        app.clear_notifications()
        await settle(pilot)
        lines = screen_segments(app)
        assert contrast(find(lines, 0, "shared store lost on replica-b")) >= LOUD
        assert contrast(find(lines, 0, "OPEN")) >= LOUD


async def test_a_store_lost_while_watching_reaches_the_header_and_status_line_then_clears(
    fleet: Fleet, redis_server: RedisServer
) -> None:
    fleet.replica("a", redis_server.url)
    fleet.replica("b", redis_server.url)
    fail(fleet.engines["a"])
    app = await watch(*await fleet.serve())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: f"{AGENT}: closed on 2 of 2" in cards_text(app))
        redis_server.kill()
        await until(pilot, lambda: "shared store lost on 2 of 2" in header_text(app))
        await until(pilot, lambda: "127.0.0.1:" in status_text(app))
        assert not [n for n in app._notifications if "store" in n.message]  # nothing over cards
        redis_server.start()
        await until(pilot, lambda: "shared store" not in header_text(app))
        assert "store lost" not in status_text(app)


async def test_an_in_process_engine_shows_its_lost_store_in_the_header(tmp_path: Path) -> None:
    engine = Engine(AgentPolicy(), shared=SharedStore(NOWHERE, timeout=0.3))
    engine.restore()
    try:
        async with running(engine) as (app, _pilot):
            assert " shared store lost " in header_text(app)
            said = f"store lost: {engine.shared_lost}"
            assert status_text(app) in (said, said[:79] + "…")
    finally:
        engine.close()
