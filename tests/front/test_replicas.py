"""Three `breakerdeck gateway` processes on one real Redis (DESIGN, "Replicas"), seen from
outside: agents are real HTTP clients, the platform is the loopback fixture counted at its wire,
each replica has its own state dir and runs at `--speed 10` (one test's at 1) on the fleet's one
clock anchor.

The gateway's cooldown is the agent policy's 300 s (its config does not set it), 30 real seconds
at `--speed 10`: too long to wait for each half-open. So the probe tests start from an agent
that another replica tripped a cooldown ago: an in-process engine on the same Redis whose clock
reads one cooldown behind. The gateways adopt that verdict, due for half-open at once, and
everything after is theirs. Every wait polls for a condition under a deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from breakerdeck.engine import AgentPolicy, Engine
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import LEASE_GRACE_SECONDS
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.shared import SharedStore
from breakerdeck.fixtures.faults import REFUSED, TIMEOUT, Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, write_config
from tests.front.test_gateway_process import Gateway
from tests.redis_server import RedisServer
from tests.waiting import BOUND_SECONDS, eventually, wait_until

SPEED = 10
POLICY = AgentPolicy()
#: Real seconds from a probe's admission to the end of its lease (and grace) at `SPEED`.
LEASE_REAL = (POLICY.probe_lease() + LEASE_GRACE_SECONDS) / SPEED
AGENTS = ("billing", "crm")
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="connection refused")


class Replica:
    """One gateway process; its standard error is read to the end on a thread, so what it
    logs (a lost store, its return) never fills the pipe and stalls it."""

    def __init__(self, config: Path, state_dir: Path, redis_url: str, speed: int) -> None:
        self.gateway = Gateway(
            config,
            *("--state-dir", str(state_dir)),
            *("--shared", redis_url, "--speed", str(speed)),
        )
        self.url = self.gateway.url
        threading.Thread(target=self._drain, daemon=True).start()
        self._serving()

    def _serving(self) -> None:
        """The gateway prints its address before it listens: wait for its first answer."""
        wait_until(self._answers, "the replica's first answer")

    def _answers(self) -> bool:
        try:
            httpx.get(self.url + "/-/healthz", timeout=1).raise_for_status()
        except httpx.TransportError:
            return False
        return True

    def _drain(self) -> None:
        stream = self.gateway.process.stderr
        assert stream is not None
        for line in stream:
            self.gateway.lines.append(line)

    def kill(self) -> None:
        """SIGKILL: the replica dies without a word, whatever it holds."""
        self.gateway.process.send_signal(signal.SIGKILL)
        self.gateway.process.wait(10)

    def stop(self) -> None:
        self.gateway.stop()


class Fleet:
    def __init__(self, config: Path, redis: RedisServer, tmp_path: Path) -> None:
        self.config = config
        self.redis = redis
        self.tmp_path = tmp_path
        self.replicas: list[Replica] = []

    async def start(self, *names: str, speed: int = SPEED) -> list[Replica]:
        """Replicas started side by side, each on its own state dir, once they serve."""

        def one(name: str) -> Replica:
            state_dir = self.tmp_path / f"state-{name}"
            replica = Replica(self.config, state_dir, self.redis.url, speed)
            self.replicas.append(replica)
            return replica

        return list(await asyncio.gather(*(asyncio.to_thread(one, name) for name in names)))

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()


@pytest.fixture
def server() -> Iterator[PlatformServer]:
    with PlatformServer({"payments": FakePlatform("payments")}) as running:
        yield running


@pytest.fixture
def platform(server: PlatformServer) -> FakePlatform:
    return server.platforms["payments"]


@pytest.fixture
async def fleet(
    tmp_path: Path, server: PlatformServer, redis_server: RedisServer
) -> AsyncIterator[Fleet]:
    grants = {agent: {"payments": credential_file(tmp_path)} for agent in AGENTS}
    config = write_config(tmp_path, {"payments": server.url("payments")}, grants)
    made = Fleet(config, redis_server, tmp_path)
    yield made
    made.stop()


async def call(http: httpx.AsyncClient, replica: Replica, agent: str = "billing") -> httpx.Response:
    return await http.get(replica.url + "/p/payments/v1/charges", headers=auth(agent))


def reason(answer: httpx.Response) -> str | None:
    """Why the breaker refused the call (403 `agent_halted`), or None when it let it in."""
    if answer.status_code != 403:
        return None
    body = answer.json()
    assert body["error"] == "agent_halted", body
    found: str = body["reason"]
    return found


async def state(http: httpx.AsyncClient, replica: Replica, agent: str) -> str:
    """The agent's breaker as the replica's metrics show it ("unknown" for an agent it lacks)."""
    text = (await http.get(replica.url + "/-/metrics")).text
    for family in text_string_to_metric_families(text):
        if family.name == "breakerdeck_breaker_state":
            for sample in family.samples:
                if sample.labels["key"] == agent and sample.value == 1:
                    return sample.labels["state"]
    return "unknown"


async def health(http: httpx.AsyncClient, replica: Replica) -> dict[str, str]:
    found: dict[str, str] = (await http.get(replica.url + "/-/healthz")).json()
    return found


def everywhere(
    replicas: list[Replica], probe: Callable[[Replica], Awaitable[object]], expected: object
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return all([await probe(replica) == expected for replica in replicas])

    return check


def trip_a_cooldown_ago(redis_url: str, agent: str) -> None:
    """Another replica, whose clock reads one cooldown (and a second) behind real time, saw
    the agent fail five times: the verdict it leaves in Redis is due for half-open on the
    fleet's clock, which runs ahead of real time from its anchor."""
    behind = time.time() - POLICY.cooldown_seconds - 1
    engine = Engine(
        POLICY,
        clock=ManualClock(epoch=behind),
        shared=SharedStore(redis_url),
        instance="earlier",
    )
    written: list[Event] = []
    engine.subscribe(written.append)
    try:
        engine.restore()
        for _ in range(POLICY.upstream_threshold):
            failed = engine.enter(agent, agent, "payments", "GET /v1/charges", 30.0)
            assert engine.admit(failed, POLICY.probe_lease()).allowed
            engine.complete(failed, UPSTREAM, "refused", 502)
        # Its own script tripped the agent. (Its view may already be half-open: a gateway,
        # whose clock is a cooldown ahead, can take the verdict to half-open at once.)
        (tripped,) = [e for e in written if e.type == ev.TRIPPED]
        assert not tripped.relayed and tripped.fields["count"] == POLICY.upstream_threshold
    finally:
        engine.close()


