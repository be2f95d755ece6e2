"""Two `breakerdeck gateway` processes on a Redis that Sentinel watches, the primary killed
with `kill -9` while several clients call both (DESIGN, "Replicas", "High availability"): a
real primary, its replica and three sentinels on loopback, the platforms the loopback fixture
counted at its wire (tests/front/sentinel_soak.py). On the sentinel worker: one set at a time
fails over there, so a loaded machine never stretches two elections at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.front.sentinel_soak import BUSY, OPEN, Soak
from tests.redis_server import RedisServerMissing

pytestmark = pytest.mark.xdist_group("sentinel")

#: Tripped by the gateways just before the primary is killed.
LATE = "crm"
#: Due for half-open from the start, probed once the new primary answers.
PROBED = "ops"


@pytest.fixture
async def soak(tmp_path: Path) -> AsyncIterator[Soak]:
    try:
        made = Soak(tmp_path, (LATE,), (PROBED,))
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)
    try:
        await made.start()
        yield made
    finally:
        made.close()


async def test_a_primary_killed_under_calls_loses_no_verdict_and_keeps_one_probe_per_half_open(
    soak: Soak, http: httpx.AsyncClient
) -> None:
    await soak.trip(http, OPEN)
    assert await soak.states(http, OPEN) == ["open"] * 3

    failover = await soak.failover(http, tripped_last=LATE, clients=4)

    # No 500: the open agent refused off the wire, the busy one served, on both replicas.
    by_agent = {
        agent: {(a.status, a.reason) for a in failover.answers if a.agent == agent}
        for agent in (OPEN, BUSY)
    }
    assert by_agent == {OPEN: {(403, "circuit_breaker_open")}, BUSY: {(200, None)}}
    assert all(failover.during_loss(n) for n in (0, 1)), "calls answered during the loss"

    # No verdict lost: the agent open before, and the one tripped just before the kill, are
    # open on both replicas and on the new primary; the loss is said no more.
    assert await soak.states(http, OPEN) == ["open"] * 3
    assert await soak.states(http, LATE) == ["open"] * 3
    assert await soak.healthy(http)

    # One probe for the fleet once the new primary answers.
    answers = await soak.probes(http, PROBED, calls=20)
    assert soak.ledger.requests == 1
    assert {(a.status, a.reason) for a in answers} == {(403, "probe_in_flight")}
