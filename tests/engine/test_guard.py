"""`Engine.guard`: a reusable per-key guard in the article's shape (DESIGN, "tool policy")."""

import asyncio
import threading

import pytest

from breakerdeck.engine import BreakerOpen, Engine, ManualClock, ToolPolicy
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import Outcome, OutcomeClass


@pytest.fixture
def engine() -> Engine:
    return Engine(ToolPolicy(), clock=ManualClock())


def _fail(guard) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConnectionError), guard:
        raise ConnectionError("connection refused")


def test_a_closed_guard_runs_the_body_and_records_its_success(engine: Engine) -> None:
    guard = engine.guard("search@default", agent="planner", lease=61)
    with guard:
        ran = True
    assert ran
    view = engine.view("search@default")
    assert (view.state, view.count) == ("closed", 0)


def test_the_bodys_exception_is_counted_and_raised_again(engine: Engine) -> None:
    guard = engine.guard("search@default", agent="planner", lease=61)
    _fail(guard)
    assert engine.view("search@default").count == 1


def test_three_counted_failures_open_it_and_the_fourth_never_runs_its_body(
    engine: Engine,
) -> None:
    guard = engine.guard("search@default", agent="planner", lease=61)
    for _ in range(3):
        _fail(guard)
    ran = False
    with pytest.raises(BreakerOpen) as refused, guard:
        ran = True
    assert not ran
    assert refused.value.result["status"] == "circuit_open"
    assert "3 times" in refused.value.result["reason"]
    assert refused.value.result["retry_after_ms"] == 30_000


def test_an_exception_its_classifier_calls_the_callers_never_counts(engine: Engine) -> None:
    def classify(value: object, error: BaseException | None) -> Outcome:
        return Outcome(OutcomeClass.CALLER_ERROR, detail=str(error))

    guard = engine.guard("search@default", agent="planner", lease=61, classifier=classify)
    for _ in range(10):
        with pytest.raises(ValueError), guard:
            raise ValueError("bad query")
    assert engine.view("search@default").state == "closed"


async def test_fifty_tasks_at_half_open_let_exactly_one_body_run(engine: Engine) -> None:
    guard = engine.guard("search@default", agent="planner", lease=61)
    for _ in range(3):
        _fail(guard)
    engine.clock.advance(30)  # type: ignore[attr-defined]
    bodies = 0
    release = asyncio.Event()

    async def call() -> str:
        nonlocal bodies
        try:
            async with guard:
                bodies += 1
                await release.wait()
        except BreakerOpen as refused:
            return str(refused.result["status"])
        return "ok"

    tasks = [asyncio.create_task(call()) for _ in range(50)]
    while sum(task.done() for task in tasks) < 49:
        await asyncio.sleep(0)
    release.set()
    statuses = await asyncio.gather(*tasks)
    assert bodies == 1
    assert sorted(statuses) == ["ok"] + ["probe_in_flight"] * 49
    assert engine.view("search@default").state == "closed"


def test_one_guard_serves_many_threads_at_once(engine: Engine) -> None:
    guard = engine.guard("search@default", agent="planner", lease=61)
    lines: list[Event] = []
    engine.subscribe(lines.append)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                with guard:
                    pass
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    outcomes = [line.fields["outcome"] for line in lines if line.type == ev.CALL_COMPLETED]
    assert outcomes == ["success"] * 1600
    assert len({line.fields["call_id"] for line in lines}) == 1600
