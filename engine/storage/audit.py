"""The append-only audit log: what happened, per agent and per key, across restarts.

Appending sits on the call path, so it only queues the event as it is; one writer thread owns
the disk, encodes the JSON and commits whatever has piled up in a single transaction, which
keeps a burst of failures from turning into a burst of fsyncs. The queue is bounded: when it is
full, or the disk fails, events are dropped and counted in `problems`, and the caller never
waits. Reads flush first, so a caller always sees its own writes.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from json.encoder import encode_basestring_ascii as _string
from pathlib import Path
from typing import Any

from breakerdeck.engine.events import CALL_DENIED, CallDenied, Event, decoded
from breakerdeck.engine.storage.store import (
    Problems,
    SqliteFile,
    check_integrity,
    is_damage,
    open_sqlite,
)

logger = logging.getLogger(__name__)

PRUNE_EVERY = 60.0
"""Wall-clock seconds between retention sweeps: often enough, without a DELETE per batch."""

QUEUE_LIMIT = 50_000
"""Events waiting for the writer at most (about 15 MB): a refusal flood faster than the disk
drops the excess instead of growing the process."""

_BATCH = 500
_STOP = object()
_Item = tuple[int, str, str, str | None, float, dict[str, Any]]
#: A `call.denied` as its line holds it: seq, key, agent, wall, call number, platform,
#: reason, retry-after; its fields are encoded on the writer thread (`denied_fields`).
_Denied = tuple[int, str, str | None, float, int, str, str | None, float]
_Row = tuple[int, str, str, str | None, float, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    key TEXT NOT NULL,
    agent TEXT,
    wall REAL NOT NULL,
    fields TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_seq ON events (seq);
CREATE INDEX IF NOT EXISTS events_agent ON events (agent, seq);
CREATE INDEX IF NOT EXISTS events_key ON events (key, seq);
CREATE INDEX IF NOT EXISTS events_type ON events (type, seq);
CREATE INDEX IF NOT EXISTS events_wall ON events (wall);
"""
# seq is deliberately not unique: should two runs ever hand out the same number, both lines are
# history worth keeping, and a constraint would throw away the whole batch instead.

_COLUMNS = "seq, type, key, agent, wall, fields"

_DROPPED_FULL = "The audit log {path} write queue was full: {{n}} event(s) dropped."
_DROPPED_DISK = "The audit log {path} could not record {{n}} event(s); they are lost."
_DROPPED_JSON = "The audit log {path} could not encode {{n}} event(s) as JSON; they are lost."


def _prepare(conn: sqlite3.Connection, cutoff: float) -> None:
    conn.executescript(_SCHEMA)
    # A damaged page anywhere would otherwise stop a later lookup or write; a database of some
    # other shape fails the SELECT. Either way the file is set aside, not mixed in.
    check_integrity(conn)
    conn.execute(f"SELECT {_COLUMNS} FROM events LIMIT 1").fetchall()
    with conn:
        conn.execute("DELETE FROM events WHERE wall < ?", (cutoff,))


