"""A call its caller abandons is a neutral completion at every door (DESIGN, "Both policies"):
its task cancelled from outside, or `KeyboardInterrupt`, `SystemExit` or `GeneratorExit`
raised through the guarded body. It frees the probe slot at once (the next call is the probe,
counted at the wire), counts nothing, moves no cooldown, writes no `expired` line, and the
exception goes on to the caller; the third abandoned probe in a row of one open episode with
a request on the wire counts as a timeout."""

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from breakerdeck.engine import BreakerOpen, ManualClock, ToolPolicy
from breakerdeck.engine import events as ev
from breakerdeck.engine.core.breaker import Breaker
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness
from breakerdeck.engine.outcomes import ABANDONED, ABANDONED_TIMEOUT, Outcome, OutcomeClass
from breakerdeck.engine.parts.guard import Guard
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

REFUSED = Fault(FaultKind.REFUSED)
HANGING = Fault(FaultKind.SLOW, delay=600.0)
FAILED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
KEY = "search@default"


def _completed(lines: list[Event]) -> list[Event]:
    return [e for e in lines if e.type == ev.CALL_COMPLETED]


def _no_expired(lines: list[Event]) -> bool:
    return not [e for e in _completed(lines) if e.fields["fault"] == "expired"]


# -- the breaker's rule ----------------------------------------------------------------------


def _half_open(probe: int) -> Breaker:
    breaker = Breaker(KEY, ToolPolicy())
    for number in range(3):
        breaker.record(number, FAILED, 0.0)
    breaker.admit(probe, 30.0, 61.0)
    return breaker


def test_an_abandoned_probe_is_neutral_until_the_third_in_a_row_with_a_request_sent() -> None:
    breaker = _half_open(10)
    judged = []
    for probe in (10, 11, 12):
        breaker.admit(probe, 30.0, 61.0)
        judged.append(breaker.judge(probe, ABANDONED, sent=True))
        breaker.record(probe, judged[-1], 30.0)
    assert judged == [ABANDONED, ABANDONED, ABANDONED_TIMEOUT]


def test_a_probe_abandoned_before_it_sent_anything_leaves_the_run_as_it_was() -> None:
    breaker = _half_open(10)
    for probe, sent in ((10, True), (11, False), (12, True), (13, True)):
        breaker.admit(probe, 30.0, 61.0)
        judged = breaker.judge(probe, ABANDONED, sent=sent)
        breaker.record(probe, judged, 30.0)
    assert judged is ABANDONED_TIMEOUT


def test_any_other_outcome_of_the_probe_ends_the_run() -> None:
    breaker = _half_open(10)
    caller_error = Outcome(OutcomeClass.CALLER_ERROR, detail="400")
    for probe, outcome in ((10, ABANDONED), (11, ABANDONED), (12, caller_error)):
        breaker.admit(probe, 30.0, 61.0)
        breaker.record(probe, breaker.judge(probe, outcome, sent=True), 30.0)
    breaker.admit(13, 30.0, 61.0)
    assert breaker.judge(13, ABANDONED, sent=True) is ABANDONED


def test_a_call_that_is_not_the_probe_is_never_judged() -> None:
    breaker = _half_open(10)
    for number in (20, 21, 22):
        assert breaker.judge(number, ABANDONED, sent=True) is ABANDONED


# -- Engine.guard ------------------------------------------------------------------------------


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine(ToolPolicy(), clock=ManualClock())
    yield engine
    engine.close()


@pytest.fixture
def lines(engine: Engine) -> list[Event]:
    seen: list[Event] = []
    engine.subscribe(seen.append)
    return seen


def _tripped_guard(engine: Engine) -> Guard:
    guard = engine.guard(KEY, agent="planner", lease=61)
    for _ in range(3):
        with pytest.raises(ConnectionError), guard:
            raise ConnectionError("connection refused")
    engine.clock.advance(30)  # type: ignore[attr-defined]
    return guard


