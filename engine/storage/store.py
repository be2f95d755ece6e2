"""The verdict per breaker key, kept in SQLite so a restarted engine picks up where it stopped.

A bad store must never keep the engine from starting: an unreadable file is moved aside (kept for
a human to inspect, never deleted) and the engine starts with no verdicts, and a single bad row
costs only that key's verdict. Every such finding goes to `problems` and to the log.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sqlite3
import threading
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from breakerdeck.engine.core.verdict import Verdict
from breakerdeck.engine.state import State

logger = logging.getLogger(__name__)

BUSY_TIMEOUT = 5.0
"""Seconds to wait for another connection's lock before calling the file in use."""

_IN_USE = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})

COUNTER_DELAY = 0.25
"""Seconds a counter-only change may wait for company before it is committed: a burst of
failures becomes a few commits a second, well inside the design's one second."""

RETRY_SECONDS = 1.0
"""After a failed write, the writer waits this long before trying the disk again."""

_MAX_PROBLEMS = 100


class Problems:
    """What went wrong with storage, as sentences for `problems`: each distinct sentence once,
    with how often it happened, so a disk that stays full reports one line, not millions."""

    def __init__(self, initial: list[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(initial or [], 1)
        self._tallies: dict[str, int] = {}
        self._left_out = 0

    def add(self, problem: str) -> None:
        with self._lock:
            if problem in self._counts:
                self._counts[problem] += 1
            elif len(self._counts) < _MAX_PROBLEMS:
                self._counts[problem] = 1
            else:
                self._left_out += 1

    def tally(self, what: str, n: int) -> None:
        """Add `n` to a running count named by a sentence with `{n}` in it (events dropped)."""
        with self._lock:
            self._tallies[what] = self._tallies.get(what, 0) + n

    def lines(self) -> list[str]:
        with self._lock:
            lines = [text if n == 1 else f"{text} ({n} times)" for text, n in self._counts.items()]
            lines += [what.format(n=n) for what, n in self._tallies.items()]
            if self._left_out:
                lines.append(f"{self._left_out} further storage problem(s) not listed")
            return lines

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._counts or self._tallies or self._left_out)


def is_damage(error: sqlite3.Error) -> bool:
    """The file itself is bad (not a full disk or a lock): only moving it aside helps."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in _DAMAGED


def check_integrity(conn: sqlite3.Connection) -> None:
    """Raise `DatabaseError` naming what SQLite's quick check found, if anything.

    A damaged page far from the pages a start-up reads would otherwise surface later, at a
    lookup or a write in the middle of a run."""
    result = conn.execute("PRAGMA quick_check").fetchall()
    if result != [("ok",)]:
        findings = [
            line
            for (text,) in result
            for line in str(text).splitlines()
            if not line.startswith("***")  # the "*** in database main ***" heading
        ]
        more = f"; and {len(findings) - 3} more" if len(findings) > 3 else ""
        raise sqlite3.DatabaseError(f"failed its integrity check: {'; '.join(findings[:3])}{more}")


def open_sqlite(
    path: str | os.PathLike[str],
    prepare: Callable[[sqlite3.Connection], None],
    what: str,
) -> tuple[sqlite3.Connection, list[str]]:
    """Open `path` and run `prepare` on it, settling for a usable database over a crash.

    `prepare` creates the schema and reads enough to prove the file is sound; whatever it raises
    as `sqlite3.Error` marks the file as unusable, and it is moved aside for a fresh one. A file
    another process holds locked is left alone (it is not ours to move); when no file can be
    used, this run keeps its data in memory. Returns the connection and the sentences describing
    what went wrong, already logged.
    """
    path = Path(path)
    problems: list[str] = []

    def report(problem: str) -> None:
        logger.warning(problem)
        problems.append(problem)

    def in_memory(problem: str) -> tuple[sqlite3.Connection, list[str]]:
        report(f"{problem}; this run keeps its {what} in memory only.")
        return _connect(":memory:", prepare), problems

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _connect(path, prepare), problems
    except OSError as exc:
        return in_memory(f"The {what} {path} could not be opened ({exc})")
    except sqlite3.Error as exc:
        # Errors raised by `prepare` itself carry no code, hence the default.
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _IN_USE:
            return in_memory(f"The {what} {path} is locked by another process ({exc})")
        try:
            aside = set_aside(path)
        except OSError as move_exc:
            return in_memory(
                f"The {what} {path} could not be read ({exc}) nor moved aside ({move_exc})"
            )
        report(
            f"The {what} {path} could not be read ({exc}); it was moved to {aside} and a fresh "
            f"{what} was started."
        )
    try:
        return _connect(path, prepare), problems
    except (sqlite3.Error, OSError) as exc:
        return in_memory(f"A fresh {what} could not be started at {path} ({exc})")


def _connect(path: Path | str, prepare: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        prepare(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def set_aside(path: Path) -> Path:
    """Rename the file (and its WAL companions, so the copy stays openable) to a free name."""
    n = 1
    while (aside := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    path.rename(aside)
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(aside.with_name(aside.name + suffix))
    return aside


_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    saved_at REAL NOT NULL
)
"""


def _prepare(conn: sqlite3.Connection) -> None:
    conn.execute(_SCHEMA)
    # The store is one row per key, so a full structural check at open is cheap and catches
    # damage that the header alone would not show.
    check_integrity(conn)
    # A database of some other shape at this path fails here, so it is set aside, not used.
    conn.execute("SELECT key, data, saved_at FROM verdicts LIMIT 1").fetchall()


def _allowed_types(hint: Any) -> tuple[type, ...]:
    if isinstance(hint, types.UnionType):
        return typing.get_args(hint)
    if hint is State:  # stored as its value, checked against the members below
        return (str,)
    return (hint,)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    name: _allowed_types(hint) for name, hint in typing.get_type_hints(Verdict).items()
}
#: Fields a verdict stored before they existed lacks (the hold and the mode).
_OPTIONAL = frozenset(
    {"last_failure_detail", "held_by", "held_reason", "held_until", "mode_chosen", "mode_against"}
)


