"""`Engine.guard` takes a ticket and writes a line only when someone reads it (issue 18)."""

import threading
from pathlib import Path

from breakerdeck.engine import Engine, ManualClock, ToolPolicy
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.entries import Entries

KEY = "search@default"


def _engine(state_dir: Path | None = None) -> Engine:
    return Engine(ToolPolicy(), clock=ManualClock(), state_dir=state_dir)


def _succeed(engine: Engine, times: int = 1) -> None:
    guard = engine.guard(KEY, agent="planner", lease=61)
    for _ in range(times):
        with guard:
            pass


def _fail(engine: Engine) -> None:
    guard = engine.guard(KEY, agent="planner", lease=61)
    try:
        with guard:
            raise ConnectionError("connection refused")
    except ConnectionError:
        pass


def _call_ids(lines: list[Event]) -> list[str]:
    return [line.fields["call_id"] for line in lines if line.type == ev.CALL_COMPLETED]


def test_healthy_calls_nobody_reads_take_no_call_number() -> None:
    engine = _engine()
    _succeed(engine)  # the first success learns that the credential works: it is recorded
    _succeed(engine, times=5)
    lines: list[Event] = []
    engine.subscribe(lines.append)
    _succeed(engine)
    assert _call_ids(lines) == ["call-000002"]


def test_a_failure_with_nobody_reading_is_counted_all_the_same() -> None:
    engine = _engine()
    _succeed(engine)
    _fail(engine)
    assert engine.view(KEY).count == 1


def test_a_success_after_an_unread_failure_clears_its_count() -> None:
    engine = _engine()
    _succeed(engine)
    _fail(engine)
    _succeed(engine)
    assert engine.view(KEY).count == 0


def test_with_a_listener_every_guarded_call_has_its_line_in_admission_order() -> None:
    engine = _engine()
    lines: list[Event] = []
    engine.subscribe(lines.append)
    _succeed(engine, times=3)
    assert _call_ids(lines) == ["call-000001", "call-000002", "call-000003"]
    assert all(line.fields["admitted_as"] == "normal" for line in lines)


def test_the_audit_log_keeps_an_unwatched_guarded_failure(tmp_path: Path) -> None:
    with _engine(tmp_path / "state") as engine:
        _succeed(engine)
        _fail(engine)
        assert engine.audit is not None
        kept = engine.audit.query(key=KEY)
    assert [row.type for row in kept] == [ev.CALL_FAILED]


def test_nested_entries_of_one_guard_each_complete_their_own_call() -> None:
    engine = _engine()
    lines: list[Event] = []
    engine.subscribe(lines.append)
    guard = engine.guard(KEY, agent="planner", lease=61)
    with guard:
        with guard:
            pass
        assert len(_call_ids(lines)) == 1
    assert _call_ids(lines) == ["call-000002", "call-000001"]


def test_eight_threads_on_their_own_keys_see_seqs_gap_free_and_in_order() -> None:
    engine = _engine()
    seqs: list[int] = []
    engine.subscribe(lambda event: seqs.append(event.seq))

    def calls(n: int) -> None:
        guard = engine.guard(f"backend-{n}@default", agent="planner", lease=61)
        for _ in range(300):
            with guard:
                pass

    threads = [threading.Thread(target=calls, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seqs == list(range(1, 8 * 300 + 1))
    assert engine.seq == 8 * 300


def _entries_taken(monkeypatch) -> list[str]:
    """The key of every entry `Engine.guard` takes from now on."""
    entries: list[str] = []
    taking = Entries.entry

    def counted(self: Entries, key: str, *rest: object) -> Call:
        entries.append(key)
        return taking(self, key, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(Entries, "entry", counted)
    return entries


def test_a_healthy_guarded_call_on_a_state_dir_takes_no_entry(tmp_path: Path, monkeypatch) -> None:
    entries = _entries_taken(monkeypatch)
    with _engine(tmp_path / "state") as engine:
        _succeed(engine)  # learns that the credential works
        _succeed(engine, times=5)
    assert entries == []


def test_an_outer_guarded_failure_on_a_state_dir_is_audited_with_its_own_admission(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state") as engine:
        _succeed(engine)
        guard = engine.guard(KEY, agent="planner", lease=61)
        try:
            with guard:
                clock.advance(5)
                with guard:
                    clock.advance(5)
                raise ConnectionError("connection refused")
        except ConnectionError:
            pass
        assert engine.audit is not None and engine.audit.flush(10)
        failed = [row for row in engine.audit.query(key=KEY) if row.type == ev.CALL_FAILED]
    assert [row.fields["admitted_t"] for row in failed] == [0.0]


def test_a_watched_healthy_guarded_call_takes_no_entry(monkeypatch) -> None:
    entries = _entries_taken(monkeypatch)
    engine = _engine()
    engine.subscribe(lambda event: None)
    _succeed(engine, times=3)
    assert entries == []


def test_a_watched_guarded_failure_keeps_the_number_it_drew_on_the_way_in() -> None:
    engine = _engine()
    lines: list[Event] = []
    engine.subscribe(lines.append)
    guard = engine.guard(KEY, agent="planner", lease=61)
    try:
        with guard:
            with guard:
                pass
            raise ConnectionError("connection refused")
    except ConnectionError:
        pass
    completed = [line for line in lines if line.type == ev.CALL_COMPLETED]
    assert [(line.fields["call_id"], line.fields["counted"]) for line in completed] == [
        ("call-000002", False),
        ("call-000001", True),
    ]


def test_a_watched_success_after_a_failure_counted_during_it_clears_the_count() -> None:
    engine = _engine()
    lines: list[Event] = []
    engine.subscribe(lines.append)
    _succeed(engine)  # learns that the credential works
    guard = engine.guard(KEY, agent="planner", lease=61)
    with guard:
        _fail(engine)
        assert engine.view(KEY).count == 1
    assert engine.view(KEY).count == 0
    assert _call_ids(lines) == ["call-000001", "call-000003", "call-000002"]


def test_a_listener_that_comes_during_a_quiet_call_reads_its_line() -> None:
    engine = _engine()
    _succeed(engine)  # learns that the credential works
    lines: list[Event] = []
    with engine.guard(KEY, agent="planner", lease=61):
        engine.subscribe(lines.append)
    assert _call_ids(lines) == ["call-000002"]  # the first, learning the credential, drew 1
