"""Fixtures for every test folder: a real `redis-server` (tests/redis_server.py).

`redis_server` is a test's own server, for tests that stop, kill or pause it; `session_redis` is
one server for the whole run, emptied before each test that takes it. Without the binary both
fail, naming Debian's package: never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_server import RedisServer, RedisServerMissing


def _started(directory: Path) -> RedisServer:
    try:
        return RedisServer(directory).start()
    except RedisServerMissing as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = _started(tmp_path / "redis")
    yield server
    server.kill()


@pytest.fixture(scope="session")
def _redis_for_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = _started(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()


@pytest.fixture
def session_redis(_redis_for_the_session: RedisServer) -> RedisServer:
    server = _redis_for_the_session
    if not server.running:
        server.start()
    server.flushall()
    return server
