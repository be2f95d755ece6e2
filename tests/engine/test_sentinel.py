"""Replicas on a Redis that Sentinel watches (DESIGN, "Replicas", "High availability"): a real
primary, its replica and three sentinels on loopback, the primary killed while two replicas
take calls. One set for the module (a failover takes two seconds; starting the set, as long),
on one xdist worker.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from breakerdeck.engine import AgentPolicy, Engine
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.front.gateway.config import GatewayConfig, Shared
from breakerdeck.engine.front.gateway.options import Options
from breakerdeck.engine.front.gateway.server import open_shared
from breakerdeck.engine.front.serving import StartError
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.shared import SharedStore
from tests.redis_server import SERVICE, RedisServerMissing, SentinelSet
from tests.tcp_cut import Cuttable
from tests.waiting import wait_until

pytestmark = pytest.mark.xdist_group("sentinel")

AGENT = "billing-assistant"
BUSY = "search-assistant"
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
LEASE = AgentPolicy().probe_lease()
#: A failover takes the sentinels about two seconds here; a loaded machine, several times that.
FAILOVER_WITHIN = 60.0


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    try:
        made = SentinelSet(tmp_path_factory.mktemp("sentinel"))
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield made
    made.close()


class Replicas:
    def __init__(self, url: str, tmp_path: Path) -> None:
        self.clock = ManualClock()
        self.url = url
        self.tmp_path = tmp_path
        self.engines: list[Engine] = []

    def engine(self, name: str) -> Engine:
        engine = Engine(
            AgentPolicy(),
            clock=self.clock,
            shared=SharedStore(self.url, timeout=0.5),
            instance=name,
            state_dir=self.tmp_path / name,
        )
        engine.restore()
        self.engines.append(engine)
        return engine

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


@pytest.fixture
def replicas(sentinels: SentinelSet, tmp_path: Path) -> Iterator[Replicas]:
    with sentinels.client() as client:
        client.flushall()
    made = Replicas(sentinels.url, tmp_path)
    yield made
    made.close()


def call(engine: Engine, agent: str, outcome: Outcome | None) -> bool:
    """One call: whether it was admitted (and then completed with `outcome`)."""
    made = engine.enter(agent, agent, "payments", "charge", 30.0)
    admission = engine.admit(made, LEASE)
    if admission.allowed and outcome is not None:
        engine.complete(made, outcome, "none", 200 if outcome.is_success else 502)
    return admission.allowed


def eventually(check: object, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.01)


def test_the_primary_is_found_through_the_sentinels(replicas: Replicas) -> None:
    a, b = replicas.engine("a"), replicas.engine("b")
    for _ in range(5):
        call(a, AGENT, UPSTREAM)
    eventually(lambda: b.view(AGENT).state == "open", "b heard of the trip")
    assert a.shared_lost is None and b.shared_lost is None


def test_a_failover_while_two_replicas_take_calls_loses_no_verdict_and_keeps_one_probe(
    replicas: Replicas, sentinels: SentinelSet
) -> None:
    a, b = replicas.engine("a"), replicas.engine("b")
    for _ in range(5):
        call(a, AGENT, UPSTREAM)
    eventually(lambda: b.view(AGENT).state == "open", "b heard of the trip")
    old = sentinels.primary_port()

    sentinels.primary.kill()
    began = time.monotonic()
    answered: Counter[str] = Counter()
    lost_for: dict[str, float] = {}
    lost_since: dict[str, float] = {}
    while time.monotonic() - began < FAILOVER_WITHIN:
        for name, engine in (("a", a), ("b", b)):
            # The open agent is refused off the wire; the busy one makes round trips, so a
            # lost store is noticed by calls, not only by the listener's ping.
            answered["refused" if not call(engine, AGENT, SUCCESS) else "admitted"] += 1
            answered["busy"] += call(engine, BUSY, UPSTREAM)
            answered["busy"] += call(engine, BUSY, SUCCESS)
            now = time.monotonic()
            if engine.shared_lost is not None:
                lost_since.setdefault(name, now)
            elif name in lost_since:
                lost_for[name] = now - lost_since.pop(name)
        if len(lost_for) == 2 and not lost_since and sentinels.primary_port() != old:
            break
        time.sleep(0.02)
    else:
        raise AssertionError(f"the replicas did not follow the new primary: {lost_for}")
    print(f"\nshared store lost for {lost_for} s; calls {dict(answered)}")

    # No verdict lost: the agent is open on both replicas and on the new primary.
    assert answered["admitted"] == 0
    assert a.view(AGENT).state == b.view(AGENT).state == "open"
    with sentinels.client() as client:
        assert client.hget(f"breakerdeck:breaker:{AGENT}", "state") == b"open"

    # One probe across both replicas once the new primary answers.
    replicas.clock.advance(300)
    admitted: list[bool] = []
    start = threading.Barrier(20)

    def one(engine: Engine) -> None:
        start.wait()
        admitted.append(call(engine, AGENT, None))

    threads = [threading.Thread(target=one, args=((a, b)[n % 2],)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert admitted.count(True) == 1


def test_a_replica_back_after_the_replicas_joined_is_waited_for_by_the_next_transitions(
    replicas: Replicas, sentinels: SentinelSet
) -> None:
    # The new primary of a failover has no replica until the old one comes back: counted only
    # once a minute, the transitions of that minute were not waited for.
    primary = sentinels.current_primary()
    (other,) = [node for node in (sentinels.primary, sentinels.replica) if node is not primary]
    other.kill()
    a = replicas.engine("a")  # joins a primary with no replica
    sentinels.mend()  # the replica back, in step
    with primary.client() as client:

        def waited() -> int:
            stats = client.info("commandstats").get("cmdstat_wait", {"calls": 0})
            return int(stats["calls"])

        before = waited()

        def trip_and_reset() -> bool:
            for _ in range(5):
                call(a, AGENT, UPSTREAM)
            a.reset(AGENT, "operator", "again")
            return waited() > before

        wait_until(trip_and_reset, "a transition waited for the replica", seconds=30)


@pytest.fixture
def undemoted(tmp_path: Path) -> Iterator[SentinelSet]:
    """A set whose primary cannot be demoted (REPLICAOF renamed away): after a planned failover
    it stays a primary that takes writes, as every old primary does until the sentinels
    reconfigure it, and for good while they cannot reach it."""
    no_replicaof = ("--rename-command", "REPLICAOF", "", "--rename-command", "SLAVEOF", "")
    try:
        made = SentinelSet(tmp_path / "undemoted", *no_replicaof)
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield made
    made.close()


def test_after_a_planned_failover_the_replicas_write_to_the_new_primary_not_the_old_one(
    undemoted: SentinelSet, tmp_path: Path
) -> None:
    made = Replicas(undemoted.url, tmp_path)
    try:
        a, b = made.engine("a"), made.engine("b")
        old = undemoted.primary_port()
        undemoted.failover()
        wait_until(lambda: undemoted.primary_port() != old, "the sentinels named the replica")
        for _ in range(5):
            call(a, AGENT, UPSTREAM)
        with undemoted.client() as new:
            wait_until(
                lambda: new.hget(f"breakerdeck:breaker:{AGENT}", "state") == b"open",
                "a's trip in the new primary",
            )
        wait_until(lambda: b.view(AGENT).state == "open", "b heard of the trip")
    finally:
        made.close()


# -- bad input, refused at start ---------------------------------------------------------------


def test_a_service_no_sentinel_knows_is_refused_at_start(sentinels: SentinelSet) -> None:
    url = sentinels.url.replace(f"/{SERVICE}/", "/nobody/")
    with pytest.raises(ValueError, match="no sentinel knows a primary named 'nobody'"):
        SharedStore(url, password="hunter2")


def test_unreachable_sentinels_are_refused_at_start_without_the_password() -> None:
    with pytest.raises(ValueError, match="no sentinel answers") as raised:
        SharedStore("redis+sentinel://127.0.0.1:1,127.0.0.1:2/fleet", password="hunter2")
    assert str(raised.value).startswith("sentinel 127.0.0.1:1,127.0.0.1:2/fleet/0: ")
    assert "hunter2" not in str(raised.value)


def test_an_unreachable_sentinel_is_asked_once_not_again_after_a_backoff() -> None:
    # redis-py retries a command three times, seconds apart, by default: a sentinel whose host
    # is down held a start, or a replica's first connection after a failover, for seconds.
    links = [Cuttable(("127.0.0.1", 1)) for _ in range(2)]
    for link in links:
        link.cut()  # each connection accepted, then closed unanswered
    url = "redis+sentinel://" + ",".join(f"127.0.0.1:{link.port}" for link in links) + "/fleet"
    try:
        with pytest.raises(ValueError, match="no sentinel answers"):
            SharedStore(url)
        assert [link.accepted for link in links] == [1, 1]
    finally:
        for link in links:
            link.close()


def test_a_gateway_on_a_service_no_sentinel_knows_stops_at_start_naming_it(
    sentinels: SentinelSet,
) -> None:
    url = sentinels.url.replace(f"/{SERVICE}/", "/nobody/")
    options = Options(
        config_path=Path("gateway.toml"),
        config=GatewayConfig(),
        digests={},
        listen="127.0.0.1:0",
        shared=Shared(url, "hunter2", "breakerdeck", 0.25),
    )
    with pytest.raises(StartError) as raised:
        open_shared(options)
    assert str(raised.value).startswith("gateway: shared store: sentinel 127.0.0.1:")
    assert "no sentinel knows a primary named 'nobody'" in str(raised.value)
    assert "hunter2" not in str(raised.value)
