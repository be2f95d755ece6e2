"""`breakerdeck status` against a replica that shares its breakers (DESIGN, "Replicas"): it says
when the shared store is lost and why, and its exit status stays the verdict.

A lost store is a real one that is not there: `redis://127.0.0.1:1/0`, where nothing listens, so
the engine starts on its local breakers at once; an answering one is the suite's redis-server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from breakerdeck.console import remote
from breakerdeck.console.cli import build_parser
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import FeedServer, serve_feed
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.shared import SharedStore
from tests.feed.feedkit import AUTH, OPERATOR, VIEWER, call
from tests.redis_server import RedisServer

NOWHERE = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def no_default_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(remote.TOKEN_ENV, raising=False)


@pytest.fixture
def viewer_token(tmp_path: Path) -> str:
    path = tmp_path / "viewer.token"
    path.write_text(VIEWER)
    return str(path)


def replica(url: str, state: Path) -> Engine:
    engine = Engine(
        AgentPolicy(),
        clock=ManualClock(),
        shared=SharedStore(url, timeout=5.0),  # a loaded machine's round trip is no loss
        instance="a",
        state_dir=state,
    )
    engine.restore()
    return engine


@pytest.fixture
def lost_replica(tmp_path: Path) -> Iterator[Engine]:
    engine = replica(NOWHERE, tmp_path / "state")
    assert engine.shared_lost is not None
    yield engine
    engine.close()


@asynccontextmanager
async def served(engine: Engine) -> AsyncIterator[FeedServer]:
    async with serve_feed(
        engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, source_name="replica-a"
    ) as feed:
        yield feed


@pytest.fixture
async def lost_feed(lost_replica: Engine) -> AsyncIterator[FeedServer]:
    async with served(lost_replica) as feed:
        yield feed


async def status(url: str, token_file: str, *, as_json: bool = False) -> int:
    argv = ["status", url, "--timeout", "3", "--token-file", token_file]
    argv += ["--json"] if as_json else []
    return await asyncio.to_thread(remote.run_status, build_parser().parse_args(argv))


async def test_status_says_the_shared_store_is_lost_and_why(
    lost_replica: Engine, lost_feed: FeedServer, viewer_token: str, capsys
) -> None:
    await status(lost_feed.url, viewer_token)
    err = capsys.readouterr().err
    assert f"shared store lost: {lost_replica.shared_lost}; replica-a decides alone" in err
    assert lost_replica.shared_lost is not None
    assert lost_replica.shared_lost.startswith("127.0.0.1:1/0: ")


async def test_a_lost_store_leaves_the_exit_status_to_the_verdict(
    lost_replica: Engine, lost_feed: FeedServer, viewer_token: str
) -> None:
    assert await status(lost_feed.url, viewer_token) == 0  # nothing open: still 0
    for _ in range(3):
        call(lost_replica, "ava", AUTH)  # counted alone: the replica still trips
    assert await status(lost_feed.url, viewer_token) == 1


async def test_status_json_carries_the_shared_stores_health(
    lost_replica: Engine, lost_feed: FeedServer, viewer_token: str, capsys
) -> None:
    await status(lost_feed.url, viewer_token, as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert report["shared_store"] == "lost"
    assert report["shared_store_reason"] == lost_replica.shared_lost


async def test_status_of_a_replica_whose_store_answers_says_ok(
    session_redis: RedisServer, tmp_path: Path, viewer_token: str, capsys
) -> None:
    engine = replica(session_redis.url, tmp_path / "state")
    try:
        async with served(engine) as feed:
            assert await status(feed.url, viewer_token) == 0
    finally:
        engine.close()
    err = capsys.readouterr().err
    assert "shared store ok" in err
    assert "shared store lost" not in err