async def half_open_on(http: httpx.AsyncClient, replicas: list[Replica], agent: str) -> None:
    await eventually(
        everywhere(replicas, lambda r: state(http, r, agent), "half_open"),
        f"{agent} half-open on every replica",
    )


# -- exactly one probe -------------------------------------------------------------------------


async def test_150_concurrent_calls_over_three_replicas_at_half_open_send_one_probe(
    fleet: Fleet, server: PlatformServer, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    # At --speed 1 the probe's 30 s deadline is 30 real seconds, not 3 that the others'
    # answers on a loaded machine could outlast; the probe is held on the wire until they are in.
    replicas = await fleet.start("a", "b", "c", speed=1)
    trip_a_cooldown_ago(fleet.redis.url, "billing")
    await half_open_on(http, replicas, "billing")
    platform.set_fault(Fault(FaultKind.SLOW, delay=60))
    calls = [asyncio.create_task(call(http, replicas[n % 3])) for n in range(150)]
    answered = [await answer for answer in itertools.islice(asyncio.as_completed(calls), 149)]
    assert [reason(answer) for answer in answered] == ["probe_in_flight"] * 149
    assert platform.requests == 1
    (probe,) = [task for task in calls if not task.done()]
    server.release()
    assert (await probe).status_code == 200


async def test_a_killed_replicas_probe_holds_the_fleet_off_the_wire_until_its_lease_ends(
    fleet: Fleet, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    # Three times the fleet's speed: the lease it waits out is 121 engine seconds.
    holder, *others = await fleet.start("a", "b", "c", speed=3 * SPEED)
    lease_real = LEASE_REAL / 3
    trip_a_cooldown_ago(fleet.redis.url, "billing")
    await half_open_on(http, [holder, *others], "billing")
    platform.set_fault(TIMEOUT)  # the probe's request hangs at the platform
    sent = time.monotonic()
    probe = asyncio.create_task(call(http, holder))
    await eventually(lambda: platform.requests == 1, "the probe at the platform")
    holder.kill()
    with pytest.raises(httpx.TransportError):
        await probe

    seen: list[str | None] = []
    while "circuit_breaker_open" not in seen:
        ended = time.monotonic() - sent < lease_real + BOUND_SECONDS
        assert ended, f"the lease never ended: {seen}"
        answers = [await call(http, replica) for replica in others]
        seen = [reason(answer) for answer in answers]
        assert set(seen) <= {"probe_in_flight", "circuit_breaker_open"}, seen
    reopened = time.monotonic() - sent
    assert reopened >= lease_real
    assert platform.requests == 1  # nobody probed while the dead replica held the slot

    # The expiry is a failed probe: open again for a cooldown, everywhere and in Redis.
    with fleet.redis.client() as client:
        stored = client.hgetall("breakerdeck:breaker:billing")
    assert (stored[b"state"], stored[b"fp"], stored[b"probe"]) == (b"open", b"1", b"")
    assert stored[b"detail"] == b"probe never reported back"
    answers = [await call(http, replica) for replica in others]
    assert [reason(answer) for answer in answers] == ["circuit_breaker_open"] * 2
    assert platform.requests == 1


# -- Redis lost, and back ----------------------------------------------------------------------


async def test_redis_down_leaves_every_replica_on_its_verdicts_and_the_outages_verdict_returns(
    fleet: Fleet, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    replicas = await fleet.start("a", "b", "c")
    a, *others = replicas
    platform.set_fault(REFUSED)
    for n in range(POLICY.upstream_threshold):
        assert (await call(http, replicas[n % 3])).status_code == 502
    await eventually(
        everywhere(replicas, lambda r: state(http, r, "billing"), "open"), "billing open"
    )

    fleet.redis.kill()
    lost = {"status": "ok", "shared": "lost"}
    await eventually(everywhere(replicas, lambda r: health(http, r), lost), "the loss said")
    reached = platform.requests
    answers = [await call(http, replica) for replica in replicas]
    assert [reason(answer) for answer in answers] == ["circuit_breaker_open"] * 3
    assert platform.requests == reached

    # Counted alone: five failures on one replica trip crm there, and only there.
    for _ in range(POLICY.upstream_threshold):
        assert (await call(http, a, "crm")).status_code == 502
    assert reason(await call(http, a, "crm")) == "circuit_breaker_open"
    assert platform.requests == reached + POLICY.upstream_threshold
    assert [await state(http, replica, "crm") for replica in others] == ["closed"] * 2

    fleet.redis.start()  # on the same port, and empty: wiped too
    ok = {"status": "ok"}
    await eventually(everywhere(replicas, lambda r: health(http, r), ok), "the return said")
    with fleet.redis.client() as client:
        assert client.hget("breakerdeck:breaker:crm", "state") == b"open"
        assert client.hget("breakerdeck:breaker:billing", "state") == b"open"
    await eventually(everywhere(others, lambda r: state(http, r, "crm"), "open"), "crm adopted")


# -- joining late ------------------------------------------------------------------------------


async def test_a_replica_started_late_refuses_its_first_call_off_the_wire(
    fleet: Fleet, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    early = await fleet.start("a", "b")
    platform.set_fault(REFUSED)
    for n in range(POLICY.upstream_threshold):
        assert (await call(http, early[n % 2])).status_code == 502
    reached = platform.requests
    (late,) = await fleet.start("late")
    assert reason(await call(http, late)) == "circuit_breaker_open"
    assert platform.requests == reached
