"""Two `breakerdeck gateway` processes sharing their agents through `redis+sentinel://`, the
primary failed over while clients call them (DESIGN, "Replicas", "High availability"): one
piece of code for what tests/front/test_replicas_failover.py pins and bench/failover.py
measures longer.

The platforms are the loopback fixture, counted at its wire: `payments` answers, `dead` refuses
(it trips agents), `ledger` takes the probes and holds them until released. A health watcher
polls each replica's `/-/healthz` for the whole round, so "shared store lost" is seen as the
replicas say it, not as the sentinels do, and each answer a client got is placed inside or
outside its replica's loss by when it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx
import redis

from breakerdeck.fixtures.faults import REFUSED, Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, write_config
from tests.front.test_replicas import POLICY, Replica, reason, state, trip_a_cooldown_ago
from tests.redis_server import SentinelSet
from tests.waiting import eventually

#: Open before the round, and left alone: its verdict must outlive the failover.
OPEN = "billing"
#: Healthy calls through the failover: decided alone while the store is lost, never a 500.
BUSY = "search"
PLATFORMS = ("payments", "dead", "ledger")
#: How long a probe is held at the platform: released by the test, never waited out.
HELD = 600.0


Kind = Literal["kill", "host", "planned"]
#: How a round fails the primary over: `kill -9` of the primary; of the primary and the
#: sentinel on its host; or a planned failover (`SENTINEL FAILOVER`), the old primary left up.
KINDS: tuple[Kind, ...] = ("kill", "host", "planned")


@dataclass(frozen=True, slots=True)
class Answer:
    at: float
    replica: int
    agent: str
    status: int
    reason: str | None


@dataclass
class Round:
    """One failover as the clients and the health watcher saw it."""

    #: When the failover was set off (monotonic).
    began: float = 0.0
    #: Per replica, each look at `/-/healthz`: when, and whether it said the store was lost.
    looks: list[list[tuple[float, bool]]] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    def lost(self, replica: int) -> list[tuple[float, float]]:
        """The spans a replica said "shared store lost": from the first look that said it to
        the first that no longer did."""
        spans: list[tuple[float, float]] = []
        since: float | None = None
        for at, lost in self.looks[replica]:
            if lost and since is None:
                since = at
            elif not lost and since is not None:
                spans.append((since, at))
                since = None
        if since is not None:
            spans.append((since, self.looks[replica][-1][0]))
        return spans

    def lost_seconds(self, replica: int) -> float:
        return sum(end - start for start, end in self.lost(replica))

    def during_loss(self, replica: int) -> Counter[int]:
        """The answers this replica gave while it said the store was lost, by status."""
        spans = self.lost(replica)
        return Counter(
            answer.status
            for answer in self.answers
            if answer.replica == replica and any(a <= answer.at <= b for a, b in spans)
        )


class Soak:
    """The Sentinel set, the platforms and two gateway replicas on them."""

    def __init__(self, directory: Path, agents: tuple[str, ...], probed: tuple[str, ...]) -> None:
        """`agents` for the test's own uses; `probed`, agents tripped a cooldown ago before
        anything else is open (the engine that trips them runs a cooldown behind, and clamps
        every verdict it reads to its clock: see "Clocks" in docs/replicas.md), so the
        replicas find them due for half-open."""
        self.probed = probed
        self.replicas: list[Replica] = []
        self._directory = directory
        self.sentinels = SentinelSet(directory / "sentinels")
        self._running = contextlib.ExitStack()
        try:
            self.server = self._running.enter_context(
                PlatformServer({name: FakePlatform(name) for name in PLATFORMS})
            )
            self.server.platforms["dead"].set_fault(REFUSED)
            grants = {
                agent: dict.fromkeys(PLATFORMS, credential_file(directory))
                for agent in (OPEN, BUSY, *agents, *probed)
            }
            urls = {name: self.server.url(name) for name in PLATFORMS}
            self.config = write_config(directory, urls, grants)
        except BaseException:
            self.close()
            raise

    async def start(self) -> None:
        for agent in self.probed:
            trip_a_cooldown_ago(self.sentinels.url, agent)

        def one(name: str) -> Replica:
            state_dir = self._directory / f"state-{name}"
            replica = Replica(self.config, state_dir, self.sentinels.url, speed=1)
            self.replicas.append(replica)
            return replica

        await asyncio.gather(*(asyncio.to_thread(one, name) for name in ("a", "b")))

    def close(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self._running.close()
        self.sentinels.close()

    @property
    def ledger(self) -> FakePlatform:
        return self.server.platforms["ledger"]

    async def call(
        self, http: httpx.AsyncClient, replica: int, agent: str, platform: str = "payments"
    ) -> httpx.Response:
        url = self.replicas[replica].url + f"/p/{platform}/v1/charges"
        return await http.get(url, headers=auth(agent))

    async def trip(self, http: httpx.AsyncClient, agent: str) -> None:
        """The agent's threshold of refused calls, alternating replicas, each answered 502."""
        for n in range(POLICY.upstream_threshold):
            answer = await self.call(http, n % 2, agent, "dead")
            assert answer.status_code == 502, answer.text

    async def states(self, http: httpx.AsyncClient, agent: str) -> list[str]:
        """The agent's breaker on each replica, then in the store as its primary holds it."""
        seen = [await state(http, replica, agent) for replica in self.replicas]
        with self.sentinels.client() as client:
            stored = client.hget(f"breakerdeck:breaker:{agent}", "state")
        return [*seen, stored.decode() if stored else "unknown"]

    async def healthy(self, http: httpx.AsyncClient) -> bool:
        looks = [await http.get(replica.url + "/-/healthz") for replica in self.replicas]
        return all(look.json() == {"status": "ok"} for look in looks)

    async def failover(
        self,
        http: httpx.AsyncClient,
        tripped_last: str,
        clients: int,
        settle: float = 0.0,
        kind: Kind = "kill",
    ) -> Round:
        """`clients` callers on both replicas, `tripped_last` tripped, then at once the
        failover (`KINDS`); the round ends when both replicas serve the new primary again and
        `settle` seconds after (the callers still calling)."""
        made = Round(looks=[[] for _ in self.replicas])
        stop = asyncio.Event()
        tasks = [asyncio.create_task(self._watch(http, n, made, stop)) for n in (0, 1)]
        tasks += [asyncio.create_task(self._client(http, n, made, stop)) for n in range(clients)]
        try:
            await self.trip(http, tripped_last)
            old = self.sentinels.primary_port()
            self._fail(kind)
            made.began = time.monotonic()
            await eventually(
                lambda: all(made.lost(n) for n in (0, 1)), "each replica said the store was lost"
            )
            await eventually(
                lambda: self._promoted(old) and all(not looks[-1][1] for looks in made.looks),
                "both replicas serving the new primary",
            )
            await asyncio.sleep(settle)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        return made

    def _fail(self, kind: Kind) -> None:
        sentinels = self.sentinels
        if kind == "planned":
            sentinels.failover()
            return
        primary = sentinels.current_primary()
        if kind == "host":
            sentinels.kill_sentinel(sentinels.sentinel_of(primary))
        primary.kill()

    def _promoted(self, old: int) -> bool:
        try:
            return self.sentinels.primary_port() != old
        except redis.RedisError:  # a sentinel busy electing: asked again
            return False

    async def _watch(
        self, http: httpx.AsyncClient, replica: int, made: Round, stop: asyncio.Event
    ) -> None:
        url = self.replicas[replica].url + "/-/healthz"
        while not stop.is_set():
            look = (await http.get(url)).json()
            made.looks[replica].append((time.monotonic(), look.get("shared") == "lost"))
            await asyncio.sleep(0.02)

    async def _client(
        self, http: httpx.AsyncClient, number: int, made: Round, stop: asyncio.Event
    ) -> None:
        """Calls the open agent and the busy one, on each replica in turn."""
        for n in itertools.count(number):
            if stop.is_set():
                return
            agent = (OPEN, BUSY)[n % 2]
            replica = n // 2 % 2
            answer = await self.call(http, replica, agent)
            made.answers.append(
                Answer(time.monotonic(), replica, agent, answer.status_code, reason(answer))
            )

    async def probes(self, http: httpx.AsyncClient, agent: str, calls: int) -> list[Answer]:
        """`calls` at once over both replicas for a `probed` agent, while the platform holds
        what reaches it. Returns the answers of all but the calls still held (the probes), once
        only those are left, then releases them."""
        ledger = self.ledger
        reached = ledger.requests
        ledger.set_fault(Fault(FaultKind.SLOW, delay=HELD))
        self.server.released.clear()
        tasks = [asyncio.create_task(self.call(http, n % 2, agent, "ledger")) for n in range(calls)]

        def settled() -> bool:
            return sum(not task.done() for task in tasks) <= ledger.requests - reached

        try:
            await eventually(settled, "every call answered but those at the platform")
            answers = [
                Answer(
                    time.monotonic(), n % 2, agent, task.result().status_code, reason(task.result())
                )
                for n, task in enumerate(tasks)
                if task.done()
            ]
        finally:
            self.server.release()
            await asyncio.gather(*tasks, return_exceptions=True)
        return answers
