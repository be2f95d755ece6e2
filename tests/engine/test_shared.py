"""Replicas share each agent's breaker through a real Redis (DESIGN, "Replicas").

Every replica here is a full `Engine` with its own instance, all on one manual clock; Redis is
the real `redis-server` the suite starts. Round trips are counted at the server
(`INFO commandstats`), never by instrumenting our code. The only real-time waits are for a
message to cross Redis's pub/sub, never for a cooldown.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from breakerdeck.engine import AgentPolicy, Engine, ToolPolicy, shared
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.core.breaker import DenyReason
from breakerdeck.engine.errors import NotHeld, UnknownKey
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.shared import SharedStore
from tests.redis_server import RedisServer
from tests.tcp_cut import Cuttable
from tests.waiting import wait_until

AGENT = "billing-assistant"
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
AUTH = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail="401 after refresh")
NOT_FOUND = Outcome(OutcomeClass.CALLER_ERROR, detail="404")
LEASE = AgentPolicy().probe_lease()


@dataclass
class Replica:
    engine: Engine
    events: list[Event] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)

    def call(self, outcome: Outcome | None = None, agent: str = AGENT) -> Any:
        """One call: admitted or refused; when admitted and `outcome` given, completed."""
        call = self.engine.enter(agent, agent, "payments", "charge", 30.0)
        admission = self.engine.admit(call, LEASE)
        if admission.allowed and outcome is not None:
            self.engine.complete(call, outcome, "none", 200 if outcome.is_success else 502)
        return admission

    def state(self, agent: str = AGENT) -> str:
        """The breaker's state here, "unknown" before this replica has heard of the agent."""
        try:
            return self.engine.view(agent).state
        except UnknownKey:
            return "unknown"

    def count(self, agent: str = AGENT) -> int | None:
        """The breaker's count here, None before this replica has heard of the agent."""
        try:
            return self.engine.view(agent).count
        except UnknownKey:
            return None

    def seen(self, kind: str) -> list[Event]:
        return [event for event in self.events if event.type == kind]


#: The store's timeout for a test that pauses Redis; others wait long enough that a loaded
#: machine never makes a round trip look like a lost store.
SHORT_TIMEOUT = 0.3


class Fleet:
    def __init__(self, redis_url: str, tmp_path: Path, timeout: float = 5.0) -> None:
        self.clock = ManualClock()
        self.url = redis_url
        self.tmp_path = tmp_path
        self.timeout = timeout
        self.replicas: list[Replica] = []

    def replica(
        self,
        name: str,
        *,
        url: str | None = None,
        state: bool = False,
        wall: Callable[[], float] = time.time,
    ) -> Replica:
        """`wall`: the replica's real wall clock, the one checked against Redis's."""
        pages: list[dict[str, Any]] = []
        engine = Engine(
            AgentPolicy(),
            clock=self.clock,
            shared=SharedStore(url or self.url, timeout=self.timeout, clock=wall),
            instance=name,
            state_dir=self.tmp_path / name if state else None,
            page_hook=pages.append,
        )
        replica = Replica(engine, pages=pages)
        replica.engine.subscribe(replica.events.append)
        replica.engine.restore()
        self.replicas.append(replica)
        return replica

    def close(self) -> None:
        for replica in self.replicas:
            replica.engine.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(autouse=True)