def _assert_freed(engine: Engine, guard: Guard, lines: list[Event]) -> None:
    """The slot is free at once, nothing moved, and the next call is the probe."""
    view = engine.view(KEY)
    assert (view.state, view.count, view.cooldown, view.failed_probes) == ("half_open", 3, 30, 0)
    abandoned = _completed(lines)[-1]
    assert (abandoned.fields["outcome"], abandoned.fields["counted"]) == ("caller_error", False)
    assert abandoned.fields["probe"] is True
    with guard:
        pass
    assert engine.view(KEY).state == "closed"
    engine.clock.advance(120)  # type: ignore[attr-defined]
    engine.poll()
    assert _no_expired(lines)


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_through_with_guard_frees_the_probe_slot(
    engine: Engine, lines: list[Event], raised: type[BaseException]
) -> None:
    guard = _tripped_guard(engine)
    with pytest.raises(raised), guard:
        raise raised()
    _assert_freed(engine, guard, lines)


def test_a_generator_closed_inside_with_guard_frees_the_probe_slot(
    engine: Engine, lines: list[Event]
) -> None:
    guard = _tripped_guard(engine)

    def results() -> Iterator[int]:
        with guard:
            yield 1
            yield 2

    stream = results()
    assert next(stream) == 1
    stream.close()  # GeneratorExit through the guarded body
    _assert_freed(engine, guard, lines)


async def test_a_task_cancelled_inside_async_with_guard_frees_the_probe_slot(
    engine: Engine, lines: list[Event]
) -> None:
    guard = _tripped_guard(engine)
    inside = asyncio.Event()

    async def body() -> None:
        async with guard:
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _assert_freed(engine, guard, lines)


def test_the_third_abandoned_probe_through_with_guard_counts_as_a_timeout(
    engine: Engine, lines: list[Event]
) -> None:
    guard = _tripped_guard(engine)
    for _ in range(3):
        with pytest.raises(KeyboardInterrupt), guard:
            raise KeyboardInterrupt
    view = engine.view(KEY)
    assert (view.state, view.cooldown, view.failed_probes) == ("open", 60, 1)
    third = _completed(lines)[-1]
    assert (third.fields["outcome"], third.fields["fault"]) == ("upstream_failure", "timeout")
    assert third.fields["counted"] is True


def test_an_abandoned_normal_call_through_with_guard_counts_nothing(
    engine: Engine, lines: list[Event]
) -> None:
    guard = engine.guard(KEY, agent="planner", lease=61)
    for _ in range(5):
        with pytest.raises(KeyboardInterrupt), guard:
            raise KeyboardInterrupt
    assert (engine.view(KEY).state, engine.view(KEY).count) == ("closed", 0)


def test_twenty_threads_whose_probe_is_interrupted_let_one_probe_and_then_the_next(
    engine: Engine,
) -> None:
    guard = _tripped_guard(engine)
    bodies = 0
    start = threading.Barrier(20)
    release = threading.Event()
    lock = threading.Lock()
    answers: list[str] = []

    def call() -> None:
        nonlocal bodies
        start.wait()
        try:
            with guard:
                with lock:
                    bodies += 1
                release.wait(60)
                raise KeyboardInterrupt
        except BreakerOpen as refused:
            answers.append(str(refused.result["status"]))
        except KeyboardInterrupt:
            answers.append("abandoned")

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for _ in range(6000):  # the premise: every other thread was answered while the probe is out
        if len(answers) == 19:
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(timeout=60)
    assert bodies == 1
    assert sorted(answers) == ["abandoned"] + ["probe_in_flight"] * 19
    with guard:  # the next call is the probe
        pass
    assert engine.view(KEY).state == "closed"


async def test_twenty_tasks_whose_probe_is_cancelled_still_let_one_probe_at_a_time(
    engine: Engine,
) -> None:
    guard = _tripped_guard(engine)
    inside = asyncio.Event()

    async def call() -> str:
        try:
            async with guard:
                inside.set()
                await asyncio.Event().wait()
        except BreakerOpen as refused:
            return str(refused.result["status"])
        return "unreachable"

    for _ in range(2):
        inside.clear()
        tasks = [asyncio.create_task(call()) for _ in range(20)]
        await inside.wait()
        await asyncio.sleep(0)
        done = [t for t in tasks if t.done()]
        assert [t.result() for t in done] == ["probe_in_flight"] * 19
        (probe,) = [t for t in tasks if not t.done()]
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
    assert engine.view(KEY).state == "half_open"


