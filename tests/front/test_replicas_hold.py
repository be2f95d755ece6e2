"""Hold and release across two gateway replicas sharing a real Redis (DESIGN, "Operator
control: hold and shadow", "Replicas"), as an operator does it: `breakerdeck hold` and
`release` against one replica's feed, the agent's calls through the other. Both replicas run
in-process on one manual clock; the platform is the loopback fixture, counted at its wire."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from breakerdeck.console.cli import main
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.feed.server import FeedServer, serve_feed
from breakerdeck.engine.shared import SharedStore
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.feed.feedkit import OPERATOR, VIEWER
from tests.front.conftest import Rig, StartRig, body, credential_file, write_config
from tests.redis_server import RedisServer
from tests.waiting import eventually

PATH = "/p/payments/v1/charges"


@pytest.fixture
def server() -> Iterator[PlatformServer]:
    with PlatformServer({"payments": FakePlatform("payments")}) as running:
        yield running


@pytest.fixture
async def replicas(
    tmp_path: Path, server: PlatformServer, session_redis: RedisServer, start_gateway: StartRig
) -> tuple[Rig, Rig]:
    """Two gateway replicas on one manual clock, sharing the session's Redis."""
    config = write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"billing": {"payments": credential_file(tmp_path)}},
    )
    clock = ManualClock()
    stores = [SharedStore(session_redis.url, timeout=5) for _ in range(2)]
    a, b = [await start_gateway(config, 25.0, clock=clock, shared=store) for store in stores]
    return a, b


def feed_of(rig: Rig) -> AbstractAsyncContextManager[FeedServer]:
    """The replica's live feed, as `breakerdeck gateway --feed-listen` serves it."""
    return serve_feed(
        rig.engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, source_name="replica"
    )


async def shell(tmp_path: Path, *argv: str) -> int:
    """`breakerdeck <argv> --yes` as an operator types it, with the operator's token file
    (given, so no default token is looked for)."""
    token = tmp_path / "operator.token"
    token.write_text(OPERATOR)
    full = [*argv, "--token-file", str(token), "--operator", "carol", "--yes"]

    def run() -> int:
        try:
            return main(full)
        except SystemExit as exit:
            return int(exit.code or 0)

    return await asyncio.to_thread(run)


def state(rig: Rig) -> str:
    known = rig.engine.keys()
    return rig.engine.view("billing").state if "billing" in known else "unknown"


async def test_a_hold_through_one_replicas_feed_refuses_on_the_other_and_a_release_sends_one_probe(
    tmp_path: Path, server: PlatformServer, replicas: tuple[Rig, Rig]
) -> None:
    platform = server.platforms["payments"]
    a, b = replicas
    for rig in (a, b):
        assert (await rig.call("billing", PATH)).status_code == 200
    async with feed_of(a) as feed:
        hold = ["hold", feed.url, "billing", "--reason", "vendor maintenance", "--for", "30m"]
        assert await shell(tmp_path, *hold) == 0
        await eventually(lambda: state(b) == "held", "the hold on b")
        reached = platform.requests
        for rig in (b, a):
            answer = await rig.call("billing", PATH)
            assert answer.status_code == 403
            assert body(answer)["reason"] == "circuit_breaker_held"
            halt = body(answer)["halt"]
            assert (halt["state"], halt["cause"]) == ("breaker_held", "operator_hold")
            assert halt["retry_after_seconds"] == 1800
        assert platform.requests == reached

        assert await shell(tmp_path, "release", feed.url, "billing", "--reason", "done") == 0
    await eventually(lambda: state(b) == "half_open", "the release on b")
    platform.set_fault(Fault(FaultKind.SLOW, delay=60))  # the probe waits on the wire
    calls = [asyncio.create_task((a, b)[n % 2].call("billing", PATH)) for n in range(20)]
    answered = [await answer for answer in itertools.islice(asyncio.as_completed(calls), 19)]
    assert {body(answer)["reason"] for answer in answered} == {"probe_in_flight"}
    assert {body(answer)["halt"]["cause"] for answer in answered} == {"operator_hold"}
    # The 19 refusals can all be answered before the probe's request reaches the platform:
    # only the probe is left to call it, so its one request is waited for, never a second.
    await eventually(lambda: platform.requests == reached + 1, "the probe's one request")
    (probe,) = [task for task in calls if not task.done()]
    server.release()
    assert (await probe).status_code == 200
    await eventually(lambda: state(a) == state(b) == "closed", "closed on both")


async def test_shadow_through_one_replicas_feed_lets_an_open_agent_through_on_the_other(
    tmp_path: Path, server: PlatformServer, replicas: tuple[Rig, Rig]
) -> None:
    platform = server.platforms["payments"]
    a, b = replicas
    platform.set_fault(Fault(FaultKind.REFUSED))
    for n in range(5):
        await (a, b)[n % 2].call("billing", PATH)
    await eventually(lambda: state(a) == state(b) == "open", "open on both")
    async with feed_of(a) as feed:
        mode = ["mode", feed.url, "billing", "shadow", "--reason", "trying the breaker"]
        assert await shell(tmp_path, *mode) == 0
    await eventually(lambda: b.engine.view("billing").mode == "shadow", "shadow on b")
    reached = platform.requests
    answer = await b.call("billing", PATH)
    assert answer.status_code == 502  # the platform's own answer, not the breaker's refusal
    assert platform.requests == reached + 1