class AuditLog(SqliteFile):
    """Events in SQLite (WAL), newest first on query, older than the retention dropped."""

    noun = "audit log"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention_seconds: float = 30 * 86400,
        wall: Callable[[], float] = time.time,
        queue_limit: int = QUEUE_LIMIT,
    ) -> None:
        if not retention_seconds > 0:
            raise ValueError(f"retention must be positive, not {retention_seconds} s")
        self.path = Path(path)
        self._retention = retention_seconds
        self._wall = wall
        self._pruned_at = wall()
        self.queue_limit = queue_limit
        self._dropped_full = _DROPPED_FULL.format(path=self.path)
        self._conn, found = self._open()
        self._problems = Problems(found)
        self._db_lock = threading.Lock()
        # Guards `_closed` together with the queue, so nothing can be queued behind the stop.
        self._state_lock = threading.Lock()
        self._closed = False
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()  # rows, flushes, the stop
        self._start_writer(self._run, "audit-writer")

    @property
    def queued(self) -> int:
        """Events (and flush marks) waiting for the writer: never much above the limit."""
        return self._queue.qsize()

    def append(self, event: Event) -> None:
        """Queue one event, or count it dropped when the queue is full; never blocks.

        The fields are copied now, so later changes to the caller's dict do not rewrite
        history; encoding waits for the writer thread."""
        if self._queue.qsize() >= self.queue_limit:
            self._problems.tally(self._dropped_full, 1)
            return
        item = (event.seq, event.type, event.key, event.agent, event.wall, dict(event.fields))
        with self._state_lock:
            if self._closed:
                raise RuntimeError(f"the audit log {self.path} is closed")
            self._queue.put(item)

    def append_denied(self, event: CallDenied) -> None:
        """`append` for a `call.denied` (a refusal flood's one line each): its parts queued as
        they are, its fields encoded by the writer (`denied_fields`), so the refused caller
        builds no dict."""
        if self._queue.qsize() >= self.queue_limit:
            self._problems.tally(self._dropped_full, 1)
            return
        item = (
            event.seq,
            event.key,
            event.agent,
            event.wall,
            event.call_number,
            event.platform,
            event.reason,
            event.retry_after_seconds,
        )
        with self._state_lock:
            if self._closed:
                raise RuntimeError(f"the audit log {self.path} is closed")
            self._queue.put(item)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything appended before this call is committed (or reported lost):
        those rows are then acknowledged. False if `timeout` seconds passed first."""
        done = threading.Event()
        with self._state_lock:
            if self._closed:
                return True
            self._queue.put(done)
        return done.wait(timeout)

    def query(
        self,
        *,
        agent: str | None = None,
        key: str | None = None,
        types: Collection[str] | None = None,
        before_seq: int | None = None,
        limit: int = 200,
    ) -> list[Event]:
        """Newest first. `before_seq` pages backwards: pass the last seq of the previous page.
        A bare string for `types` means that one type, not its letters. A log that cannot be
        read answers nothing, and says why in `problems`."""
        if limit < 0:
            raise ValueError(f"limit must not be negative, not {limit}")
        clauses: list[str] = []
        params: list[object] = []
        if agent is not None:
            clauses.append("agent = ?")
            params.append(agent)
        if key is not None:
            clauses.append("key = ?")
            params.append(key)
        if types is not None:
            names = [types] if isinstance(types, str) else list(types)
            clauses.append(f"type IN ({', '.join('?' * len(names))})")
            params.extend(names)
        if before_seq is not None:
            clauses.append("seq < ?")
            params.append(before_seq)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT {_COLUMNS} FROM events {where} ORDER BY seq DESC, rowid DESC LIMIT ?"
        rows = self._read(sql, (*params, limit))
        return [
            decoded(seq, type_, key_, agent_, wall, json.loads(fields))
            for seq, type_, key_, agent_, wall, fields in rows
        ]

    def max_seq(self) -> int:
        """The highest seq on record (0 when empty), for a restarted engine to count on from."""
        rows = self._read("SELECT COALESCE(MAX(seq), 0) FROM events")
        return int(rows[0][0]) if rows else 0

    def newest_wall(self) -> float | None:
        rows = self._read("SELECT MAX(wall) FROM events")
        return rows[0][0] if rows else None

    def close(self) -> None:
        """Commit what is queued, stop the writer and close the file; later calls do nothing."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._stop_writer()

    def _open(self) -> tuple[sqlite3.Connection, list[str]]:
        cutoff = self._wall() - self._retention
        return open_sqlite(self.path, lambda conn: _prepare(conn, cutoff), self.noun)

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while len(items) < _BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write([item for item in items if isinstance(item, tuple)])
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()
            if items[-1] is _STOP:  # nothing is ever queued after the stop
                return

    def _encode(self, items: list[_Item | _Denied]) -> list[_Row]:
        rows: list[_Row] = []
        for item in items:
            try:
                if len(item) == 8:
                    seq, key, agent, wall, number, platform, reason, retry_after = item
                    type_ = CALL_DENIED
                    text = denied_fields(number, platform, reason, retry_after)
                else:
                    seq, type_, key, agent, wall, fields = item
                    text = json.dumps(fields, allow_nan=False)
                rows.append((seq, type_, key, agent, wall, text))
            except (TypeError, ValueError) as exc:
                self._report(f"The audit log {self.path} skipped a {type_} event ({exc}).")
                self._problems.tally(_DROPPED_JSON.format(path=self.path), 1)
        return rows

    def _write(self, items: list[_Item | _Denied]) -> None:
        """Commit one batch, and sweep old rows when a minute of wall clock has passed; the
        sweep rides on writes because the log has no timers of its own."""
        rows = self._encode(items)
        with self._db_lock:
            try:
                with self._conn:
                    self._conn.executemany(
                        f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows
                    )
                    now = self._wall()
                    if now - self._pruned_at >= PRUNE_EVERY:
                        self._conn.execute(
                            "DELETE FROM events WHERE wall < ?", (now - self._retention,)
                        )
                        self._pruned_at = now
            except sqlite3.Error as exc:
                self._report(f"The audit log {self.path} could not be written ({exc}).")
                self._problems.tally(_DROPPED_DISK.format(path=self.path), len(rows))
                if is_damage(exc):
                    self._start_afresh()

    def _start_afresh(self) -> None:
        """A file damaged mid-run is moved aside (by the check at open) for a fresh one."""
        self._conn.close()
        self._conn, found = self._open()
        for problem in found:
            self._problems.add(problem)

    def _report(self, problem: str) -> None:
        logger.error(problem)
        self._problems.add(problem)


def denied_fields(number: int, platform: str, reason: str | None, retry_after: float) -> str:
    """A `call.denied`'s fields as `json.dumps` writes them, byte for byte (its test feeds it
    hostile strings), from a template: about a seventh of `json.dumps`'s time for the dict,
    on the writer thread, which shares the interpreter with every caller in a refusal flood."""
    words = "null" if reason is None else _string(reason)
    return (
        f'{{"call_id": "call-{number:06d}", "platform": {_string(platform)}, '
        f'"reason": {words}, "retry_after_seconds": {_number(retry_after)}}}'
    )


def _number(value: float) -> str:
    """As `json.dumps(value, allow_nan=False)`: a float's repr, an int's; NaN and the
    infinities refused."""
    if isinstance(value, float):
        if value != value or value in (_INFINITY, -_INFINITY):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return float.__repr__(value)
    return int.__repr__(value)


_INFINITY = float("inf")
