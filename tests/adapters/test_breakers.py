"""The `tool` policy at each framework's own tool hook, as every adapter must keep it: counted
at the wire, through the framework's real agent loop (`driver`, one per framework)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from tests.adapters.support import KEY, Crm, Driver, fresh_engine, keys_on, refusal, status_of


async def test_three_refused_calls_open_the_breaker_and_the_next_never_reaches_the_wire(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm)
    crm.down()
    await driver.runs(3)
    assert crm.platform.requests == 3  # 3 calls x 1 attempt: the tool is not idempotent
    assert engine.view(KEY).state == "open"
    await driver.run()
    assert crm.platform.requests == 3
    answer = refusal(driver.seen[-1])
    assert (answer["status"], answer["tool"]) == ("circuit_open", "lookup_customer")
    assert answer["reason"].startswith("crm@default failed 3 times in a row")


async def test_a_counted_failure_reaches_the_model_as_the_structured_result(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm)
    crm.down()
    await driver.run()
    answer = refusal(driver.seen[-1])
    assert (answer["status"], answer["attempts"]) == ("tool_error", 1)
    assert answer["reason"].startswith("ConnectError")


async def test_an_idempotent_tool_keeps_its_retry_budget_where_the_hook_can_rerun_it(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm, idempotent=["lookup_customer"])
    crm.down()
    await driver.runs(3)
    assert crm.platform.requests == 3 * (2 if driver.reruns else 1)  # 3 calls x the attempts
    assert engine.view(KEY).state == "open"


async def test_a_tool_not_named_idempotent_is_never_retried(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.calls = [("send_email", {"to": "ada@example.com"})]
    driver.build(engine, crm, idempotent=["lookup_customer"])
    crm.down()
    await driver.run()
    assert crm.platform.requests == 1
    assert refusal(driver.seen[-1])["attempts"] == 1


async def test_ten_argument_errors_reach_the_tool_ten_times_and_never_trip(
    driver: Driver, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm)
    crm.bad_request()
    await driver.runs(10)
    assert crm.platform.requests == 10
    assert (engine.view(KEY).state, engine.view(KEY).count) == ("closed", 0)
    assert status_of(driver.seen[-1]) == "invalid_request"


async def test_twenty_parallel_calls_at_half_open_send_one_probe(
    driver: Driver, engine: Engine, crm: Crm, clock: ManualClock
) -> None:
    driver.build(engine, crm)
    crm.down()
    await driver.runs(3)
    clock.advance(30)
    crm.slow(5)
    driver.calls = [("lookup_customer", {"customer": f"c-{i}"}) for i in range(20)]
    driver.seen.clear()
    await driver.run()
    assert crm.platform.requests == 3 + 1
    statuses = sorted(status_of(content) for content in driver.seen)
    assert statuses == ["ok"] + ["probe_in_flight"] * 19
    assert engine.view(KEY).state == "closed"


async def test_a_fresh_engine_on_the_same_state_dir_refuses_the_first_call(
    driver: Driver, engine: Engine, crm: Crm, clock: ManualClock, state_dir: Path
) -> None:
    driver.build(engine, crm)
    crm.down()
    await driver.runs(3)
    engine.close()
    again = fresh_engine(clock, state_dir)
    try:
        driver.build(again, crm)
        await driver.run()
        assert status_of(driver.seen[-1]) == "circuit_open"
        assert crm.platform.requests == 3
    finally:
        again.close()


async def test_the_breaker_shows_under_backend_at_credential(
    driver: Driver, engine: Engine, crm: Crm, events: list[Any]
) -> None:
    def tenant(tool: str, arguments: Any, context: Any) -> str:
        return f"tenant-{arguments['customer']}"

    driver.build(engine, crm, credential=tenant)
    await driver.run()
    assert [view.key for view in engine.views()] == ["crm@tenant-c-1"]
    assert keys_on(events) == {"crm@tenant-c-1"}
    assert {event.agent for event in events} == {driver.agent_name}
