"""The test Redis itself: it answers, stops, comes back on the same address, hangs on demand,
and its absence fails the replica tests by name instead of skipping them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_server import MISSING, RedisServer, RedisServerMissing


def test_it_answers_ping_on_a_loopback_url(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.ping()


def test_it_stops_and_starts_again_on_the_same_port(redis_server: RedisServer) -> None:
    port = redis_server.port
    redis_server.stop()
    assert not redis_server.ping()
    redis_server.start()
    assert redis_server.port == port
    assert redis_server.ping()


def test_after_a_kill_it_starts_again_empty(redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        client.set("left-behind", "1")
    redis_server.kill()
    redis_server.start()
    with redis_server.client() as client:
        assert client.get("left-behind") is None


def test_paused_it_keeps_the_connection_but_does_not_answer(redis_server: RedisServer) -> None:
    redis_server.pause()
    assert not redis_server.ping(timeout=0.2)
    redis_server.resume()
    assert redis_server.ping()


def test_a_paused_server_still_stops(redis_server: RedisServer) -> None:
    redis_server.pause()
    redis_server.stop()
    assert not redis_server.running


def test_flushall_empties_it(redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        client.set("key", "1")
        redis_server.flushall()
        assert client.dbsize() == 0


def test_it_leaves_nothing_in_the_working_directory(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    with redis_server.client() as client:
        client.set("key", "1")
        assert client.config_get("save") == {"save": ""}
        pid = int(client.info("server")["process_id"])
        # Whatever Redis writes all the same (a SAVE, a replica's sync) goes to its own folder.
        assert Path(f"/proc/{pid}/cwd").resolve() == (tmp_path / "redis").resolve()
        client.save()
    redis_server.stop()  # a SIGTERM is when a configured snapshot would be written
    assert not (Path.cwd() / "dump.rdb").exists()
    assert (tmp_path / "redis" / "dump.rdb").exists()


@pytest.mark.parametrize("writer", ["a first test", "a second test"])
def test_the_session_server_is_empty_at_the_start_of_each_test(
    writer: str, session_redis: RedisServer
) -> None:
    with session_redis.client() as client:
        assert client.dbsize() == 0
        client.set(f"written-by-{writer}", "1")


def test_without_the_binary_the_helper_names_debians_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerMissing, match="apt-get install redis-server"):
        RedisServer(tmp_path)


def test_without_the_binary_a_test_on_redis_fails_and_is_not_skipped(tmp_path: Path) -> None:
    this_test = f"{Path(__file__).name}::test_it_answers_ping_on_a_loopback_url"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", this_test],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=120,
        # Only pytest and this folder's conftest: the installed plugins (textual, playwright,
        # hypothesis, ...) took 5 of the run's 5.5 s and play no part in a fixture's failure.
        env={**os.environ, "PATH": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert done.returncode == 1, done.stdout
    assert "1 error" in done.stdout
    assert "skipped" not in done.stdout
    assert MISSING in done.stdout


def test_a_port_asked_for_below_a_bound_is_below_it() -> None:
    """A cluster node's bus listens 10,000 above its port, so the suite asks below 55,536."""
    from tests.redis_server import _free_port

    assert all(_free_port(below=40_000) < 40_000 for _ in range(50))
