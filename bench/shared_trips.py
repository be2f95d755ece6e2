"""Part 3 of bench/shared.py: round trips per operation, counted at the Redis server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench.shared_setup import (
    COUNT_ROUNDS,
    DOWN,
    KEEPALIVE,
    LEASE,
    SCRIPT_CALLS,
    SCRIPT_COMMANDS,
    failures,
    guard,
    store,
)
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS, Outcome
from breakerdeck.engine.policy import AgentPolicy
from tests.redis_server import RedisServer


@dataclass
class Trips:
    """Commands the server received for one kind of operation, over how many of them."""

    operations: int = 0
    scripts: int = 0
    others: int = 0
    other_names: set[str] = field(default_factory=set)
    pings: int = 0


class CommandStats:
    """`INFO commandstats` before and after each counted step."""

    def __init__(self, server: RedisServer) -> None:
        self._client = server.client()
        self.kinds: dict[str, Trips] = {}

    def _calls(self) -> dict[str, int]:
        stats = self._client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    @contextlib.contextmanager
    def count(self, kind: str, operations: int) -> Iterator[None]:
        before = self._calls()
        yield
        after = self._calls()
        trips = self.kinds.setdefault(kind, Trips())
        trips.operations += operations
        for name, calls in after.items():
            moved = calls - before.get(name, 0)
            if not moved or name == "info" or name in SCRIPT_COMMANDS:
                continue
            if name == KEEPALIVE:
                trips.pings += moved
            elif name in SCRIPT_CALLS:
                trips.scripts += moved
            else:
                trips.others += moved
                trips.other_names.add(name)

    def close(self) -> None:
        self._client.close()


def _probe(engine: Engine, key: str, outcome: Outcome) -> None:
    """One probe: its admit (the store's half-open and probe slot) and its outcome."""
    call = engine.enter(key, key, "up", "GET", LEASE)
    if not engine.admit(call, LEASE).as_probe:
        raise RuntimeError(f"{key}: the cooldown ended but no probe was let in")
    engine.complete(call, outcome, "ok" if outcome is SUCCESS else "upstream", 200)


def round_trips(server: RedisServer) -> dict[str, Trips]:
    clock = ManualClock()
    policy = AgentPolicy()
    engine = Engine(policy, clock=clock, shared=store(server.url), instance="counting")
    engine.restore()
    counter = CommandStats(server)
    with engine:
        failures(engine, "warm-up", 1)  # the script's first call loads it (NOSCRIPT, LOAD)
        for n in range(COUNT_ROUNDS):
            key = f"agent-{n:03d}"
            with counter.count("healthy call, closed", 10):
                for _ in range(10):
                    guard(engine)()  # key AGENT, never failing
            with counter.count("counted failure, no trip", 4):
                failures(engine, key, 4)
            with counter.count("counted failure that trips", 1):
                failures(engine, key, 1)
            with counter.count("refusal in the cooldown", 10):
                for _ in range(10):
                    call = engine.enter(key, key, "up", "GET", LEASE)
                    assert not engine.admit(call, LEASE).allowed
            clock.advance(policy.cooldown_seconds + 1)
            with counter.count("probe that fails", 1):
                _probe(engine, key, DOWN)
            clock.advance(policy.cooldown_seconds + 1)
            with counter.count("probe that recovers", 1):
                _probe(engine, key, SUCCESS)
    counter.close()
    return counter.kinds
