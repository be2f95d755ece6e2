"""Damage to a SQLite file as a failing disk or a stray write leaves it: the stores' tests
check that each is found, set aside and made good."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def damage_index(path: Path, index: str | None = None, size: int | None = None) -> None:
    """Overwrite `size` bytes (a page by default) from an index's root page: the one named, or
    the first the file lists. Checkpointed first, so the damage lands on real pages."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    if index is None:
        query = ("SELECT rootpage FROM sqlite_master WHERE type = 'index'", ())
    else:
        query = ("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,))
    (root,) = conn.execute(*query).fetchone()
    conn.close()
    with path.open("r+b") as db:
        db.seek((root - 1) * page_size)
        db.write(b"\xff" * (size or page_size))