def _decode(key: str, data: str) -> Verdict:
    """Rebuild a verdict, refusing anything the engine could trip over later."""
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, found {type(raw).__name__}")
    values: dict[str, Any] = {}
    for name, allowed in _FIELD_TYPES.items():
        if name not in raw:
            if name in _OPTIONAL:  # written by a later release: the verdict's default
                continue
            raise ValueError(f"missing field {name!r}")
        value = raw[name]
        if not _fits(value, allowed):
            raise ValueError(f"field {name!r} has the wrong type ({type(value).__name__})")
        values[name] = float(value) if float in allowed and type(value) is int else value
    if values["key"] != key:
        raise ValueError(f"the stored verdict names key {values['key']!r}")
    try:
        values["state"] = State(values["state"])
    except ValueError:
        raise ValueError(f"unknown state {values['state']!r}") from None
    return Verdict(**values)


def _fits(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # JSON true is not a count
        return bool in allowed
    if type(value) is int:
        return int in allowed or float in allowed
    return type(value) in allowed


class SqliteFile:
    """What the verdict store and the audit log share: a SQLite file that one writer thread
    commits to, read back (after a flush, so a caller sees its own writes) under the lock the
    writer holds; a file that cannot be read answers nothing and says why in `problems`."""

    path: Path
    #: The file in words, as its problems name it ("verdict store", "audit log").
    noun: str
    _conn: sqlite3.Connection
    _db_lock: threading.Lock
    _problems: Problems
    _writer: threading.Thread

    @property
    def problems(self) -> list[str]:
        return self._problems.lines()

    def flush(self, timeout: float | None = None) -> bool:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def _start_writer(self, run: Callable[[], None], name: str) -> None:
        """The writer thread is a daemon so a forgotten close cannot hang exit; `close` still
        commits the queue on a normal exit."""
        self._writer = threading.Thread(target=run, name=f"{name}:{self.path.name}", daemon=True)
        self._writer.start()
        atexit.register(self.close)

    def _stop_writer(self) -> None:
        self._writer.join()
        with self._db_lock:
            self._conn.close()
        atexit.unregister(self.close)

    def _read(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        self.flush()
        try:
            with self._db_lock:
                return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self._report(f"The {self.noun} {self.path} could not be read ({exc}).")
            return []

    def _report(self, problem: str) -> None:
        raise NotImplementedError


class VerdictStore(SqliteFile):
    """One row per key, written by a thread of its own so no caller ever waits on the disk.

    `submit` queues a verdict (the newest per key wins) and returns a ticket; `wait` blocks the
    one caller that needs its write on disk, for as long as it chooses. Urgent verdicts
    (transitions, resets, credential flags) are committed at once; counter changes within
    `COUNTER_DELAY`. A failed write is reported, kept and tried again: each commit is one
    transaction, so a crash never leaves a half-written verdict.
    """

    noun = "verdict store"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db_lock = threading.Lock()
        conn, found = open_sqlite(self.path, _prepare, self.noun)
        self._conn = conn
        self._problems = Problems(found)
        #: The condition's own lock, taken directly where a caller queues a verdict (a
        #: `Condition`'s `with` is two Python calls more, on every counted call's path).
        self._guard = threading.RLock()
        self._cond = threading.Condition(self._guard)
        #: None: delete the key's row; a callable: build the verdict when it is written.
        self._pending: dict[str, Verdict | Callable[[], Verdict] | None] = {}
        self._tasks: list[Callable[[], None]] = []
        self._submitted = 0
        self._committed = 0
        self._urgent = False
        self._stopping = False
        self._closed = False
        #: Called on the writer thread when a damaged file was replaced by a fresh one, so the
        #: owner can submit every verdict again (only the pending ones are written otherwise).
        self.on_fresh_file: Callable[[], None] | None = None
        self._start_writer(self._run, "verdict-writer")

    def submit(self, verdict: Verdict, *, urgent: bool) -> int:
        """Queue a verdict; the ticket is what `wait` takes. Never blocks, never raises."""
        return self._enqueue(verdict.key, verdict, urgent)

    def submit_later(self, key: str, build: Callable[[], Verdict]) -> int:
        """Queue a counter-like change (never urgent): the verdict is built by `build` on the
        writer thread when it is written, so the caller pays for none of it (DESIGN,
        "Durability": counters within a second). `build` takes what locks it needs."""
        return self._enqueue(key, build, urgent=False)

    def delete(self, key: str) -> int:
        return self._enqueue(key, None, urgent=False)

    def run_on_writer(self, task: Callable[[], None]) -> None:
        """Run `task` on the writer thread before its next commit (a file the store does not
        own, written off the call path); what it raises is reported, never propagated."""
        with self._cond:
            self._tasks.append(task)
            self._cond.notify_all()

    def wait(self, ticket: int, timeout: float | None) -> bool:
        """True once everything submitted up to `ticket` is committed; False at the timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._committed >= ticket, timeout)

    def flush(self, timeout: float | None = 5.0) -> bool:
        """Wait for everything submitted so far, counter changes included, to be committed."""
        with self._cond:
            ticket = self._submitted
            if self._committed < ticket:
                self._urgent = True
                self._cond.notify_all()
        return self.wait(ticket, timeout)

    def save(self, verdict: Verdict, timeout: float | None = 5.0) -> bool:
        """Write one verdict and wait for it: True when it is on disk within `timeout`."""
        return self.wait(self.submit(verdict, urgent=True), timeout)

    def load(self) -> list[Verdict]:
        """Every readable verdict; a bad row is reported and skipped, and stays on disk until
        the next save for its key replaces it. Damage to the file itself was already dealt with
        at open, where the whole file is checked."""
        rows = self._read("SELECT key, data FROM verdicts ORDER BY key")
        verdicts = []
        for key, data in rows:
            try:
                verdicts.append(_decode(key, data))
            except ValueError as exc:
                self._report(
                    f"The verdict store {self.path} has an unreadable verdict for key {key!r} "
                    f"({exc}); it was skipped."
                )
        return verdicts

    def newest_wall(self) -> float | None:
        """The latest save time, so a replay on this state can start its clock after it."""
        rows = self._read("SELECT MAX(saved_at) FROM verdicts")
        newest = rows[0][0] if rows else None
        return None if newest is None else float(newest)

    def close(self) -> None:
        """Commit what is queued (one last try if the disk is failing), then close the file."""
        with self._cond:
            if self._closed:
                return
            self._closed = self._stopping = True
            self._cond.notify_all()
        self._stop_writer()

    # -- the writer thread ---------------------------------------------------------------

    def _enqueue(
        self, key: str, verdict: Verdict | Callable[[], Verdict] | None, urgent: bool
    ) -> int:
        with self._guard:
            self._pending[key] = verdict
            self._submitted += 1
            if urgent and not self._urgent:
                self._urgent = True
                self._cond.notify_all()
            elif len(self._pending) == 1:
                self._cond.notify_all()
            return self._submitted

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._tasks or self._stopping)
                if not (self._urgent or self._tasks or self._stopping):
                    self._cond.wait_for(lambda: self._urgent or self._stopping, COUNTER_DELAY)
                batch, self._pending = self._pending, {}
                tasks, self._tasks = self._tasks, []
                ticket, self._urgent = self._submitted, False
                stopping = self._stopping
            for task in tasks:
                self._run_task(task)
            built = self._built(batch)
            written = self._commit(built)
            with self._cond:
                if written:
                    self._committed = ticket
                else:  # kept for the next try, unless a newer verdict replaced it meanwhile
                    self._pending = {**built, **self._pending}
                self._cond.notify_all()
                if stopping:
                    return
                if not written:
                    self._cond.wait_for(lambda: self._stopping, RETRY_SECONDS)

    def _run_task(self, task: Callable[[], None]) -> None:
        try:
            task()
        except Exception as exc:  # a task's failure is a problem to show, never a dead writer
            self._report(f"A state-dir write failed ({exc!r}).")

    def _built(
        self, batch: dict[str, Verdict | Callable[[], Verdict] | None]
    ) -> dict[str, Verdict | None]:
        """Each verdict submitted to be built later (`submit_later`), built now, off the
        lock callers queue under; one that fails to build is reported and left out."""
        built: dict[str, Verdict | None] = {}
        for key, verdict in batch.items():
            if callable(verdict):
                try:
                    verdict = verdict()
                except Exception as exc:  # a build's failure is a problem to show
                    self._report(f"The verdict for {key!r} could not be built ({exc!r}).")
                    continue
            built[key] = verdict
        return built

    def _commit(self, batch: dict[str, Verdict | None]) -> bool:
        """Each verdict as a JSON object of its fields, read one by one (`dataclasses.asdict`
        copies each value deeply: 25 µs a verdict on this writer thread, which shares the GIL
        with every caller, against 5)."""
        if not batch:
            return True
        saves = [
            (key, json.dumps({name: getattr(v, name) for name in _FIELD_TYPES}), v.saved_at)
            for key, v in batch.items()
            if v is not None
        ]
        deletes = [(key,) for key, v in batch.items() if v is None]
        try:
            with self._db_lock, self._conn:
                self._conn.executemany(
                    "INSERT INTO verdicts (key, data, saved_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE "
                    "SET data = excluded.data, saved_at = excluded.saved_at",
                    saves,
                )
                self._conn.executemany("DELETE FROM verdicts WHERE key = ?", deletes)
        except sqlite3.Error as exc:
            self._report(
                f"The verdict store {self.path} could not be written ({exc}); verdicts are kept "
                "in memory and written when the disk allows."
            )
            if is_damage(exc):
                self._start_afresh()
            return False
        return True

    def _start_afresh(self) -> None:
        """Open the file again: the check at open moves a damaged one aside for a fresh one."""
        with self._db_lock:
            self._conn.close()
            self._conn, found = open_sqlite(self.path, _prepare, self.noun)
        for problem in found:
            self._problems.add(problem)
        if found and self.on_fresh_file is not None:
            self.on_fresh_file()

    def _report(self, problem: str) -> None:
        logger.warning(problem)
        self._problems.add(problem)