# -- the harness: call_tool, guard (sync and async) ------------------------------------------


async def _tripped_harness(harness: Harness, platform: FakePlatform) -> None:
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    await asyncio.sleep(30)
    harness.engine.poll()


async def _on_the_wire(platform: FakePlatform, before: int) -> None:
    """The premise: the call's request reached the wire (simulated time: waiting is free)."""
    for _ in range(1000):
        if platform.requests > before:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the call never reached the wire")


async def _abandon_call_tool(harness: Harness, platform: FakePlatform) -> None:
    platform.set_fault(HANGING)
    before = platform.requests
    task = asyncio.create_task(harness.call_tool("ava", "charge"))
    await _on_the_wire(platform, before)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_call_tool_probe_frees_the_slot_at_once(
    harness: Harness, platform: FakePlatform, tool_engine: Engine
) -> None:
    seen: list[Event] = []
    tool_engine.subscribe(seen.append)
    await _tripped_harness(harness, platform)
    await _abandon_call_tool(harness, platform)
    view = tool_engine.view("payments@default")
    assert (view.state, view.cooldown, view.failed_probes) == ("half_open", 30, 0)
    platform.set_fault(Fault(FaultKind.OK))
    assert (await harness.call_tool("ava", "charge"))["status"] == "ok"
    assert platform.requests == 3 * 2 + 1 + 1  # the next call was the probe, on the wire
    await asyncio.sleep(120)
    tool_engine.poll()
    assert _no_expired(seen)


async def test_a_probe_cancelled_while_its_admission_is_committed_frees_the_slot(
    harness: Harness, platform: FakePlatform, tool_engine: Engine
) -> None:
    seen: list[Event] = []
    tool_engine.subscribe(seen.append)
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    await asyncio.sleep(30)  # no poll: this call's admission writes the half-open, then waits
    task = asyncio.create_task(harness.call_tool("ava", "charge"))
    breaker = tool_engine.breaker("payments@default")
    for _ in range(1000):  # the premise: it holds the probe slot, nothing sent yet
        await asyncio.sleep(0)
        if breaker.probe_id is not None:
            break
    assert breaker.probe_id is not None and platform.requests == 3 * 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.probe_id is None
    abandoned = _completed(seen)[-1]
    assert (abandoned.fields["fault"], abandoned.fields["attempts"]) == ("none", 0)


async def test_the_third_cancelled_call_tool_probe_counts_as_a_timeout(
    harness: Harness, platform: FakePlatform, tool_engine: Engine
) -> None:
    await _tripped_harness(harness, platform)
    for _ in range(3):
        await _abandon_call_tool(harness, platform)
    view = tool_engine.view("payments@default")
    assert (view.state, view.cooldown, view.failed_probes) == ("open", 60, 1)


async def test_a_cancelled_normal_call_tool_counts_nothing(
    harness: Harness, platform: FakePlatform, tool_engine: Engine
) -> None:
    for _ in range(5):
        await _abandon_call_tool(harness, platform)
    view = tool_engine.view("payments@default")
    assert (view.state, view.count) == ("closed", 0)


def _interrupting(harness: Harness, raised: Callable[[], BaseException]) -> Callable[..., Any]:
    """A plain function guarded by the harness that raises `raised()` while `armed`."""
    state = {"armed": False, "calls": 0}

    @harness.guard("search", sleep=lambda seconds: None)
    def search(query: str) -> str:
        state["calls"] += 1
        if state["armed"]:
            raise raised()
        return query

    search.state = state  # type: ignore[attr-defined]
    return search


