"""The verdict per breaker key, kept in SQLite so a restarted engine picks up where it stopped.

A bad store must never keep the engine from starting: an unreadable file is moved aside (kept for
a human to inspect, never deleted) and the engine starts with no verdicts, and a single bad row
costs only that key's verdict. Every such finding goes to `problems` and to the log.
"""

from __future__ import annotations

import dataclasses
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

from breakerdeck.engine.verdict import Verdict

logger = logging.getLogger(__name__)

BUSY_TIMEOUT = 5.0
"""Seconds to wait for another connection's lock before calling the file in use."""

_IN_USE = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


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
            aside = _set_aside(path)
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


def _set_aside(path: Path) -> Path:
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
    result = conn.execute("PRAGMA quick_check").fetchall()
    if result != [("ok",)]:
        findings = [
            line
            for (text,) in result
            for line in str(text).splitlines()
            if not line.startswith("***")  # the "*** in database main ***" heading
        ]
        raise sqlite3.DatabaseError(f"failed its integrity check: {'; '.join(findings)}")
    # A database of some other shape at this path fails here, so it is set aside, not used.
    conn.execute("SELECT key, data, saved_at FROM verdicts LIMIT 1").fetchall()


def _allowed_types(hint: Any) -> tuple[type, ...]:
    if isinstance(hint, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    name: _allowed_types(hint) for name, hint in typing.get_type_hints(Verdict).items()
}
_STATES = frozenset({"closed", "open", "half_open"})


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
            raise ValueError(f"missing field {name!r}")
        value = raw[name]
        if not _fits(value, allowed):
            raise ValueError(f"field {name!r} has the wrong type ({type(value).__name__})")
        values[name] = float(value) if float in allowed and type(value) is int else value
    if values["key"] != key:
        raise ValueError(f"the stored verdict names key {values['key']!r}")
    if values["state"] not in _STATES:
        raise ValueError(f"unknown state {values['state']!r}")
    return Verdict(**values)


def _fits(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # JSON true is not a count
        return bool in allowed
    if type(value) is int:
        return int in allowed or float in allowed
    return type(value) in allowed


class VerdictStore:
    """One row per key; each save is its own committed transaction, so a crash loses at most
    the save in flight and never leaves a half-written verdict."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn, self.problems = open_sqlite(self.path, _prepare, "verdict store")

    def load(self) -> list[Verdict]:
        """Every readable verdict; a bad row is reported and skipped, and stays on disk until
        the next save for its key replaces it. Damage to the file itself was already dealt with
        at open, where the whole file is checked."""
        with self._lock:
            rows = self._conn.execute("SELECT key, data FROM verdicts ORDER BY key").fetchall()
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

    def save(self, verdict: Verdict) -> None:
        data = json.dumps(dataclasses.asdict(verdict))
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO verdicts (key, data, saved_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE "
                "SET data = excluded.data, saved_at = excluded.saved_at",
                (verdict.key, data, verdict.saved_at),
            )

    def delete(self, key: str) -> None:
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM verdicts WHERE key = ?", (key,))

    def newest_wall(self) -> float | None:
        """The latest save time, so a replay on this state can start its clock after it."""
        with self._lock:
            (newest,) = self._conn.execute("SELECT MAX(saved_at) FROM verdicts").fetchone()
        return newest

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _report(self, problem: str) -> None:
        logger.warning(problem)
        self.problems.append(problem)
