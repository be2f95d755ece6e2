"""A healthy function-tool call nobody watches (no listener, no audit log) makes its first
attempt with no ticket and takes one only when that attempt has something to record; whatever
path it takes, it answers, counts and writes as a call that took its ticket first."""

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy

KEY = "crm@default"
CALLERS = 20
JOIN_SECONDS = 30


class Backend:
    """A function tool's backend: counts its invocations, fails while `failing` says so."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = 0  # how many invocations from now on fail

    def run(self) -> dict[str, int]:
        self.calls += 1
        if self.failing:
            self.failing -= 1
            raise ConnectionError("crm unreachable")
        return {"id": self.calls}

    async def arun(self, args: Any = None) -> dict[str, int]:
        return self.run()


def unwatched() -> Engine:
    return Engine(ToolPolicy(), clock=ManualClock())


def on_state_dir(tmp_path: Path) -> Engine:
    """An engine on a state dir, restored, with no listener: its audit log alone reads lines."""
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=tmp_path / "state")
    engine.restore()
    return engine


def watched() -> tuple[Engine, list[ev.Event]]:
    engine = unwatched()
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    return engine, lines


def lookup_harness(engine: Engine, backend: Backend, **settings: Any) -> Harness:
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="crm", function=backend.arun, **settings))
    return harness


def guarded(engine: Engine, backend: Backend, **settings: Any) -> Any:
    harness = lookup_harness(engine, backend, **settings)
    return harness.guard("lookup", sleep=lambda seconds: None)(backend.run)


def completed(lines: list[ev.Event]) -> list[ev.Event]:
    return [line for line in lines if line.type == ev.CALL_COMPLETED]


async def test_a_healthy_call_answers_alike_watched_or_not():
    quiet_backend, seen_backend = Backend(), Backend()
    quiet = lookup_harness(unwatched(), quiet_backend)
    seen = lookup_harness(watched()[0], seen_backend)
    answers = [[await h.call_tool("ava", "lookup") for _ in range(4)] for h in (quiet, seen)]
    assert (
        answers[0]
        == answers[1]
        == [{"status": "ok", "tool": "lookup", "data": {"id": n}} for n in range(1, 5)]
    )


def test_a_healthy_guarded_call_answers_alike_watched_or_not():
    quiet, seen = guarded(unwatched(), Backend()), guarded(watched()[0], Backend())
    assert [quiet(agent="ava") for _ in range(4)] == [seen(agent="ava") for _ in range(4)]


@pytest.mark.parametrize("audited", [False, True], ids=["no state dir", "state dir"])
async def test_a_healthy_call_nobody_watches_takes_no_call_number(audited, tmp_path):
    """The audit log keeps no successes: a state dir alone leaves the quiet path on."""
    engine = on_state_dir(tmp_path) if audited else unwatched()
    harness = lookup_harness(engine, Backend())
    for _ in range(5):  # the first learns that the credential works: it takes its ticket
        await harness.call_tool("ava", "lookup")
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    await harness.call_tool("ava", "lookup")
    engine.close()
    assert [line.call_id for line in completed(lines)] == ["call-000002"]


@pytest.mark.parametrize("failures", [1, 2])
async def test_a_failing_first_attempt_nobody_watches_is_retried_and_counted_once(failures):
    engine, backend = unwatched(), Backend()
    harness = lookup_harness(engine, backend, attempts=2, backoff_seconds=0, idempotent=True)
    await harness.call_tool("ava", "lookup")
    backend.failing = failures
    result = await harness.call_tool("ava", "lookup")
    assert backend.calls == 3
    if failures == 2:
        assert result["status"] == "tool_error" and result["attempts"] == 2
        assert engine.view(KEY).count == 1
    else:
        assert result == {"status": "ok", "tool": "lookup", "data": {"id": 3}}
        assert engine.view(KEY).count == 0


def test_a_failing_guarded_call_nobody_watches_is_retried_and_counted_once():
    engine, backend = unwatched(), Backend()
    guard = guarded(engine, backend, attempts=2, idempotent=True)
    guard(agent="ava")
    backend.failing = 2
    result = guard(agent="ava")
    assert backend.calls == 3
    assert result["status"] == "tool_error" and result["attempts"] == 2
    assert engine.view(KEY).count == 1


def test_a_call_let_in_quietly_writes_its_admission_for_a_listener_that_came_meanwhile():
    engine, backend = unwatched(), Backend()
    lines: list[ev.Event] = []
    guard = guarded(engine, backend)
    guard(agent="ava")
    admitted_seq = engine.seq

    def failing_while_a_console_attaches() -> None:
        engine.subscribe(lines.append)
        engine.clock.advance(5)
        raise ConnectionError("crm unreachable")

    late = lookup_harness(engine, backend).guard("lookup")(failing_while_a_console_attaches)
    assert late(agent="ava")["status"] == "tool_error"
    (line,) = completed(lines)
    assert (line.admitted_t, line.admitted_as, line.admitted_seq) == (0.0, "normal", admitted_seq)
    assert (line.attempts, line.counted, line.call_id) == (1, True, "call-000002")


def test_a_success_racing_a_trip_is_recorded_as_a_watched_one_is():
    def states(engine: Engine) -> tuple[str, int]:
        backend = Backend()
        guard = guarded(engine, backend)
        guard(agent="ava")
        tripper = Backend()
        tripping = guarded(engine, tripper)

        def tripped_meanwhile() -> str:
            tripper.failing = 3
            for _ in range(3):
                tripping(agent="bo")
            assert engine.view(KEY).state == "open"
            return "done"

        lookup_harness(engine, backend).guard("lookup")(tripped_meanwhile)(agent="ava")
        view = engine.view(KEY)
        return view.state, view.count

    assert states(unwatched()) == states(watched()[0])


def tripped(engine: Engine, backend: Backend) -> Any:
    """A guard on the lookup, after three counted failures have opened its breaker."""
    guard = guarded(engine, backend)
    backend.failing = 3
    for _ in range(3):
        guard(agent="ava")
    return guard


def test_a_refusal_nobody_reads_takes_no_ticket_and_is_counted():
    engine, backend = unwatched(), Backend()
    guard = tripped(engine, backend)
    refusals = [guard(agent="ava")["status"] for _ in range(5)]
    assert refusals == ["circuit_open"] * 5 and backend.calls == 3
    assert sum(engine.tallies()[0][1].values()) == 5
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    guard(agent="ava")
    (denied,) = [line for line in lines if line.type == ev.CALL_DENIED]
    assert denied.fields["call_id"] == "call-000004"


def test_twenty_threads_through_a_half_open_breaker_nobody_watches_reach_it_once():
    engine, backend = unwatched(), Backend()
    tripped(engine, backend)
    engine.clock.advance(30)
    gate, barrier = threading.Event(), threading.Barrier(CALLERS)
    answers: list[str] = []

    def held() -> dict[str, int]:
        gate.wait(JOIN_SECONDS)
        return backend.run()

    holding = lookup_harness(engine, backend).guard("lookup")(held)

    def call() -> None:
        barrier.wait()
        answers.append(holding(agent="ava")["status"])
        if len(answers) == CALLERS - 1:
            gate.set()  # everyone else has been answered: let the probe finish

    threads = [threading.Thread(target=call) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    gate.set()
    assert sorted(answers) == ["ok"] + ["probe_in_flight"] * (CALLERS - 1)
    assert backend.calls == 4
    assert engine.view(KEY).state == "closed"


async def test_twenty_tasks_through_a_half_open_breaker_nobody_watches_reach_it_once():
    engine, backend = unwatched(), Backend()
    harness = lookup_harness(engine, backend)
    backend.failing = 3
    for _ in range(3):
        await harness.call_tool("ava", "lookup")
    engine.clock.advance(30)
    gate = asyncio.Event()

    async def held(args: Any) -> dict[str, int]:
        await gate.wait()
        return backend.run()

    harness.register(Tool("held", backend="crm", function=held))
    calls = [asyncio.create_task(harness.call_tool("ava", "held")) for _ in range(CALLERS)]
    await asyncio.sleep(0)
    gate.set()
    answers = sorted(result["status"] for result in await asyncio.gather(*calls))
    assert answers == ["ok"] + ["probe_in_flight"] * (CALLERS - 1)
    assert backend.calls == 4
    assert engine.view(KEY).state == "closed"


async def test_a_quiet_first_attempt_cut_by_its_deadline_is_a_counted_timeout():
    engine, backend = unwatched(), Backend()
    harness = lookup_harness(engine, backend)
    await harness.call_tool("ava", "lookup")

    async def stuck(args: Any) -> None:
        await asyncio.sleep(60)

    harness.register(Tool("stuck", backend="crm", function=stuck, deadline_seconds=30))
    result = await harness.call_tool("ava", "stuck")
    assert result["status"] == "tool_error" and "timed out after 30 s" in result["reason"]
    assert engine.view(KEY).count == 1


async def test_a_quiet_call_cancelled_from_outside_records_nothing():
    engine, backend = unwatched(), Backend()
    harness = lookup_harness(engine, backend)
    await harness.call_tool("ava", "lookup")
    started = asyncio.Event()

    async def slow(args: Any) -> None:
        started.set()
        await asyncio.sleep(10)

    harness.register(Tool("slow", backend="crm", function=slow))
    task = asyncio.create_task(harness.call_tool("ava", "slow"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    await harness.call_tool("ava", "lookup")
    assert engine.view(KEY).count == 0
    assert [line.call_id for line in completed(lines)] == ["call-000002"]


async def test_a_quiet_call_failing_on_a_state_dir_is_audited_with_its_admission(tmp_path):
    engine = on_state_dir(tmp_path)
    backend = Backend()
    harness = lookup_harness(engine, backend, attempts=1)
    await harness.call_tool("ava", "lookup")
    backend.failing = 1
    await harness.call_tool("ava", "lookup")
    assert engine.audit is not None and engine.audit.flush(10)
    failed = [e for e in engine.audit.query() if e.type == ev.CALL_FAILED]
    engine.close()
    assert [(e.fields["call_id"], e.fields["admitted_t"]) for e in failed] == [("call-000002", 0.0)]


def test_a_healthy_guarded_call_on_a_state_dir_with_no_listener_takes_no_call_number(tmp_path):
    engine = on_state_dir(tmp_path)
    guard = engine.guard(KEY, agent="ava", lease=30)
    for _ in range(5):  # the first learns that the credential works: it takes its ticket
        with guard:
            pass
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    with guard:
        pass
    engine.close()
    assert [line.call_id for line in completed(lines)] == ["call-000002"]


def test_a_guarded_call_a_listener_joins_midway_writes_a_numbered_line(tmp_path):
    engine = on_state_dir(tmp_path)
    guard = engine.guard(KEY, agent="ava", lease=30)
    with guard:
        pass
    lines: list[ev.Event] = []
    with guard:
        engine.subscribe(lines.append)
    engine.close()
    assert [(line.call_id, line.admitted_t) for line in completed(lines)] == [("call-000002", 0.0)]
