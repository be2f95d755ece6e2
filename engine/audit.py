"""The append-only audit log: what happened, per agent and per key, across restarts.

Appending sits on the call path, so it only queues; one writer thread owns the disk and commits
whatever has piled up in a single transaction, which keeps a burst of failures from turning into
a burst of fsyncs. Reads flush first, so a caller always sees its own writes.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Self

from breakerdeck.engine.events import Event
from breakerdeck.engine.store import open_sqlite

logger = logging.getLogger(__name__)

PRUNE_EVERY = 60.0
"""Wall-clock seconds between retention sweeps: often enough, without a DELETE per batch."""

_BATCH = 500
_STOP = object()
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


def _prepare(conn: sqlite3.Connection, cutoff: float) -> None:
    conn.executescript(_SCHEMA)
    # A database of some other shape at this path fails here, so it is set aside, not mixed in.
    conn.execute(f"SELECT {_COLUMNS} FROM events LIMIT 1").fetchall()
    with conn:
        conn.execute("DELETE FROM events WHERE wall < ?", (cutoff,))


class AuditLog:
    """Events in SQLite (WAL), newest first on query, older than the retention dropped."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention_seconds: float = 30 * 86400,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not retention_seconds > 0:
            raise ValueError(f"retention must be positive, not {retention_seconds} s")
        self.path = Path(path)
        self._retention = retention_seconds
        self._wall = wall
        self._pruned_at = wall()
        cutoff = self._pruned_at - retention_seconds
        self._conn, self.problems = open_sqlite(
            self.path, lambda conn: _prepare(conn, cutoff), "audit log"
        )
        self._db_lock = threading.Lock()
        # Guards `_closed` together with the queue, so nothing can be queued behind the stop.
        self._state_lock = threading.Lock()
        self._closed = False
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()  # rows, flushes, the stop
        self._writer = threading.Thread(
            target=self._run, name=f"audit-writer:{self.path.name}", daemon=True
        )
        self._writer.start()
        # The writer is a daemon so a forgotten close cannot hang exit; this still commits the
        # queue on a normal exit.
        atexit.register(self.close)

    def append(self, event: Event) -> None:
        """Queue one event. The fields are encoded now, so later changes to the caller's dict do
        not rewrite history, and a field JSON cannot hold raises here, at the line that added it.
        """
        row = (event.seq, event.type, event.key, event.agent, event.wall, json.dumps(event.fields))
        with self._state_lock:
            if self._closed:
                raise RuntimeError(f"the audit log {self.path} is closed")
            self._queue.put(row)

    def flush(self) -> None:
        """Return once everything appended before this call is committed (or reported lost)."""
        done = threading.Event()
        with self._state_lock:
            if self._closed:
                return
            self._queue.put(done)
        done.wait()

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
        A bare string for `types` means that one type, not its letters."""
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
        self.flush()
        with self._db_lock:
            rows = self._conn.execute(sql, (*params, limit)).fetchall()
        return [
            Event(seq, type_, key_, agent_, wall, json.loads(fields))
            for seq, type_, key_, agent_, wall, fields in rows
        ]

    def max_seq(self) -> int:
        """The highest seq on record (0 when empty), for a restarted engine to count on from."""
        self.flush()
        with self._db_lock:
            (highest,) = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
        return highest

    def newest_wall(self) -> float | None:
        self.flush()
        with self._db_lock:
            (newest,) = self._conn.execute("SELECT MAX(wall) FROM events").fetchone()
        return newest

    def close(self) -> None:
        """Commit what is queued, stop the writer and close the file; later calls do nothing."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._writer.join()
        with self._db_lock:
            self._conn.close()
        atexit.unregister(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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

    def _write(self, rows: list[_Row]) -> None:
        """Commit one batch, and sweep old rows when a minute of wall clock has passed; the
        sweep rides on writes because the log has no timers of its own."""
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
                problem = (
                    f"The audit log {self.path} could not record {len(rows)} event(s) ({exc}); "
                    "they are lost."
                )
                logger.error(problem)
                self.problems.append(problem)
