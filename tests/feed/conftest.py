"""Feed tests run on a real loop with real loopback sockets on ephemeral ports."""

from __future__ import annotations

from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.policy import AgentPolicy
from tests.feed.feedkit import OPERATOR, VIEWER


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(clock: ManualClock, tmp_path) -> Engine:
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
async def feed(engine: Engine):
    async with serve_feed(
        engine,
        port=0,
        viewer_token=VIEWER,
        operator_token=OPERATOR,
        source_name="test-engine",
    ) as server:
        yield server


@pytest.fixture
def token_files(tmp_path: Path) -> dict[str, str]:
    """Each role's token in a file, as `--token-file` reads it."""
    paths = {}
    for role, token in (("viewer", VIEWER), ("operator", OPERATOR)):
        path = tmp_path / f"{role}.token"
        path.write_text(f"  {token}\n\n")  # surrounding whitespace is stripped
        paths[role] = str(path)
    return paths