def quick_listener(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listener's real-time rhythm, a tenth of the product's: a lost store is tried again
    (and a quiet one pinged) every 0.1 s, not every second, and closing an engine waits at most
    0.02 s for its listener. What the tests wait for in real time, a replica rejoining, then
    comes ten times sooner; what they check of it is the same."""
    monkeypatch.setattr(shared, "RETRY_SECONDS", 0.1)
    monkeypatch.setattr(shared, "LISTEN_SECONDS", 0.02)


@pytest.fixture
def link(session_redis: RedisServer) -> Iterator[Cuttable]:
    """A link to the session's Redis that a test cuts and mends: one replica's partition."""
    made = Cuttable(("127.0.0.1", session_redis.port))
    yield made
    made.close()


@pytest.fixture
def fleet(session_redis: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(session_redis.url, tmp_path) as made:
        yield made


@pytest.fixture
def own_fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    """A fleet on the test's own Redis, one the test may kill or reconfigure."""
    with Fleet(redis_server.url, tmp_path) as made:
        yield made


@pytest.fixture
def hasty_fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    """A fleet on the test's own Redis with `SHORT_TIMEOUT`: for a test that pauses it."""
    with Fleet(redis_server.url, tmp_path, SHORT_TIMEOUT) as made:
        yield made


@contextmanager
def paused(server: RedisServer) -> Iterator[None]:
    """The server hangs (SIGSTOP) while the block runs: its sockets stay open, nothing answers."""
    server.pause()
    try:
        yield
    finally:
        server.resume()


def knows_the_probe(replica: Replica) -> bool:
    """The replica has heard that another's probe is out: until then its own call, on a breaker
    it knows nothing of, is let through locally and runs no script (a race under load)."""
    return replica.state() == "half_open" and replica.engine.breaker(AGENT).probe_id is not None


def round_trips(server: RedisServer) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return sum(
        int(value["calls"])
        for name, value in stats.items()
        if name in ("cmdstat_evalsha", "cmdstat_eval")
    )


def at_once(actions: list[Callable[[], Any]]) -> list[Any]:
    """Every action on its own thread, all let go together; what they returned."""
    start = threading.Barrier(len(actions))
    results: list[Any] = []

    def run(action: Callable[[], Any]) -> None:
        start.wait()
        results.append(action())

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def trip(replicas: list[Replica], outcome: Outcome = UPSTREAM, times: int = 5) -> None:
    for n in range(times):
        assert replicas[n % len(replicas)].call(outcome).allowed


# -- one breaker across replicas -------------------------------------------------------------


def test_five_upstream_failures_spread_over_three_replicas_trip_the_agent(fleet: Fleet) -> None:
    a, b, c = (fleet.replica(name) for name in ("a", "b", "c"))
    trip([a, b, c], times=4)
    assert [r.state() for r in (a, b, c)] == ["closed"] * 3
    assert c.call(UPSTREAM).allowed
    wait_until(lambda: all(r.state() == "open" for r in (a, b, c)))
    assert len(c.seen(ev.TRIPPED)) == 1
    assert c.seen(ev.TRIPPED)[0].fields["count"] == 5


def test_every_replica_refuses_after_a_trip_without_a_round_trip(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b, c = (fleet.replica(name) for name in ("a", "b", "c"))
    trip([a])
    wait_until(lambda: b.state() == c.state() == "open")
    before = round_trips(session_redis)
    refusals = [r.call() for r in (a, b, c) for _ in range(10)]
    assert {refusal.reason for refusal in refusals} == {DenyReason.OPEN}
    assert round_trips(session_redis) == before


def test_a_healthy_call_makes_no_round_trip(fleet: Fleet, session_redis: RedisServer) -> None:
    a = fleet.replica("a")
    before = round_trips(session_redis)
    for _ in range(20):
        assert a.call(SUCCESS).allowed
    assert round_trips(session_redis) == before


def test_a_counted_failure_costs_one_round_trip(fleet: Fleet, session_redis: RedisServer) -> None:
    a = fleet.replica("a")
    before = round_trips(session_redis)
    a.call(UPSTREAM)
    assert round_trips(session_redis) - before == 1


def test_a_success_clears_a_shared_count_with_one_round_trip(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    trip([a], times=3)
    wait_until(lambda: b.count() == 3)
    before = round_trips(session_redis)
    b.call(SUCCESS)
    assert round_trips(session_redis) - before == 1
    wait_until(lambda: a.count() == 0)


def test_the_window_and_the_auth_threshold_hold_across_replicas(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(UPSTREAM)
    b.call(UPSTREAM)
    fleet.clock.advance(601)
    a.call(AUTH)  # the window restarted the count: 1 of 3
    b.call(AUTH)
    assert b.state() == "closed"
    a.call(AUTH)
    wait_until(lambda: b.state() == "open")
    assert a.seen(ev.TRIPPED)[0].fields == {
        "failure_class": "auth_failure",
        "count": 3,
        "cooldown_seconds": 300.0,
        "cause_seq": a.seen(ev.TRIPPED)[0].fields["cause_seq"],
    }


def test_uncounted_outcomes_never_reach_the_store(fleet: Fleet, session_redis: RedisServer) -> None:
    a = fleet.replica("a")
    before = round_trips(session_redis)
    for _ in range(10):
        a.call(NOT_FOUND)
    assert round_trips(session_redis) == before
    assert a.engine.view(AGENT).count == 0


# -- exactly one probe -------------------------------------------------------------------------


def test_150_concurrent_calls_over_three_replicas_at_half_open_admit_one_probe(
    fleet: Fleet,
) -> None:
    replicas = [fleet.replica(name) for name in ("a", "b", "c")]
    trip(replicas)
    wait_until(lambda: all(r.state() == "open" for r in replicas))
    fleet.clock.advance(300)
    admissions = at_once([replicas[n % 3].call for n in range(150)])
    assert sum(admission.as_probe for admission in admissions) == 1
    assert sum(admission.allowed for admission in admissions) == 1
    refused = {admission.reason for admission in admissions if not admission.allowed}
    assert refused == {DenyReason.PROBE_IN_FLIGHT}
    half_opens = [r.seen(ev.HALF_OPEN) for r in replicas]
    assert sum(1 for seen in half_opens for event in seen if not event.relayed) == 1


def test_a_probe_round_costs_at_most_two_round_trips(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    trip([a])
    fleet.clock.advance(300)
    before = round_trips(session_redis)
    assert a.call(SUCCESS).as_probe
    assert round_trips(session_redis) - before == 2
    assert a.state() == "closed"


def test_a_dead_replicas_probe_expires_at_its_lease_on_the_engines_clock(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    trip([a])
    fleet.clock.advance(300)
    assert a.call().as_probe  # and a dies holding it: it never reports back
    a.engine.close()
    wait_until(lambda: knows_the_probe(b))
    fleet.clock.advance(LEASE)
    assert b.call().reason is DenyReason.PROBE_IN_FLIGHT  # within the lease and its grace
    fleet.clock.advance(2)
    refusal = b.call()
    assert refusal.reason is DenyReason.OPEN  # expired: a failed probe, open for a cooldown
    assert [e.fields["cooldown_seconds"] for e in b.seen(ev.REOPENED)] == [300.0]
    assert not b.seen(ev.REOPENED)[0].relayed
    fleet.clock.advance(300)
    assert b.call(SUCCESS).as_probe
    assert b.state() == "closed"


def test_the_dead_probes_late_outcome_counts_as_late(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    trip([a])
    fleet.clock.advance(300)
    call = a.engine.enter(AGENT, AGENT, "payments", "charge", 30.0)
    assert a.engine.admit(call, LEASE).as_probe
    wait_until(lambda: knows_the_probe(b))
    fleet.clock.advance(LEASE + 2)
    assert b.call().reason is DenyReason.OPEN  # b expired a's probe
    wait_until(lambda: a.engine.breaker(AGENT).probe_id is None)
    line = a.engine.complete(call, UPSTREAM, "refused", 502)
    assert line is not None and line.fields["probe"] is False
    assert b.seen(ev.REOPENED) and not a.seen(ev.PAGE)  # a late failure reopens nothing


# -- who writes what ---------------------------------------------------------------------------


def test_a_transition_is_audited_and_paged_only_by_the_replica_whose_script_made_it(
    fleet: Fleet,
) -> None:
    a, b = fleet.replica("a", state=True), fleet.replica("b", state=True)
    trip([a])
    for _ in range(2):  # two failed probes: a page
        fleet.clock.advance(300)
        assert a.call(UPSTREAM).as_probe
    wait_until(lambda: len(b.seen(ev.PAGE)) == 1)
    assert len(a.pages) == 1 and b.pages == []
    relayed = b.seen(ev.TRIPPED)[0]
    assert relayed.relayed and relayed.fields["origin"] == "a"
    assert "cause_seq" not in relayed.fields
    for replica, rows in ((a, 1), (b, 0)):
        audit = replica.engine.audit
        assert audit is not None and audit.flush(5)
        assert len(audit.query(types=[ev.TRIPPED, ev.PAGE])) == 2 * rows


def test_a_reset_from_one_replica_resets_the_agent_everywhere(fleet: Fleet) -> None:
    a, b, c = (fleet.replica(name) for name in ("a", "b", "c"))
    trip([a])
    wait_until(lambda: b.state() == c.state() == "open")  # b resets what it has heard of
    b.engine.reset(AGENT, actor="oncall", reason="vault fixed")
    wait_until(lambda: a.state() == c.state() == "closed")
    assert a.seen(ev.RESET)[0].fields == {
        "actor": "oncall",
        "reason": "vault fixed",
        "origin": "b",
    }
    assert a.call(SUCCESS).allowed and c.call(SUCCESS).allowed


def test_a_replica_started_late_adopts_the_open_verdict_at_once(fleet: Fleet) -> None:
    a = fleet.replica("a")
    trip([a])
    late = fleet.replica("late")
    assert late.state() == "open"
    assert late.call().reason is DenyReason.OPEN
    restored = late.seen(ev.RESTORED)
    assert restored and restored[0].fields["origin"] == "a"


def test_the_tool_policy_keeps_a_breaker_per_harness(session_redis: RedisServer) -> None:
    with pytest.raises(ValueError, match="only under the agent policy"):
        Engine(ToolPolicy(), shared=SharedStore(session_redis.url))


# -- the store lost, and back ------------------------------------------------------------------


def on_a_link(fleet: Fleet, link: Cuttable) -> tuple[Replica, Replica]:
    """Replica a on `link` (to cut), b on the store itself; both know the agent, closed."""
    a, b = fleet.replica("a", url=link.url()), fleet.replica("b")
    a.call(SUCCESS)
    b.call(SUCCESS)
    return a, b


def cut_off(fleet: Fleet, link: Cuttable) -> tuple[Replica, Replica]:
    """Replica a on `link`, b on the store itself: b trips the agent, a hears of it, then a's
    link is cut. a is alone with a breaker the fleet opened."""
    a, b = fleet.replica("a", url=link.url()), fleet.replica("b")
    trip([b])
    wait_until(lambda: a.state() == "open", "the trip reached a")
    link.cut()
    return a, b


def rejoin(link: Cuttable, replica: Replica) -> None:
    """The replica's link to the store mended, and the replica back on it (reconciled)."""
    link.mend()
    wait_until(lambda: replica.engine.shared_lost is None, "the replica back on the store")


def test_a_replica_that_loses_the_store_keeps_its_verdicts_and_counts_alone(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a = fleet.replica("a", url=link.url())
    trip([a], times=2)
    link.cut()
    for _ in range(3):
        a.call(UPSTREAM)
    assert a.state() == "open"
    assert a.engine.shared_lost is not None
    assert any(p.startswith("shared store lost") for p in a.engine.problems)


def test_on_return_a_replicas_open_verdict_of_the_outage_is_written(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = fleet.replica("a", url=link.url()), fleet.replica("b")
    link.cut()
    trip([a])
    assert b.state() == "unknown"
    rejoin(link, a)
    wait_until(lambda: b.state() == "open")
    assert not any(p.startswith("shared store lost") for p in a.engine.problems)
    assert b.seen(ev.RESTORED)[-1].fields["origin"] == "a"


def test_on_return_a_reset_made_meanwhile_wins(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = cut_off(fleet, link)
    fleet.clock.advance(300)
    assert a.call(UPSTREAM).as_probe  # a's probe fails alone: open again, locally
    b.engine.reset(AGENT, actor="oncall", reason="fixed")
    rejoin(link, a)
    wait_until(lambda: a.state() == "closed")
    assert b.state() == "closed"


def test_reconcile_keeps_the_later_deadline(fleet: Fleet, session_redis: RedisServer) -> None:
    a = fleet.replica("a")
    trip([a])
    key = f"breakerdeck:breaker:{AGENT}"
    with session_redis.client() as client:
        opened = float(client.hget(key, "opened") or 0)
        client.hset(key, mapping={"cooldown": "900"})  # another replica's later end
    slot = a.engine._keys.slots[AGENT]
    assert a.engine._fleet is not None
    a.engine._fleet.alone(slot)  # as if a decided alone, seeing the same generation
    assert a.engine._fleet._reconcile(slot)
    assert a.engine.view(AGENT).reopens_at == pytest.approx(opened + 900)


def test_a_slow_store_costs_one_timeout_then_the_replica_decides_alone(
    hasty_fleet: Fleet, redis_server: RedisServer
) -> None:
    a = hasty_fleet.replica("a")
    with paused(redis_server):
        a.call(UPSTREAM)
        assert a.engine.shared_lost is not None
        trip([a], times=4)
        assert a.state() == "open"
    wait_until(lambda: a.engine.shared_lost is None)
    with redis_server.client() as client:
        assert client.hget(f"breakerdeck:breaker:{AGENT}", "state") == b"open"


def test_a_wiped_store_gets_the_replicas_verdicts_back(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    trip([a], times=3)
    wait_until(lambda: b.count() == 3)
    session_redis.flushall()
    b.call(UPSTREAM)
    b.call(UPSTREAM)
    wait_until(lambda: a.state() == "open")
    assert any("vanished from the shared store" in p for p in b.engine.problems)


def test_a_key_of_another_format_is_left_alone(fleet: Fleet, session_redis: RedisServer) -> None:
    key = f"breakerdeck:breaker:{AGENT}"
    with session_redis.client() as client:
        client.hset(key, mapping={"v": "7", "state": "open"})
    a = fleet.replica("a")
    trip([a])
    assert a.state() == "open"  # decided alone
    assert any("another format" in p for p in a.engine.problems)
    with session_redis.client() as client:
        assert client.hget(key, "v") == b"7" and client.hget(key, "count") is None


def test_values_out_of_bounds_in_the_store_are_read_safely(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    trip([a])
    with session_redis.client() as client:
        client.hset(
            f"breakerdeck:breaker:{AGENT}",
            mapping={"cooldown": "1e308", "lf": "nan", "detail": "\x1b]0;pwned\x07"},
        )
    late = fleet.replica("late")
    breaker = late.engine.breaker(AGENT)
    assert breaker.cooldown == 300.0 and breaker.last_failure_at is None
    assert "\x1b" not in breaker.last_failure_detail


def test_a_replica_whose_clock_ran_ahead_holds_the_fleet_open_one_cooldown_at_most(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    trip([a])
    ahead = fleet.clock.wall() + 3 * 86_400
    with session_redis.client() as client:
        client.hset(f"breakerdeck:breaker:{AGENT}", mapping={"opened": repr(ahead)})
    late = fleet.replica("late")
    assert late.call().retry_after <= 300.0
    fleet.clock.advance(300)
    assert late.call(SUCCESS).as_probe


def test_a_wrong_password_leaves_local_breakers_and_says_why(
    own_fleet: Fleet, redis_server: RedisServer
) -> None:
    with redis_server.client() as client:
        client.config_set("requirepass", "right")
    a = own_fleet.replica("a")
    trip([a])
    assert a.state() == "open"
    assert "auth" in (a.engine.shared_lost or "").lower()
    assert "right" not in " ".join(a.engine.problems)


# -- the script is the core --------------------------------------------------------------------


def side_by_side(fleet: Fleet, seed: int, steps: int, *, operator: bool) -> None:
    """The Lua script restates the agent policy's rules; a random run through a shared
    replica and through a plain engine, on one clock, must agree at every step. With
    `operator`, an operator also holds, releases (to half-open or closed) and resets."""
    rng = random.Random(seed)
    shared = fleet.replica("a")
    plain = Replica(Engine(AgentPolicy(), clock=fleet.clock))
    outcomes = [UPSTREAM, UPSTREAM, AUTH, SUCCESS, NOT_FOUND]
    for step in range(steps):
        roll = rng.random()
        known = bool(plain.engine.keys())
        if roll < 0.15:
            fleet.clock.advance(rng.choice([1.0, 60.0, 299.0, 301.0, 700.0]))
        elif roll < 0.18 and known:
            for replica in (shared, plain):
                replica.engine.reset(AGENT, actor="t", reason="")
        elif operator and roll < 0.23 and known:
            seconds = rng.choice([60.0, 400.0])
            for replica in (shared, plain):
                replica.engine.hold(AGENT, "t", "window", seconds)
        elif operator and roll < 0.28 and known and plain.state() == "held":
            close = rng.random() < 0.3
            for replica in (shared, plain):
                replica.engine.release(AGENT, "t", close=close)
        else:
            outcome = rng.choice(outcomes)
            got = [replica.call(outcome) for replica in (shared, plain)]
            assert (got[0].allowed, got[0].as_probe, got[0].reason) == (
                got[1].allowed,
                got[1].as_probe,
                got[1].reason,
            ), step
        views = [replica.engine.views() for replica in (shared, plain)]
        picture = [
            [(v.state, v.count, v.failed_probes, v.paged, v.trip_cause, v.held_by) for v in seen]
            for seen in views
        ]
        assert picture[0] == picture[1], step
    plain.engine.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_stores_script_decides_as_the_core_does(fleet: Fleet, seed: int) -> None:
    side_by_side(fleet, seed, 400, operator=False)


@pytest.mark.parametrize("seed", range(4))
def test_the_stores_script_holds_and_releases_as_the_core_does(fleet: Fleet, seed: int) -> None:
    side_by_side(fleet, seed, 300, operator=True)


def test_a_store_that_hangs_is_noticed_with_no_call_made(
    hasty_fleet: Fleet, redis_server: RedisServer
) -> None:
    a = hasty_fleet.replica("a")
    with paused(redis_server):
        wait_until(lambda: a.engine.shared_lost is not None)
    wait_until(lambda: a.engine.shared_lost is None)


@pytest.mark.parametrize("first_back", ["tripped", "counted"])
def test_replicas_returning_from_one_outage_keep_the_graver_verdict(
    fleet: Fleet, session_redis: RedisServer, first_back: str
) -> None:
    links = {name: Cuttable(("127.0.0.1", session_redis.port)) for name in ("a", "b")}
    try:
        a = fleet.replica("a", url=links["a"].url())
        b = fleet.replica("b", url=links["b"].url())
        for link in links.values():
            link.cut()
        trip([a])  # a trips alone
        b.call(UPSTREAM)  # b counts one failure alone
        order = ["a", "b"] if first_back == "tripped" else ["b", "a"]
        for name in order:
            replica = a if name == "a" else b
            links[name].mend()
            wait_until(lambda replica=replica: replica.engine.shared_lost is None)
        wait_until(lambda: a.state() == b.state() == "open")
        with session_redis.client() as client:
            assert client.hget(f"breakerdeck:breaker:{AGENT}", "state") == b"open"
    finally:
        for link in links.values():
            link.close()


def test_our_probe_expired_by_the_store_gets_its_expired_line(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    trip([a])
    fleet.clock.advance(300)
    assert a.call().as_probe  # never reported back
    wait_until(lambda: knows_the_probe(b))
    fleet.clock.advance(LEASE + 2)
    assert b.call().reason is DenyReason.OPEN  # b's script expires a's probe
    wait_until(lambda: any(e.fields.get("fault") == "expired" for e in a.events))
    line = next(e for e in a.events if e.fields.get("fault") == "expired")
    assert line.fields["probe"] is True and not line.relayed


def test_another_replicas_probe_expires_here_while_the_store_is_lost(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b", url=link.url())
    trip([a])
    fleet.clock.advance(300)
    assert a.call().as_probe
    wait_until(lambda: knows_the_probe(b))
    link.cut()
    fleet.clock.advance(LEASE + 2)
    assert b.call().reason is DenyReason.OPEN  # expired here, alone: a failed probe
    assert b.engine.shared_lost is not None


def test_garbage_published_on_the_channel_leaves_the_listener_relaying(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    with session_redis.client() as client:
        for junk in (b"\xff", b"[[[[[[[[[[" * 10_000, b'{"ver": 1e400}'):
            client.publish("breakerdeck:changes", junk)
    trip([a])
    wait_until(lambda: b.state() == "open")


def test_a_foreign_key_does_not_stop_a_returning_replica_adopting_the_others(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b", url=link.url())
    link.cut()
    b.call(UPSTREAM, agent="aaa")  # b changes "aaa" alone
    with session_redis.client() as client:
        client.hset("breakerdeck:breaker:aaa", mapping={"v": "2"})
    trip([a], times=5)
    rejoin(link, b)
    wait_until(lambda: b.state() == "open")


def test_a_probe_taken_alone_stays_the_fleets_one_probe_when_the_store_returns(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = cut_off(fleet, link)
    fleet.clock.advance(300)
    assert a.call().as_probe  # taken alone, still out
    rejoin(link, a)
    wait_until(lambda: b.engine.breaker(AGENT).probe_id is not None)
    assert b.call().reason is DenyReason.PROBE_IN_FLIGHT


def test_a_replica_started_late_adopts_ten_thousand_open_agents_at_once(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    now = fleet.clock.wall()
    with session_redis.client() as client:
        pipe = client.pipeline(transaction=False)
        for n in range(10_000):
            fields = {"v": "1", "ver": "1", "gen": "1", "state": "open", "count": "5"}
            fields |= {"opened": repr(now), "cooldown": "300", "cause": "upstream_failure"}
            pipe.hset(f"breakerdeck:breaker:agent-{n:05d}", mapping=fields)
        pipe.execute()
    late = fleet.replica("late")
    assert len(late.engine.keys()) == 10_000
    assert late.call(agent="agent-09999").reason is DenyReason.OPEN
    assert len(late.seen(ev.RESTORED)) == 10_000


# -- clocks ------------------------------------------------------------------------------------


class OffClock:
    """A replica's real wall clock, off Redis's by `offset` seconds until a test sets it right."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


def clock_problems(replica: Replica) -> list[str]:
    return [line for line in replica.engine.problems if "clock" in line]


def test_a_replica_whose_clock_is_an_hour_ahead_says_so_naming_the_offset(fleet: Fleet) -> None:
    ahead = fleet.replica("ahead", wall=OffClock(3600))
    right = fleet.replica("right")
    [problem] = clock_problems(ahead)
    assert "3600.0 s ahead of the shared store's" in problem
    assert ahead.engine.shared_warning == problem
    assert clock_problems(right) == [] and right.engine.shared_warning is None


def test_a_clock_behind_by_less_than_two_seconds_is_no_problem(fleet: Fleet) -> None:
    assert clock_problems(fleet.replica("a", wall=OffClock(-1.5))) == []
    [problem] = clock_problems(fleet.replica("b", wall=OffClock(-90)))
    assert "90.0 s behind" in problem


def test_the_clock_problem_clears_once_the_clock_is_right_again(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared, "CLOCK_CHECK_SECONDS", 0.05)
    wall = OffClock(3600)
    replica = fleet.replica("a", wall=wall)
    assert clock_problems(replica)
    wall.offset = 0.0
    wait_until(lambda: clock_problems(replica) == [], "the clock problem cleared")
    assert replica.engine.shared_warning is None


def test_a_page_raised_by_a_replica_whose_clock_is_off_carries_the_warning(fleet: Fleet) -> None:
    ahead, other = fleet.replica("ahead", wall=OffClock(3600)), fleet.replica("other")
    trip([ahead])
    for _ in range(2):  # two failed probes: a page
        fleet.clock.advance(300)
        assert ahead.call(UPSTREAM).as_probe
    [page] = ahead.pages
    assert "3600.0 s ahead" in page["warning"]
    assert ahead.seen(ev.PAGE)[0].fields["warning"] == page["warning"]
    wait_until(lambda: len(other.seen(ev.PAGE)) == 1, "the page relayed")
    assert "warning" not in other.seen(ev.PAGE)[0].fields  # relayed: not its clock's page


def test_a_store_behind_what_a_replica_saw_gets_the_replicas_verdict_back(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    key = f"breakerdeck:breaker:{AGENT}"
    trip([a], times=4)
    with session_redis.client() as client:
        before_the_trip = client.hgetall(key)
        assert a.call(UPSTREAM).allowed  # the fifth: tripped
        # A failover's new primary that missed the trip holds the breaker as it was before.
        client.delete(key)
        client.hset(key, mapping=before_the_trip)
    fleet.clock.advance(300)
    assert a.call().as_probe  # the open verdict stood: half-open, and this call its probe
    assert any("older in the shared store" in line for line in a.engine.problems)
    with session_redis.client() as client:
        assert client.hget(key, "state") == b"half_open"


def test_a_valkey_url_names_the_same_store(fleet: Fleet, session_redis: RedisServer) -> None:
    a = fleet.replica("a")
    b = fleet.replica("b", url=session_redis.url.replace("redis://", "valkey://"))
    trip([b])
    wait_until(lambda: a.state() == "open", "the trip relayed through the valkey URL")
    assert b.engine.shared_lost is None


# -- hold, release and mode across replicas (issue 33) -----------------------------------------

HOUR = 3600.0


def audited(replica: Replica, *kinds: str) -> list[Event]:
    audit = replica.engine.audit
    assert audit is not None and audit.flush(5)
    return audit.query(types=list(kinds))


def stored(server: RedisServer, field: str, agent: str = AGENT) -> bytes | None:
    with server.client() as client:
        value: bytes | None = client.hget(f"breakerdeck:breaker:{agent}", field)
    return value


def test_a_hold_on_one_replica_refuses_on_every_replica_without_a_round_trip(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    assert a.call(SUCCESS).allowed
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    before = round_trips(session_redis)
    for replica in (a, b):
        refusal = replica.call()
        assert refusal.reason is DenyReason.HELD
        assert refusal.hold is not None and refusal.hold.actor == "oncall"
        assert refusal.retry_after == pytest.approx(HOUR)
    assert round_trips(session_redis) == before
    view = b.engine.view(AGENT)
    assert (view.held_by, view.held_reason) == ("oncall", "vendor incident")
    assert view.held_until == pytest.approx(fleet.clock.wall() + HOUR, abs=0.01)


def test_a_hold_is_audited_once_and_shown_by_the_others_with_its_origin(fleet: Fleet) -> None:
    a, b = fleet.replica("a", state=True), fleet.replica("b", state=True)
    assert b.call(SUCCESS).allowed
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: bool(b.seen(ev.HELD)), "the hold shown on b")
    shown = b.seen(ev.HELD)[0]
    assert shown.relayed and shown.fields["origin"] == "a"
    assert (shown.fields["actor"], shown.fields["reason"]) == ("oncall", "vendor incident")
    assert shown.fields["until_t"] == a.seen(ev.HELD)[0].fields["until_t"]
    assert len(audited(a, ev.HELD)) == 1
    assert audited(b, ev.HELD) == []


def test_a_release_on_one_replica_lets_one_probe_through_for_the_fleet(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    a.engine.release(AGENT, "oncall", "vendor says done")
    wait_until(lambda: b.state() == "half_open", "the release reached b")
    assert [e.fields["actor"] for e in b.seen(ev.RELEASED)] == ["oncall"]
    admissions = at_once([(a, b)[n % 2].call for n in range(20)])
    assert sum(admission.as_probe for admission in admissions) == 1
    assert sum(admission.allowed for admission in admissions) == 1
    refused = [admission for admission in admissions if not admission.allowed]
    assert {admission.reason for admission in refused} == {DenyReason.PROBE_IN_FLIGHT}
    assert all(admission.hold is not None for admission in refused)  # cause: operator_hold


def test_a_release_with_close_on_one_replica_closes_every_replica(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    b.engine.release(AGENT, "bo", "vendor says done", close=True)
    wait_until(lambda: a.state() == "closed", "the release reached a")
    assert [e.type for e in a.seen(ev.RELEASED) + a.seen(ev.RESET)] == [ev.RELEASED, ev.RESET]
    assert a.call(SUCCESS).allowed and b.call(SUCCESS).allowed


def test_releasing_what_the_fleet_no_longer_holds_is_refused_and_writes_nothing(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    b.engine.release(AGENT, "bo")  # a may still show it held: its release goes to the store
    version = stored(session_redis, "ver")
    with pytest.raises(NotHeld, match="not held"):
        a.engine.release(AGENT, "ana")
    assert stored(session_redis, "ver") == version
    assert [e.fields["actor"] for e in a.seen(ev.RELEASED)] in ([], ["bo"])


def test_shadow_on_one_replica_makes_every_replica_shadow(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    a.engine.set_mode(AGENT, "shadow", "oncall", "trying the breaker")
    wait_until(lambda: b.state() != "unknown" and b.engine.view(AGENT).mode == "shadow")
    [shown] = b.seen(ev.MODE)
    assert shown.fields["origin"] == "a" and (shown.fields["from"], shown.fields["to"]) == (
        "enforce",
        "shadow",
    )
    trip([a])
    wait_until(lambda: b.state() == "open", "the trip reached b")
    assert b.call(UPSTREAM).allowed  # shadow: a would-be refusal goes through
    relayed = b.seen(ev.TRIPPED)[-1]
    assert list(relayed.fields)[-2:] == ["shadow", "origin"]  # a shadow breaker's, relayed
    a.engine.set_mode(AGENT, "enforce", "oncall", "seen enough")
    wait_until(lambda: b.engine.view(AGENT).mode == "enforce")
    assert b.call().reason is DenyReason.OPEN


def test_the_hold_and_the_mode_are_in_the_stored_verdict(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    a.engine.set_mode(AGENT, "shadow", "oncall", "")
    assert stored(session_redis, "state") == b"held"
    assert (stored(session_redis, "hby"), stored(session_redis, "hwhy")) == (
        b"oncall",
        b"vendor incident",
    )
    until = float(stored(session_redis, "hu") or 0)
    assert until == pytest.approx(fleet.clock.wall() + HOUR, abs=0.01)
    assert (stored(session_redis, "mode"), stored(session_redis, "mfor")) == (b"shadow", b"enforce")
    late = fleet.replica("late")  # adopts both on joining
    assert late.state() == "held" and late.engine.view(AGENT).mode == "shadow"


def test_a_verdict_stored_without_hold_or_mode_fields_still_reads(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    fields = {"v": "1", "ver": "3", "gen": "2", "state": "open", "count": "5", "cooldown": "300"}
    fields |= {"opened": repr(fleet.clock.wall()), "cause": "upstream_failure", "origin": "old"}
    with session_redis.client() as client:
        client.hset(f"breakerdeck:breaker:{AGENT}", mapping=fields)
    late = fleet.replica("late")
    assert late.call().reason is DenyReason.OPEN
    late.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    assert stored(session_redis, "state") == b"held"


def test_a_hold_and_a_reset_racing_on_two_replicas_end_in_one_state_both_audited(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a", state=True), fleet.replica("b", state=True)
    trip([a])
    wait_until(lambda: b.state() == "open", "the trip reached b")
    at_once(
        [
            lambda: a.engine.hold(AGENT, "ana", "vendor incident", HOUR),
            lambda: b.engine.reset(AGENT, "bo", "vendor fixed"),
        ]
    )
    final = (stored(session_redis, "state") or b"").decode()
    assert final in ("held", "closed")
    wait_until(lambda: a.state() == b.state() == final, "one state on both replicas")
    assert len(audited(a, ev.HELD)) == 1
    assert len(audited(b, ev.RESET)) == 1


def test_a_hold_runs_out_once_for_the_fleet(fleet: Fleet) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", 60)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    fleet.clock.advance(61)
    b.engine.poll()
    a.engine.poll()
    wait_until(lambda: a.state() == b.state() == "half_open", "the hold ran out on both")
    wait_until(lambda: len([e for r in (a, b) for e in r.seen(ev.RELEASED)]) == 2)
    released = [e for r in (a, b) for e in r.seen(ev.RELEASED)]
    assert [e.fields["actor"] for e in released] == ["expiry", "expiry"]
    assert sum(not e.relayed for e in released) == 1  # one replica's script, one audit row


def test_a_hold_taken_while_the_store_is_lost_survives_its_return_and_reaches_the_others(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = on_a_link(fleet, link)
    link.cut()
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    assert a.engine.shared_lost is not None and a.state() == "held"
    assert b.state() == "closed"
    rejoin(link, a)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    assert b.call().reason is DenyReason.HELD
    assert stored(session_redis, "hby") == b"oncall"


def test_a_hold_taken_alone_stands_over_a_trip_made_meanwhile(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = on_a_link(fleet, link)
    link.cut()
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    trip([b])  # the fleet's generation moves: calls, not an operator
    rejoin(link, a)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    assert a.state() == "held" and stored(session_redis, "state") == b"held"
    assert stored(session_redis, "count") == b"5"  # the store's count, frozen by the hold


def test_a_reset_made_through_the_store_meanwhile_ends_a_hold_taken_alone(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = cut_off(fleet, link)
    a.engine.hold(AGENT, "ana", "vendor incident", HOUR)
    b.engine.reset(AGENT, "bo", "vendor fixed")
    rejoin(link, a)
    wait_until(lambda: a.state() == "closed", "the reset reached a")
    assert b.state() == "closed" and stored(session_redis, "state") == b"closed"


def test_a_hold_taken_while_redis_is_down_survives_its_restart_and_reaches_the_others(
    own_fleet: Fleet, redis_server: RedisServer
) -> None:
    a, b = own_fleet.replica("a"), own_fleet.replica("b")
    a.call(SUCCESS)
    b.call(SUCCESS)
    redis_server.kill()
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    assert a.engine.shared_lost is not None and a.call().reason is DenyReason.HELD
    redis_server.start()  # on the same port, and empty
    wait_until(lambda: a.engine.shared_lost is None, "a back on the store")
    wait_until(lambda: b.state() == "held", "the hold reached b")
    assert b.call().reason is DenyReason.HELD
    assert stored(redis_server, "hby") == b"oncall"


def test_calls_admitted_on_one_replica_before_a_hold_on_another_change_nothing(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a, b = fleet.replica("a"), fleet.replica("b")
    a.call(SUCCESS)
    calls = [b.engine.enter(AGENT, AGENT, "payments", "charge", 30.0) for _ in range(5)]
    assert all(b.engine.admit(call, LEASE).allowed for call in calls)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    for call in calls:  # five upstream failures would trip it, were it not held
        b.engine.complete(call, UPSTREAM, "refused", 502)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    assert stored(session_redis, "state") == b"held"
    assert stored(session_redis, "count") in (None, b"0")
    assert not a.seen(ev.TRIPPED) and not b.seen(ev.TRIPPED)


def test_a_release_made_while_the_store_is_lost_stands_on_its_return(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = on_a_link(fleet, link)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    wait_until(lambda: b.state() == "held", "the hold reached b")
    link.cut()
    a.engine.release(AGENT, "oncall", "vendor says done")
    rejoin(link, a)
    wait_until(lambda: b.state() == "half_open", "the release reached b")
    assert stored(session_redis, "state") == b"half_open"


def test_a_mode_chosen_while_the_store_is_lost_reaches_the_others_and_keeps_their_hold(
    fleet: Fleet, session_redis: RedisServer, link: Cuttable
) -> None:
    a, b = on_a_link(fleet, link)
    link.cut()
    a.engine.set_mode(AGENT, "shadow", "oncall", "trying the breaker")
    b.engine.hold(AGENT, "bo", "vendor incident", HOUR)  # through the store, meanwhile
    rejoin(link, a)
    wait_until(lambda: b.engine.view(AGENT).mode == "shadow", "the mode reached b")
    assert a.state() == b.state() == "held"
    assert (stored(session_redis, "mode"), stored(session_redis, "state")) == (b"shadow", b"held")


def test_a_hold_with_garbage_in_the_store_is_read_safely(
    fleet: Fleet, session_redis: RedisServer
) -> None:
    a = fleet.replica("a")
    a.call(SUCCESS)
    a.engine.hold(AGENT, "oncall", "vendor incident", HOUR)
    with session_redis.client() as client:
        client.hset(
            f"breakerdeck:breaker:{AGENT}",
            mapping={"hby": "\x1b]0;pwned\x07", "hu": "nan", "mode": "loud", "mfor": "x"},
        )
    late = fleet.replica("late")
    breaker = late.engine.breaker(AGENT)
    assert breaker.hold is not None and "\x1b" not in breaker.hold.actor
    assert late.engine.view(AGENT).mode == "enforce"  # no such mode: none chosen
    assert late.call(SUCCESS).as_probe  # a hold with no usable end has ended: half-open
    assert [e.fields["actor"] for e in late.seen(ev.RELEASED)] == ["expiry"]
