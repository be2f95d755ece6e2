"""Replicas on a Redis Cluster (DESIGN, "Replicas", "High availability"): three real primaries
on loopback, one cluster for the module on one xdist worker. Each agent's key carries its hash
tag, so every script touches one slot, and changes travel by sharded pub/sub."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import pytest
from redis.crc import key_slot

from breakerdeck.engine import AgentPolicy, Engine
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.shared import SharedStore
from tests.redis_server import ClusterSet, RedisServer, RedisServerMissing
from tests.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")
LEASE = AgentPolicy().probe_lease()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    try:
        made = ClusterSet(tmp_path_factory.mktemp("cluster"))
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield made
    made.close()


class Replicas:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.clock = ManualClock()
        self.url = url
        self.timeout = timeout
        self.engines: list[Engine] = []

    def engine(self, name: str) -> Engine:
        engine = Engine(
            AgentPolicy(),
            clock=self.clock,
            shared=SharedStore(self.url, timeout=self.timeout),
            instance=name,
        )
        engine.restore()
        self.engines.append(engine)
        return engine


@pytest.fixture
def replicas(cluster: ClusterSet) -> Iterator[Replicas]:
    cluster.flushall()
    made = Replicas(cluster.url)
    yield made
    for engine in made.engines:
        engine.close()


def fail(engine: Engine, agent: str) -> None:
    call = engine.enter(agent, agent, "payments", "charge", 30.0)
    if engine.admit(call, LEASE).allowed:
        engine.complete(call, UPSTREAM, "refused", 502)


def eventually(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.01)


def state(engine: Engine, agent: str) -> str:
    try:
        return engine.view(agent).state
    except KeyError:
        return "unknown"


def on_three_nodes() -> list[str]:
    """Three agents whose keys fall in the three nodes' thirds of the slots."""
    found: dict[int, str] = {}
    number = 0
    while len(found) < 3:
        agent = f"agent-{number}"
        found.setdefault(key_slot(f"breakerdeck:breaker:{{{agent}}}".encode()) * 3 // 16384, agent)
        number += 1
    return [found[third] for third in range(3)]


def test_two_replicas_trip_one_agent_together(replicas: Replicas) -> None:
    a, b = replicas.engine("a"), replicas.engine("b")
    for n in range(5):
        fail((a, b)[n % 2], "billing-assistant")
    eventually(
        lambda: state(a, "billing-assistant") == state(b, "billing-assistant") == "open",
        "open on both",
    )
    assert a.shared_lost is None and b.shared_lost is None


def test_agents_on_three_nodes_trip_and_reset_apart_and_a_late_replica_adopts_them(
    replicas: Replicas,
) -> None:
    a, b = replicas.engine("a"), replicas.engine("b")
    agents = on_three_nodes()
    for agent in agents:
        for _ in range(5):
            fail(a, agent)
    eventually(lambda: all(state(b, agent) == "open" for agent in agents), "b heard of each trip")
    b.reset(agents[1], "operator", "card rotated")
    eventually(lambda: state(a, agents[1]) == "closed", "a heard of the reset")
    assert [state(a, agent) for agent in agents] == ["open", "closed", "open"]
    late = replicas.engine("late")
    assert [state(late, agent) for agent in agents] == ["open", "closed", "open"]


def test_a_cluster_url_pointed_at_a_plain_redis_is_refused_at_start(
    session_redis: RedisServer,
) -> None:
    url = f"redis+cluster://127.0.0.1:{session_redis.port}"
    with pytest.raises(ValueError, match=f"^cluster 127.0.0.1:{session_redis.port}: "):
        SharedStore(url)


# -- a primary's failover ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    """Three primaries with a replica each, a primary taken as failed after 1 s of silence."""
    try:
        made = ClusterSet(tmp_path_factory.mktemp("replicated"), replicas=1, node_timeout_ms=1000)
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield made
    made.close()


def test_a_primary_killed_while_a_replica_trips_an_agent_hands_its_slot_on_and_loses_no_verdict(
    replicated: ClusterSet,
) -> None:
    made = Replicas(replicated.url, timeout=0.25)  # the gateway's timeout
    try:
        a, b = made.engine("a"), made.engine("b")
        victim = replicated.owner(key("billing-assistant"))
        before = next(name for name in agents() if replicated.owner(key(name)) is victim)
        for _ in range(5):
            fail(b, before)  # tripped just before the kill: no WAIT on a cluster
        for _ in range(4):
            fail(a, "billing-assistant")

        victim.kill()
        fail(a, "billing-assistant")  # the fifth, while the slot has no primary: alone
        assert state(a, "billing-assistant") == "open"

        wait_until(
            lambda: replicated.owner(key("billing-assistant")) is not victim,
            "the cluster promoted the killed primary's replica",
        )
        wait_until(
            lambda: a.shared_lost is None and b.shared_lost is None,
            "both replicas joined the cluster again",
        )
        wait_until(lambda: state(b, "billing-assistant") == "open", "b heard of a's trip")
        assert state(a, before) == state(b, before) == "open"
        with replicated.owner(key("billing-assistant")).client() as client:
            assert client.hget(key("billing-assistant"), "state") == b"open"
            assert client.hget(key(before), "state") == b"open"
    finally:
        for engine in made.engines:
            engine.close()


def key(agent: str) -> str:
    return f"breakerdeck:breaker:{{{agent}}}"


def agents() -> Iterator[str]:
    return (f"agent-{number}" for number in itertools.count())
