"""What a watcher sees: a framework's breaker on the engine's feed, and each example run
offline as docs/adapters.md says. These run on a real event loop: real loopback sockets."""

from __future__ import annotations

import asyncio
import runpy
import sys
from pathlib import Path

import pytest

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.server import serve_feed
from tests.adapters.drive_langchain import LangchainDriver
from tests.adapters.support import Crm
from tests.feed.feedkit import OPERATOR, VIEWER, client, receive

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_breaker_a_framework_tripped_is_on_the_feed_under_backend_at_credential(
    engine: Engine, crm: Crm
) -> None:
    async def watched() -> list[p.BreakerInfo]:
        driver = LangchainDriver()
        driver.build(engine, crm, credential="tenant-7")
        crm.down()
        await driver.runs(3)
        async with (
            serve_feed(engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR) as feed,
            client(feed.url) as ws,
        ):
            snapshot = await receive(ws)
            assert isinstance(snapshot, p.SnapshotMessage)
            return snapshot.breakers

    breakers = asyncio.run(watched())
    assert [(b.key, b.state) for b in breakers] == [("crm@tenant-7", "open")]


@pytest.mark.parametrize(
    "example",
    [
        "pydantic_ai_agent",
        "openai_agents_agent",
        "langchain_agent",
        "claude_agent_hooks",
        "google_adk_agent",
    ],
)
def test_each_example_runs_offline_through_the_trip_and_the_recovery(
    example: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", [example, "--state-dir", str(tmp_path / "state")])
    runpy.run_path(str(EXAMPLES / f"{example}.py"), run_name="__main__")
    told = capsys.readouterr().out
    refused = next(line for line in told.splitlines() if line.startswith("  [0 requests]"))
    assert "circuit_open" in refused
    assert told.rstrip().endswith("crm@default is closed; the CRM saw 5 requests")
