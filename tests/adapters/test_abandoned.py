"""A call whose run the framework abandons (its task cancelled mid-call) is a neutral completion
at every adapter (DESIGN, "Both policies"): the probe slot is free at once, nothing counts, no
cooldown moves, and the third abandoned probe of an episode with a request on the wire counts
as a timeout. Counted at the wire, through each framework's own agent loop (`driver`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from tests.adapters.support import KEY, Crm, Driver


async def _tripped(driver: Driver, engine: Engine, crm: Crm, clock: ManualClock) -> None:
    """Open the breaker, wait out its cooldown: the next call is the probe."""
    driver.build(engine, crm)
    crm.down()
    await driver.runs(3)
    clock.advance(30)


async def _abandoned_run(driver: Driver, crm: Crm) -> None:
    """One run whose call reaches the wire and hangs there, then the run is cancelled."""
    crm.slow(600)
    before = crm.platform.requests
    run = asyncio.create_task(driver.run())
    for _ in range(1000):  # the premise: the call is on the wire (simulated time: no cost)
        if crm.platform.requests > before:
            break
        await asyncio.sleep(0.001)
    assert crm.platform.requests == before + 1
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run


def _completed(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == ev.CALL_COMPLETED]


async def test_an_abandoned_probe_frees_the_slot_at_once_and_moves_nothing(
    driver: Driver, engine: Engine, crm: Crm, clock: ManualClock, events: list[Any]
) -> None:
    await _tripped(driver, engine, crm, clock)
    await _abandoned_run(driver, crm)
    view = engine.view(KEY)
    assert (view.state, view.count, view.cooldown, view.failed_probes) == ("half_open", 3, 30, 0)
    abandoned = _completed(events)[-1]
    assert abandoned.fields["probe"] is True and abandoned.fields["counted"] is False
    assert (abandoned.fields["outcome"], abandoned.fields["fault"]) == ("caller_error", "cancelled")
    crm.up()
    await driver.run()  # the next call is the probe, at once
    assert crm.platform.requests == 3 + 1 + 1
    assert engine.view(KEY).state == "closed"
    clock.advance(120)  # past the abandoned probe's lease: nothing expires
    engine.poll()
    assert not [e for e in _completed(events) if e.fields["fault"] == "expired"]


async def test_the_third_abandoned_probe_of_an_episode_counts_as_a_timeout(
    driver: Driver, engine: Engine, crm: Crm, clock: ManualClock, events: list[Any]
) -> None:
    await _tripped(driver, engine, crm, clock)
    for _ in range(2):
        await _abandoned_run(driver, crm)
    assert engine.view(KEY).state == "half_open"
    await _abandoned_run(driver, crm)
    view = engine.view(KEY)
    assert (view.state, view.cooldown, view.failed_probes) == ("open", 60, 1)
    third = _completed(events)[-1]
    assert (third.fields["outcome"], third.fields["fault"]) == ("upstream_failure", "timeout")
    assert third.fields["counted"] is True and third.fields["probe"] is True
    assert crm.platform.requests == 3 + 3


async def test_an_abandoned_normal_call_counts_nothing(
    driver: Driver, engine: Engine, crm: Crm, events: list[Any]
) -> None:
    driver.build(engine, crm)
    await _abandoned_run(driver, crm)
    view = engine.view(KEY)
    assert (view.state, view.count) == ("closed", 0)
    assert not any(e.fields.get("counted") for e in _completed(events))
