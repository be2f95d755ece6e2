"""What the state dir promises: numbers never handed out twice, one process per dir, storage
failures that never reach a caller or wedge a breaker, and commits before a trip's call returns.

Disk trouble is real: SQLite's own page limit (`max_page_count`) stands in for a full disk, a
second connection holding the write lock for a disk that stalls, and processes are killed with
SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import COMMIT_WAIT, Engine
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy
from tests.engine.damage import damage_index

UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
KEY = "payments@default"


def call(engine: Engine, outcome: Outcome, key: str = KEY, agent: str = "ava"):
    """One call through admission to its outcome, as the harness makes it."""
    ticket = engine.enter(
        key=key, agent=agent, platform="payments", tool="charge", deadline_seconds=30
    )
    admission = engine.admit(ticket, lease=61)
    if not admission.allowed:
        return ticket, admission
    engine.complete(ticket, outcome, fault="x", agent_status="x")
    return ticket, admission


def trip(engine: Engine, key: str = KEY) -> None:
    for _ in range(3):
        call(engine, UPSTREAM, key)
    assert engine.view(key).state == "open"


def fill_disk(conn: sqlite3.Connection) -> None:
    """The file may not grow by another page: SQLite answers SQLITE_FULL, as on a full disk."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")


def free_disk(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA max_page_count = 1073741823")


def stored_state(state: Path, key: str) -> str | None:
    """The verdict on disk, read by another connection as the next process would."""
    conn = sqlite3.connect(state / "verdicts.sqlite3")
    try:
        row = conn.execute("SELECT data FROM verdicts WHERE key = ?", (key,)).fetchone()
    finally:
        conn.close()
    return None if row is None else json.loads(row[0])["state"]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


# -- numbers that never repeat ----------------------------------------------------------------

CHILD = """
import sys, time
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS
from breakerdeck.engine.policy import ToolPolicy

engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=sys.argv[1])
engine.subscribe(lambda event: None)  # so successes write lines, which are never audited
for _ in range(int(sys.argv[2])):
    call = engine.enter(key="k", agent="a", platform="p", tool="t", deadline_seconds=30)
    engine.admit(call, lease=61)
    engine.complete(call, SUCCESS, fault="ok", agent_status="ok")
print(call.call_id, engine.seq, flush=True)
time.sleep(60)
"""


def run_and_kill(state: Path, calls: int) -> tuple[str, int]:
    """A process that makes `calls` calls, says its last call id and seq, and is killed -9."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state), str(calls)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        last_call, last_seq = child.stdout.readline().split()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return last_call, int(last_seq)


def test_seqs_never_repeat_after_a_kill_9(state):
    _, last_seq = run_and_kill(state, 50)
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        seen = []
        engine.subscribe(seen.append)
        call(engine, UPSTREAM)
    assert seen and seen[0].seq > last_seq


def test_call_ids_never_restart_after_a_kill_9(state):
    last_call, _ = run_and_kill(state, 50)
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        ticket, _ = call(engine, SUCCESS)
    assert int(ticket.call_id.removeprefix("call-")) > int(last_call.removeprefix("call-"))


def test_a_planted_symlink_never_redirects_the_mark_file(state, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    state.mkdir(mode=0o700)
    (state / "mark.json").symlink_to(victim)
    (state / "mark.tmp").symlink_to(victim)

    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        call(engine, UPSTREAM)
        assert any("mark.json" in problem for problem in engine.problems)

    assert victim.read_text() == "precious"
    assert not (state / "mark.json").is_symlink()


# -- one process per state dir ---------------------------------------------------------------


def test_a_second_engine_on_the_same_state_dir_is_refused_naming_the_dir(state):
    with (
        Engine(ToolPolicy(), clock=ManualClock(), state_dir=state),
        pytest.raises(StateDirError, match="in use by another") as refused,
    ):
        Engine(ToolPolicy(), clock=ManualClock(), state_dir=state)
    assert str(state) in str(refused.value)
    assert f"pid {os.getpid()}" in str(refused.value)
    Engine(ToolPolicy(), clock=ManualClock(), state_dir=state).close()  # free once closed


def test_a_second_process_on_the_same_state_dir_is_refused(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state):
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys\n"
                "from breakerdeck.engine.engine import Engine\n"
                "from breakerdeck.engine.policy import ToolPolicy\n"
                "Engine(ToolPolicy(), state_dir=sys.argv[1])\n",
                str(state),
            ],
            capture_output=True,
            text=True,
        )
    assert other.returncode != 0
    assert "StateDirError" in other.stderr and str(state) in other.stderr


def test_a_state_dir_writable_by_others_is_refused(state):
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(StateDirError, match="writable by others"):
        Engine(ToolPolicy(), clock=ManualClock(), state_dir=state)


# -- storage failures never reach a caller -----------------------------------------------------


def test_a_read_only_store_at_the_probes_admission_neither_raises_nor_wedges_the_key(state):
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=state) as engine:
        trip(engine)
        engine.store._conn.execute("PRAGMA query_only = 1")  # SQLite refuses every write
        clock.advance(30)

        _, admission = call(engine, SUCCESS)  # the probe: half_open, then recovered

        assert admission.as_probe
        assert engine.view(KEY).state == "closed"
        assert any("readonly" in problem for problem in engine.problems)
        engine.poll()
        engine.store._conn.execute("PRAGMA query_only = 0")
        trip(engine)  # the key still takes calls, trips and records
        assert engine.store.flush()
        assert stored_state(state, KEY) == "open"


def test_a_full_disk_at_a_trip_is_reported_and_written_once_there_is_room(state):
    big = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused " * 1000)
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        engine.store.flush()
        fill_disk(engine.store._conn)
        for _ in range(3):
            call(engine, big, key="ledger@default")  # a verdict too big for the pages there

        assert engine.view("ledger@default").state == "open"
        assert any("full" in problem for problem in engine.problems)
        free_disk(engine.store._conn)
        assert engine.store.flush()
        assert stored_state(state, "ledger@default") == "open"


def test_problems_report_a_write_lost_after_start(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        assert engine.problems == []
        engine.audit.flush()
        fill_disk(engine.audit._conn)
        for _ in range(200):  # enough rows to need a new page
            call(engine, UPSTREAM, key="search@default")
        engine.audit.flush()

        assert any("could not record" in problem for problem in engine.problems)


def test_a_stalled_disk_holds_a_trips_call_about_a_second_and_lists_the_write(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        call(engine, UPSTREAM)
        call(engine, UPSTREAM)
        holder = sqlite3.connect(state / "verdicts.sqlite3", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            started = time.monotonic()
            call(engine, UPSTREAM)  # the trip
            waited = time.monotonic() - started
        finally:
            holder.execute("ROLLBACK")
            holder.close()

        assert engine.view(KEY).state == "open"
        assert waited >= COMMIT_WAIT  # and it returned, though the disk never answered
        assert any(
            "circuit_breaker.tripped" in problem and "not on disk" in problem
            for problem in engine.problems
        )
        assert engine.store.flush(timeout=10)
        assert stored_state(state, KEY) == "open"  # written when the disk allowed


async def test_a_coroutine_waiting_for_its_trips_commit_leaves_the_event_loop_to_others(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        call(engine, UPSTREAM)
        call(engine, UPSTREAM)
        finished: list[str] = []

        async def one_call(key: str) -> None:
            ticket = engine.enter(key, "ava", "payments", "charge", 30)
            await engine.admit_async(ticket, 61)
            await engine.complete_async(ticket, UPSTREAM, "x", "x")
            finished.append(key)

        holder = sqlite3.connect(state / "verdicts.sqlite3", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            # The trip starts first and waits for a disk that does not answer; the other
            # coroutine's call (a counted failure, nothing to wait for) goes on meanwhile.
            await asyncio.gather(one_call(KEY), one_call("search@default"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()

        assert finished == ["search@default", KEY]
        assert engine.view(KEY).state == "open"


def test_no_other_call_waits_while_a_trip_waits_for_its_commit(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        call(engine, UPSTREAM)
        call(engine, UPSTREAM)
        call(engine, SUCCESS, key="search@default")
        holder = sqlite3.connect(state / "verdicts.sqlite3", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        tripped = threading.Event()
        overlapped: list[bool] = []

        def other_calls() -> None:
            time.sleep(0.2)  # the trip below is waiting by now
            for outcome in (UPSTREAM, SUCCESS, UPSTREAM):
                call(engine, outcome, key="search@default")
            overlapped.append(not tripped.is_set())  # all three ran while the trip waited

        worker = threading.Thread(target=other_calls)
        worker.start()
        try:
            call(engine, UPSTREAM)  # the trip, held up by the stalled disk
            tripped.set()
        finally:
            worker.join()
            holder.execute("ROLLBACK")
            holder.close()

    # All three done before the trip's call returned: none of them waited for its commit.
    assert overlapped == [True], "the other calls ran after the trip: nothing was tested"


def test_a_new_keys_first_success_never_waits_for_the_disk(state):
    """When a credential last worked is kept as counters are (DESIGN, "Durability"): within a
    second, never waited for. A disk that stalls holds no first call on a new key."""
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        engine.store.flush(timeout=10)
        holder = sqlite3.connect(state / "verdicts.sqlite3", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            call(engine, SUCCESS)  # the credential works: learnt now
            waited = [problem for problem in engine.problems if "not on disk" in problem]
        finally:
            holder.execute("ROLLBACK")
            holder.close()

        assert waited == []
        assert engine.credential_worked(KEY)
        assert engine.store.flush(timeout=10)
    conn = sqlite3.connect(state / "verdicts.sqlite3")
    try:
        (data,) = conn.execute("SELECT data FROM verdicts WHERE key = ?", (KEY,)).fetchone()
    finally:
        conn.close()
    assert json.loads(data)["credential_ok_at"] is not None


def test_a_trip_is_on_disk_when_its_call_returns(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        trip(engine)
        assert stored_state(state, KEY) == "open"
        trips = sqlite3.connect(state / "audit.sqlite3").execute(
            "SELECT COUNT(*) FROM events WHERE type = ?", (ev.TRIPPED,)
        )
        assert trips.fetchone() == (1,)


def test_a_reset_is_on_disk_when_it_is_answered(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        trip(engine)
        engine.reset(KEY, actor="alice", reason="vendor fixed")
        assert stored_state(state, KEY) == "closed"
        conn = sqlite3.connect(state / "audit.sqlite3")
        (actor,) = conn.execute(
            "SELECT json_extract(fields, '$.actor') FROM events WHERE type = ?", (ev.RESET,)
        ).fetchone()
        assert actor == "alice"


# -- the audit queue -----------------------------------------------------------------------------


def test_a_refusal_flood_against_a_stalled_disk_keeps_the_queue_bounded(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        trip(engine)
        engine.audit.flush()
        holder = sqlite3.connect(state / "audit.sqlite3", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        limit = engine.audit.queue_limit
        longest = 0
        try:
            for _ in range(limit + 5_000):
                _, admission = call(engine, UPSTREAM)
                assert not admission.allowed
                longest = max(longest, engine.audit.queued)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert longest <= limit + 1
        assert any("queue was full" in problem for problem in engine.problems)
        dropped = next(p for p in engine.problems if "queue was full" in p)
        assert int(dropped.split(": ")[1].split()[0]) >= 5_000 - 500  # less one writer batch


# -- numbers from the store -----------------------------------------------------------------------


def plant_verdict(state: Path, key: str, **fields: object) -> None:
    """Write a verdict row as a damaged or hostile store would hold it."""
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=state) as engine:
        trip(engine, key)
    conn = sqlite3.connect(state / "verdicts.sqlite3")
    (data,) = conn.execute("SELECT data FROM verdicts WHERE key = ?", (key,)).fetchone()
    changed = json.loads(data) | fields
    with conn:
        conn.execute("UPDATE verdicts SET data = ? WHERE key = ?", (json.dumps(changed), key))
    conn.close()


@pytest.mark.parametrize("cooldown", [math.inf, math.nan, -5.0, 10 * 86_400.0])
def test_a_stored_cooldown_out_of_bounds_never_holds_a_key_open_for_long(state, cooldown):
    plant_verdict(state, KEY, cooldown=cooldown)
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=state) as engine:
        (restored,) = engine.restore()
        json.dumps(restored.fields, allow_nan=False)  # the trace never gets a bare NaN
        view = engine.view(KEY)
        assert view.reopens_at is not None
        assert view.reopens_at - clock.wall() <= engine.policy.longest_cooldown()
        assert any("out of range" in problem for problem in engine.problems)


@pytest.mark.parametrize("field", ["opened_at", "last_failure_at"])
def test_a_stored_time_that_is_not_finite_is_read_as_unknown(state, field):
    plant_verdict(state, KEY, **{field: math.nan})
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        (restored,) = engine.restore()
        json.dumps(restored.fields, allow_nan=False)
        assert engine.view(KEY).reopens_at is not None


def test_a_verdict_saved_with_the_clock_an_hour_ahead_opens_for_its_cooldown_only(state):
    ahead = ManualClock()
    ahead.advance(3600)
    with Engine(ToolPolicy(), clock=ahead, state_dir=state) as engine:
        trip(engine)
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=state) as engine:
        engine.restore()
        view = engine.view(KEY)
        assert view.reopens_at is not None
        assert view.reopens_at - clock.wall() <= view.cooldown == 30


def test_a_verdict_store_replaced_after_damage_gets_every_key_again(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        for i in range(40):
            trip(engine, f"backend-{i}@default")
        damage_index(state / "verdicts.sqlite3")

        engine.reset("backend-7@default", actor="alice", reason="fixed")  # meets the damage

        assert engine.store.flush(timeout=5)
        assert stored_state(state, "backend-7@default") == "closed"
        assert all(stored_state(state, f"backend-{i}@default") == "open" for i in (0, 20, 39))
    assert (state / "verdicts.sqlite3.corrupt-1").exists()


def test_an_engine_starts_on_an_audit_log_damaged_under_its_seq_lookup(state):
    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        for i in range(500):
            trip(engine, f"backend-{i}@default")
        last_seq = engine.seq
    damage_index(state / "audit.sqlite3", "events_seq", size=8192)

    with Engine(ToolPolicy(), clock=ManualClock(), state_dir=state) as engine:
        assert any("moved to" in problem for problem in engine.problems)
        assert engine.seq >= last_seq  # the mark still knows where the numbers were
        trip(engine)
    assert (state / "audit.sqlite3.corrupt-1").exists()
