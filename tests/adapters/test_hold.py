"""Hold and shadow at each framework's own tool hook (DESIGN, "Operator control: hold and
shadow"), through the framework's real agent loop: a held key's refusal reaches the model in
the framework's failure form, marked `held`, and nothing reaches the wire; an adapter made with
`mode="shadow"` lets the calls its breaker would refuse through, and the model reads the tool's
own answer. The fixture platform counts every request."""

from __future__ import annotations

from breakerdeck.engine.engine import Engine
from tests.adapters.support import KEY, Crm, Driver, refusal, status_of

HELD = {
    "status": "circuit_open",
    "tool": "lookup_customer",
    "held": True,
    "reason": "held open by ana until 01:00 UTC: vendor maintenance",
    "retry_after_ms": 3_600_000,
    "alternatives": [],
}


async def test_a_held_key_is_refused_in_the_frameworks_form_and_nothing_reaches_the_wire(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm)
    await driver.run()
    assert crm.platform.requests == 1
    engine.hold(KEY, "ana", "vendor maintenance", 3600)
    await driver.runs(2)
    assert crm.platform.requests == 1
    assert refusal(driver.seen[-1]) == HELD


async def test_with_mode_shadow_the_calls_an_open_breaker_would_refuse_reach_the_tool(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm, mode="shadow")
    crm.down()
    await driver.runs(3)
    view = engine.view(KEY)
    assert (view.state, view.mode) == ("open", "shadow")
    crm.up()
    await driver.runs(2)
    assert crm.platform.requests == 5
    assert status_of(driver.seen[-1]) == "ok"
    assert engine.view(KEY).state == "open"


async def test_an_operators_enforce_wins_over_the_adapters_shadow(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm, mode="shadow")
    crm.down()
    await driver.runs(3)
    engine.set_mode(KEY, "enforce", "ana", "shadow looked right")
    await driver.run()
    assert crm.platform.requests == 3
    assert status_of(driver.seen[-1]) == "circuit_open"
