"""`Engine.guard` on a state dir, restored as docs/engine.md sets it up, with no listener: the
audit log alone reads its lines. A quiet entry keeps its admission for the row of a failure;
a refusal in the cooldown takes no entry yet is audited once, in seq order (issue 31). A
harness's refusal goes the same way (`Lines.refused`), under its entry's own number."""

import asyncio
import contextvars
import threading
from pathlib import Path

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.parts.guard import BreakerOpen, Guard
from breakerdeck.engine.policy import ToolPolicy

KEY = "search@default"


def _engine(tmp_path: Path, clock: ManualClock | None = None) -> Engine:
    engine = Engine(ToolPolicy(), clock=clock or ManualClock(), state_dir=tmp_path / "state")
    engine.restore()
    return engine


def _guard(engine: Engine) -> Guard:
    return engine.guard(KEY, agent="planner", lease=61)


def _fail(guard: Guard) -> None:
    try:
        with guard:
            raise ConnectionError("connection refused")
    except ConnectionError:
        pass


def _refused(guard: Guard) -> bool:
    try:
        with guard:
            return False
    except BreakerOpen:
        return True


def _audited(engine: Engine) -> list[Event]:
    """The audit log's rows, oldest first."""
    assert engine.audit is not None and engine.audit.flush(10)
    return list(reversed(engine.audit.query(limit=1000)))


def _failed(engine: Engine) -> list[Event]:
    return [row for row in _audited(engine) if row.type == ev.CALL_FAILED]


def _warm(engine: Engine) -> Guard:
    """The key's guard, after a first success that learns its credential works."""
    guard = _guard(engine)
    with guard:
        pass
    return guard


def _tripped(tmp_path: Path) -> tuple[Engine, Guard]:
    engine = _engine(tmp_path)
    guard = _warm(engine)
    for _ in range(3):
        _fail(guard)
    return engine, guard


def test_a_failure_after_a_quiet_entry_is_audited_with_its_admission(tmp_path: Path) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        guard = _warm(engine)
        seq = engine.seq
        with pytest.raises(ConnectionError), guard:
            clock.advance(7)
            raise ConnectionError("connection refused")
        failed = _failed(engine)
    assert [(row.fields["admitted_t"], row.fields["admitted_seq"]) for row in failed] == [
        (0.0, seq)
    ]


def test_the_quiet_entries_of_one_context_follow_one_another(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        guard = _guard(engine)
        for _ in range(3):
            with guard:
                pass
        _fail(guard)
        _fail(guard)
        failed = _failed(engine)
    assert [row.fields["call_id"] for row in failed] == ["call-000002", "call-000003"]


def test_a_refusal_takes_no_entry_yet_is_audited_once_after_the_trip(tmp_path: Path) -> None:
    engine, guard = _tripped(tmp_path)
    with engine:
        assert _refused(guard)
        rows = _audited(engine)
    assert [row.type for row in rows[-2:]] == [ev.TRIPPED, ev.CALL_DENIED]
    assert rows[-1].seq == rows[-2].seq + 1 == engine.seq


def test_a_refusal_row_says_what_the_breaker_said(tmp_path: Path) -> None:
    engine, guard = _tripped(tmp_path)
    with engine:
        assert _refused(guard)
        denied = _audited(engine)[-1]
    assert (denied.agent, denied.fields["call_id"], denied.fields["platform"]) == (
        "planner",
        "call-000005",
        "search",
    )
    assert (denied.fields["reason"], denied.fields["retry_after_seconds"]) == (
        "circuit_breaker_open",
        30.0,
    )


def test_refusals_are_counted_by_reason(tmp_path: Path) -> None:
    engine, guard = _tripped(tmp_path)
    with engine:
        for _ in range(4):
            assert _refused(guard)
        [(_, denied, _)] = engine.tallies()
    assert denied == {"circuit_breaker_open": 4}


def test_a_refusal_with_a_listener_is_the_breakers_line(tmp_path: Path) -> None:
    engine, guard = _tripped(tmp_path)
    lines: list[Event] = []
    engine.subscribe(lines.append)
    with engine:
        assert _refused(guard)
        audited = _audited(engine)[-1]
    assert [line.type for line in lines] == [ev.CALL_DENIED]
    assert (audited.seq, audited.fields) == (lines[0].seq, lines[0].fields)


def test_refusals_from_eight_threads_are_audited_gap_free(tmp_path: Path) -> None:
    engine, guard = _tripped(tmp_path)

    def refuse() -> None:
        for _ in range(50):
            assert _refused(guard)

    threads = [threading.Thread(target=refuse) for _ in range(8)]
    with engine:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rows = _audited(engine)
    tripped = next(row.seq for row in rows if row.type == ev.TRIPPED)
    denied = [row.seq for row in rows if row.type == ev.CALL_DENIED]
    assert denied == list(range(tripped + 1, tripped + 1 + 8 * 50))


async def test_a_task_started_inside_a_quiet_entry_completes_its_own_call(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        guard = _warm(engine)
        inside = asyncio.Event()

        async def child() -> None:
            async with guard:
                inside.set()
                await asyncio.sleep(0)
            _fail(guard)

        with pytest.raises(ConnectionError):
            async with guard:
                task = asyncio.create_task(child())
                await inside.wait()
                clock.advance(3)
                raise ConnectionError("connection refused")
        await task
        admitted = sorted(row.fields["admitted_t"] for row in _failed(engine))
    assert admitted == [0.0, 3.0]


def test_a_thread_sharing_a_quiet_entrys_context_completes_its_own_call(tmp_path: Path) -> None:
    clock = ManualClock()
    with _engine(tmp_path, clock) as engine:
        guard = _warm(engine)
        with pytest.raises(ConnectionError), guard:
            shared = contextvars.copy_context()
            clock.advance(3)
            worker = threading.Thread(target=shared.run, args=(_fail, guard))
            worker.start()
            worker.join()
            raise ConnectionError("connection refused")
        admitted = sorted(row.fields["admitted_t"] for row in _failed(engine))
    assert admitted == [0.0, 3.0]


async def test_a_harness_refusal_is_audited_once_under_its_entrys_number(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    harness = Harness(engine)

    async def down(args: object = None) -> None:
        raise ConnectionError("connection refused")

    harness.register(Tool("lookup", backend="search", attempts=1, function=down))
    with engine:
        for _ in range(ToolPolicy().failure_threshold):
            await harness.call_tool("planner", "lookup")
        answer = await harness.call_tool("planner", "lookup")
        rows = _audited(engine)
    assert answer["status"] == "circuit_open"
    assert [row.type for row in rows[-2:]] == [ev.TRIPPED, ev.CALL_DENIED]
    failed_ids = [row.fields["call_id"] for row in rows if row.type == ev.CALL_FAILED]
    assert rows[-1].fields["call_id"] == "call-000004" and "call-000004" not in failed_ids
