from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from breakerdeck.engine import events
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.events import Event
from breakerdeck.engine.storage.audit import PRUNE_EVERY, AuditLog
from tests.engine.damage import damage_index

DAY = 86400.0
START = ManualClock().wall()


def open_log(path: Path, clock: ManualClock | None = None, **kwargs: float) -> AuditLog:
    """Every log reads a manual clock, so retention never depends on today's date."""
    return AuditLog(path, wall=(clock or ManualClock()).wall, **kwargs)


def event(
    seq: int,
    *,
    key: str = "tool:search",
    agent: str | None = "agent-1",
    type: str = events.CALL_FAILED,
    wall: float = START,
    **fields: object,
) -> Event:
    return Event(seq, type, key, agent, wall, dict(fields))


def seqs(found: list[Event]) -> list[int]:
    return [e.seq for e in found]


def test_appended_event_reads_back_equal_with_field_order_kept(tmp_path: Path) -> None:
    original = event(1, zeta=1, alpha={"nested": [1, 2.5, None]}, mid="x", flag=True)
    with open_log(tmp_path / "audit.db") as log:
        log.append(original)
        [back] = log.query()
    assert back == original
    assert list(back.fields) == ["zeta", "alpha", "mid", "flag"]


def test_query_by_agent_is_newest_first_and_limited(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        for seq in range(1, 11):
            log.append(event(seq, agent="a" if seq % 2 else "b"))
        assert seqs(log.query(agent="a", limit=3)) == [9, 7, 5]


def test_query_by_key_is_newest_first(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        for seq in range(1, 7):
            log.append(event(seq, key="k1" if seq in (1, 4, 6) else "k2"))
        assert seqs(log.query(key="k1")) == [6, 4, 1]


def test_query_by_types_with_limit(tmp_path: Path) -> None:
    kinds = [
        events.CALL_FAILED,
        events.TRIPPED,
        events.CALL_DENIED,
        events.HALF_OPEN,
        events.TRIPPED,
        events.CALL_FAILED,
    ]
    with open_log(tmp_path / "audit.db") as log:
        for seq, kind in enumerate(kinds, start=1):
            log.append(event(seq, type=kind))
        assert seqs(log.query(types={events.TRIPPED, events.CALL_FAILED}, limit=3)) == [6, 5, 2]
        assert seqs(log.query(types=events.HALF_OPEN)) == [4]
        assert log.query(types=[]) == []


def test_before_seq_pages_backwards(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        for seq in range(1, 8):
            log.append(event(seq))
        first = log.query(limit=3)
        second = log.query(before_seq=first[-1].seq, limit=3)
        assert seqs(first) + seqs(second) == [7, 6, 5, 4, 3, 2]


def test_what_happened_before_a_trip_for_one_key(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        log.append(event(1, key="k"))
        log.append(event(2, key="other"))
        log.append(event(3, key="k"))
        log.append(event(4, key="k", type=events.TRIPPED))
        trip = log.query(key="k", types=[events.TRIPPED])[0]
        assert seqs(log.query(key="k", before_seq=trip.seq)) == [3, 1]


def test_events_survive_close_and_reopen_and_numbering_continues(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with open_log(path) as log:
        log.append(event(1, wall=START - 20))
        log.append(event(2, wall=START - 10))
    with open_log(path) as log:
        assert log.max_seq() == 2
        assert log.newest_wall() == START - 10
        assert seqs(log.query()) == [2, 1]


def test_empty_log_has_seq_zero_and_no_newest_wall(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        assert log.max_seq() == 0
        assert log.newest_wall() is None


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    threads_n, per_thread = 8, 500
    with open_log(tmp_path / "audit.db") as log:

        def append_many(thread: int) -> None:
            for i in range(per_thread):
                log.append(event(thread * per_thread + i + 1, agent=f"agent-{thread}"))

        threads = [threading.Thread(target=append_many, args=(n,)) for n in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        found = log.query(limit=threads_n * per_thread + 1)
    assert sorted(seqs(found)) == list(range(1, threads_n * per_thread + 1))


def test_flush_commits_so_another_connection_sees_the_writes(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with open_log(path) as log:
        for seq in range(1, 101):
            log.append(event(seq))
        log.flush()
        reader = sqlite3.connect(path)
        try:
            assert reader.execute("SELECT COUNT(*) FROM events").fetchone() == (100,)
        finally:
            reader.close()


def test_close_commits_what_is_still_queued(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    log = open_log(path)
    for seq in range(1, 51):
        log.append(event(seq))
    log.close()
    log.close()
    with open_log(path) as reopened:
        assert reopened.max_seq() == 50


def test_append_after_close_raises(tmp_path: Path) -> None:
    log = open_log(tmp_path / "audit.db")
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append(event(1))


def test_fields_are_recorded_as_they_were_at_append(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        original = event(1, count=1)
        log.append(original)
        original.fields["count"] = 99
        assert log.query()[0].fields == {"count": 1}


def test_retention_at_open_deletes_only_rows_older_than_the_limit(tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "audit.db"
    with open_log(path, clock) as log:
        log.append(event(1, wall=clock.wall()))
        log.append(event(2, wall=clock.wall() + 10 * DAY))
    clock.advance(35 * DAY)
    with open_log(path, clock) as log:
        assert seqs(log.query()) == [2]


def test_writer_sweeps_old_rows_at_most_once_a_minute(tmp_path: Path) -> None:
    clock = ManualClock()
    with open_log(tmp_path / "audit.db", clock, retention_seconds=DAY) as log:
        log.append(event(1, wall=clock.wall() - 2 * DAY))  # already past retention
        log.append(event(2, wall=clock.wall()))
        clock.advance(PRUNE_EVERY - 1)
        log.append(event(3, wall=clock.wall()))
        assert seqs(log.query()) == [3, 2, 1]
        clock.advance(1)
        log.append(event(4, wall=clock.wall()))
        assert seqs(log.query()) == [4, 3, 2]


def test_garbage_file_is_reported_moved_aside_and_a_fresh_log_starts(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    garbage = b"\x00garbage, not sqlite\xff" * 300
    path.write_bytes(garbage)
    with open_log(path) as log:
        [problem] = log.problems
        assert str(path) in problem
        assert "not a database" in problem
        log.append(event(1))
        assert seqs(log.query()) == [1]
    assert (tmp_path / "audit.db.corrupt-1").read_bytes() == garbage


def test_set_aside_name_takes_the_next_free_number(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    (tmp_path / "audit.db.corrupt-1").write_bytes(b"an earlier casualty")
    path.write_bytes(b"garbage" * 100)
    with open_log(path) as log:
        assert "audit.db.corrupt-2" in log.problems[0]
    assert (tmp_path / "audit.db.corrupt-2").read_bytes() == b"garbage" * 100


def test_database_of_another_shape_is_set_aside_not_mixed_in(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE events (id INTEGER, body TEXT)")
    other.commit()
    other.close()
    with open_log(path) as log:
        assert len(log.problems) == 1
        log.append(event(1))
        assert seqs(log.query()) == [1]
    assert (tmp_path / "audit.db.corrupt-1").exists()


def test_failed_write_is_reported_and_flush_still_returns(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with open_log(path) as log:
        other = sqlite3.connect(path)
        other.execute("DROP TABLE events")
        other.commit()
        other.close()
        log.append(event(1))
        log.flush()
        assert any("no such table" in problem for problem in log.problems)
        assert any("could not record 1 event(s)" in problem for problem in log.problems)


def test_damaged_pages_under_the_seq_lookup_are_moved_aside_at_open(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with open_log(path) as log:
        for seq in range(1, 3001):
            log.append(event(seq, note="x" * 40))
    damage_index(path, "events_seq", size=8192)

    with open_log(path) as log:
        assert log.max_seq() == 0
        [problem] = log.problems
        assert "moved to" in problem
        log.append(event(1))
        assert seqs(log.query()) == [1]
    assert (tmp_path / "audit.db.corrupt-1").exists()


def test_a_field_json_cannot_hold_costs_its_event_only_and_is_reported(tmp_path: Path) -> None:
    with open_log(tmp_path / "audit.db") as log:
        log.append(event(1))
        log.append(event(2, when=object()))  # the call path does not encode, so this returns
        log.append(event(3, ratio=float("nan")))
        log.append(event(4))
        assert seqs(log.query()) == [4, 1]
        assert any("could not encode 2 event(s)" in problem for problem in log.problems)


def test_a_full_queue_drops_and_counts_instead_of_growing(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with open_log(path, queue_limit=100) as log:
        log.append(event(1))
        log.flush()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # the writer stalls, as on a slow disk
        try:
            for seq in range(2, 1002):
                log.append(event(seq))
                assert log.queued <= 100
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        kept = len(log.query(limit=2000))
    dropped = next(p for p in log.problems if "queue was full" in p)
    assert kept + int(dropped.split(": ")[1].split()[0]) == 1001


def test_damage_found_by_a_write_mid_run_sets_the_file_aside_for_a_fresh_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with open_log(path) as log:
        for seq in range(1, 3001):
            log.append(event(seq, note="x" * 40))
        log.flush()
        damage_index(path, "events_seq", size=8192)
        log.append(event(3001))  # this batch meets the damage and is lost
        log.flush()

        log.append(event(3002))

        assert seqs(log.query()) == [3002]
        assert any("moved to" in problem for problem in log.problems)
        assert any("could not record 1 event(s)" in problem for problem in log.problems)
    assert (tmp_path / "audit.db.corrupt-1").exists()


def test_a_log_that_cannot_be_read_answers_nothing_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    with open_log(path) as log:
        log.append(event(1))
        log.flush()
        with sqlite3.connect(path) as other:
            other.execute("DROP TABLE events")
        assert log.query() == []
        assert log.max_seq() == 0
        assert log.newest_wall() is None
        said = f"The audit log {path} could not be read (no such table: events)."
        assert said in "\n".join(log.problems)
