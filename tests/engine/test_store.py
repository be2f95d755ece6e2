from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from breakerdeck.engine.core.verdict import Verdict
from breakerdeck.engine.storage import store as store_module
from breakerdeck.engine.storage.store import VerdictStore
from tests.engine.damage import damage_index

WALL = 1_767_225_600.0


def verdict(key: str = "tool:search", **changes: object) -> Verdict:
    base = Verdict(
        key=key,
        agent="agent-7",
        state="open",
        count=5,
        last_failure_at=WALL - 3.5,
        opened_at=WALL - 3.0,
        cooldown=30.0,
        failed_probes=1,
        paged=False,
        rate_limited_streak=2,
        last_retry_after=12.0,
        trip_cause="upstream",
        credential_ok_at=None,
        credential_revoked=False,
        saved_at=WALL,
    )
    return dataclasses.replace(base, **changes)


def write_raw_row(path: Path, key: str, data: str, saved_at: float = WALL) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO verdicts (key, data, saved_at) VALUES (?, ?, ?)", (key, data, saved_at)
        )
    conn.close()


def test_saved_verdict_loads_back_equal(tmp_path: Path) -> None:
    with VerdictStore(tmp_path / "verdicts.db") as store:
        store.save(verdict())
        assert store.load() == [verdict()]
        assert store.problems == []


def test_saving_the_same_key_replaces_its_verdict(tmp_path: Path) -> None:
    with VerdictStore(tmp_path / "verdicts.db") as store:
        store.save(verdict(state="open", saved_at=WALL))
        store.save(verdict(state="closed", count=0, saved_at=WALL + 60))
        assert store.load() == [verdict(state="closed", count=0, saved_at=WALL + 60)]


def test_verdicts_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path) as store:
        store.save(verdict("a"))
        store.save(verdict("b", agent=None, credential_revoked=True))
    with VerdictStore(path) as store:
        assert store.load() == [verdict("a"), verdict("b", agent=None, credential_revoked=True)]


def test_delete_removes_only_that_key(tmp_path: Path) -> None:
    with VerdictStore(tmp_path / "verdicts.db") as store:
        store.save(verdict("a"))
        store.save(verdict("b"))
        store.delete("a")
        store.delete("never-saved")
        assert store.load() == [verdict("b")]


def test_newest_wall_is_the_latest_save_and_none_when_empty(tmp_path: Path) -> None:
    with VerdictStore(tmp_path / "verdicts.db") as store:
        assert store.newest_wall() is None
        store.save(verdict("a", saved_at=WALL + 9))
        store.save(verdict("b", saved_at=WALL + 2))
        assert store.newest_wall() == WALL + 9


def test_concurrent_saves_from_threads_all_land(tmp_path: Path) -> None:
    with VerdictStore(tmp_path / "verdicts.db") as store:

        def save_many(thread: int) -> None:
            for i in range(25):
                store.save(verdict(f"t{thread}-{i}"))

        threads = [threading.Thread(target=save_many, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(store.load()) == 8 * 25


def test_garbage_file_is_reported_moved_aside_and_the_store_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.db"
    path.write_bytes(b"not a database at all " * 200)

    with VerdictStore(path) as store:
        assert store.load() == []
        [problem] = store.problems
        assert str(path) in problem
        assert "not a database" in problem
        store.save(verdict())
        assert store.load() == [verdict()]
    assert (tmp_path / "verdicts.db.corrupt-1").read_bytes() == b"not a database at all " * 200


def test_damaged_index_is_found_at_open_even_though_rows_still_read(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path) as store:
        for i in range(50):
            store.save(verdict(f"key-{i}"))
    damage_index(path)

    with VerdictStore(path) as store:
        assert store.load() == []
        [problem] = store.problems
        assert "moved to" in problem
        store.save(verdict())
    assert (tmp_path / "verdicts.db.corrupt-1").exists()


def test_file_locked_by_another_process_is_left_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.01)
    path = tmp_path / "verdicts.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with VerdictStore(path) as store:
            [problem] = store.problems
            assert "locked" in problem
            store.save(verdict())
            assert store.load() == [verdict()]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not (tmp_path / "verdicts.db.corrupt-1").exists()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        (
            json.dumps(
                {k: v for k, v in dataclasses.asdict(verdict("bad")).items() if k != "count"}
            ),
            "missing field 'count'",
        ),
        (json.dumps(dataclasses.asdict(verdict("bad")) | {"count": "five"}), "'count'"),
        (json.dumps(dataclasses.asdict(verdict("bad")) | {"count": True}), "'count'"),
        (json.dumps(dataclasses.asdict(verdict("bad")) | {"state": "ajar"}), "unknown state"),
        (json.dumps(dataclasses.asdict(verdict("elsewhere"))), "names key 'elsewhere'"),
    ],
    ids=[
        "bad-json",
        "not-object",
        "missing-field",
        "wrong-type",
        "bool-count",
        "bad-state",
        "other-key",
    ],
)
def test_malformed_row_is_skipped_and_named_while_the_others_load(
    tmp_path: Path, data: str, why: str
) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path) as store:
        store.save(verdict("good-1"))
        store.save(verdict("good-2"))
    write_raw_row(path, "bad", data)

    with VerdictStore(path) as store:
        assert store.load() == [verdict("good-1"), verdict("good-2")]
        [problem] = store.problems
        assert "'bad'" in problem
        assert why in problem


def test_whole_number_in_a_float_field_loads_as_float(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path):
        pass
    write_raw_row(path, "k", json.dumps(dataclasses.asdict(verdict("k")) | {"cooldown": 30}))

    with VerdictStore(path) as store:
        [loaded] = store.load()
        assert type(loaded.cooldown) is float


def test_next_save_replaces_a_malformed_row(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path):
        pass
    write_raw_row(path, "k", "{not json")

    with VerdictStore(path) as store:
        store.save(verdict("k"))
        assert store.load() == [verdict("k")]
        assert store.problems == []


def test_damage_found_by_a_write_mid_run_moves_the_file_aside_and_the_verdict_still_lands(
    tmp_path: Path,
) -> None:
    path = tmp_path / "verdicts.db"
    with VerdictStore(path) as store:
        for i in range(50):
            store.save(verdict(f"key-{i}"))
        damage_index(path)

        assert store.save(verdict("key-7", count=9))  # kept and written to the fresh file

        assert store.load() == [verdict("key-7", count=9)]
        assert any("moved to" in problem for problem in store.problems)
    assert (tmp_path / "verdicts.db.corrupt-1").exists()


def test_a_store_that_cannot_be_read_loads_nothing_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.sqlite3"
    with VerdictStore(path) as store:
        assert store.save(verdict())
        with sqlite3.connect(path) as other:
            other.execute("DROP TABLE verdicts")
        assert store.load() == []
        assert store.newest_wall() is None
        said = f"The verdict store {path} could not be read (no such table: verdicts)."
        assert said in "\n".join(store.problems)