def test_a_keyboard_interrupt_through_a_guarded_function_frees_the_probe_slot(
    engine: Engine, lines: list[Event]
) -> None:
    harness = Harness(engine)

    @harness.guard("search", sleep=lambda seconds: None)
    def failing(query: str) -> str:
        raise ConnectionError("connection refused")

    for _ in range(3):
        assert failing("q", agent="ava")["status"] == "tool_error"
    engine.clock.advance(30)  # type: ignore[attr-defined]
    search = _interrupting(harness, KeyboardInterrupt)
    search.state["armed"] = True  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        search("q", agent="ava")
    view = engine.view(KEY)
    assert (view.state, view.cooldown, view.failed_probes) == ("half_open", 30, 0)
    search.state["armed"] = False  # type: ignore[attr-defined]
    assert search("q", agent="ava")["status"] == "ok"  # the probe
    assert engine.view(KEY).state == "closed"
    assert search.state["calls"] == 2  # type: ignore[attr-defined]


def test_a_quiet_call_interrupted_by_its_caller_records_nothing_and_counts_nothing(
    engine: Engine,
) -> None:
    harness = Harness(engine)  # nobody reads a line: a healthy call goes in with no ticket
    search = _interrupting(harness, KeyboardInterrupt)
    assert search("q", agent="ava")["status"] == "ok"
    seq = engine.seq
    search.state["armed"] = True  # type: ignore[attr-defined]
    for _ in range(5):
        with pytest.raises(KeyboardInterrupt):
            search("q", agent="ava")
    assert (engine.view(KEY).state, engine.view(KEY).count, engine.seq) == ("closed", 0, seq)


async def test_a_cancelled_async_guarded_function_frees_the_probe_slot(
    tool_engine: Engine,
) -> None:
    harness = Harness(tool_engine)
    inside = asyncio.Event()

    @harness.guard("search")
    async def failing(query: str) -> str:
        raise ConnectionError("connection refused")

    @harness.guard("search")
    async def hanging(query: str) -> str:
        inside.set()
        await asyncio.Event().wait()
        return query

    for _ in range(3):
        assert (await failing("q", agent="ava"))["status"] == "tool_error"
    await asyncio.sleep(30)
    task = asyncio.create_task(hanging("q", agent="ava"))
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    view = tool_engine.view(KEY)
    assert (view.state, view.cooldown, view.failed_probes) == ("half_open", 30, 0)

    @harness.guard("search")
    async def answering(query: str) -> str:
        return query

    assert (await answering("q", agent="ava"))["status"] == "ok"  # the probe
    assert tool_engine.view(KEY).state == "closed"


# -- the in-process gateway (`agent` policy) -------------------------------------------------


@pytest.fixture
def agent_engine(loop_clock: Any, tmp_path: Any) -> Iterator[Engine]:
    engine = Engine(AgentPolicy(), clock=loop_clock, state_dir=tmp_path / "agent-state")
    yield engine
    engine.close()


async def _abandon_gateway_call(gateway: Gateway, platform: FakePlatform) -> None:
    platform.set_fault(HANGING)
    before = platform.requests
    task = asyncio.create_task(gateway.call("ava", "payments", path="/charges", json={}))
    await _on_the_wire(platform, before)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_gateway_probe_frees_the_slot_at_once(
    agent_engine: Engine, platform: FakePlatform
) -> None:
    seen: list[Event] = []
    agent_engine.subscribe(seen.append)
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    gateway = Gateway(agent_engine, {"payments": client}, FakeVault())
    platform.set_fault(REFUSED)
    for _ in range(5):
        assert (await gateway.call("ava", "payments", path="/charges", json={})).status == 502
    await asyncio.sleep(300)
    await _abandon_gateway_call(gateway, platform)
    view = agent_engine.view("ava")
    assert (view.state, view.failed_probes) == ("half_open", 0)
    abandoned = _completed(seen)[-1]
    assert (abandoned.fields["agent_status"], abandoned.fields["counted"]) == (499, False)
    platform.set_fault(Fault(FaultKind.OK))
    before = platform.requests
    assert (await gateway.call("ava", "payments", path="/charges", json={})).status == 200
    assert platform.requests == before + 1
    assert agent_engine.view("ava").state == "closed"
    await asyncio.sleep(120)  # past the abandoned probe's lease: nothing expires
    agent_engine.poll()
    assert _no_expired(seen)
