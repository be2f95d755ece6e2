"""The fast-fail path: an open breaker's refusals cost no line unless someone reads lines, and
are counted in the metrics either way (the engine keeps the counts, no listener does)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.front.drain import DrainingServer
from breakerdeck.engine.front.gateway.app import GatewayApp
from breakerdeck.engine.front.gateway.config import load
from breakerdeck.engine.front.gateway.options import Options
from breakerdeck.engine.front.gateway.server import uvicorn_config
from breakerdeck.engine.policy import AgentPolicy
from tests.front.conftest import (
    DEADLINE,
    Rig,
    StartRig,
    auth,
    credential_file,
    free_socket,
    write_config,
)
from tests.front.upstream import Recorder

DENIED = 'breakerdeck_denied_calls_total{key="billing",reason="circuit_breaker_open"} 3.0'


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


def _config(tmp_path: Path, platform: Recorder) -> Path:
    cred = credential_file(tmp_path)
    return write_config(
        tmp_path, {"payments": platform.url("/api")}, {"billing": {"payments": cred}}
    )


async def _trip_then_refuse(client: httpx.AsyncClient, url: str) -> list[httpx.Response]:
    for _ in range(5):
        await client.get(url + "/p/payments/garbage", headers=auth("billing"))
    return [await client.get(url + "/p/payments/x", headers=auth("billing")) for _ in range(3)]


async def test_without_a_state_dir_refusals_write_no_line_and_are_still_counted(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    seq = rig.engine.seq
    refused = [await rig.call("billing", "/p/payments/x") for _ in range(3)]
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert rig.engine.seq == seq
    text = (await rig.client.get(rig.url + "/-/metrics")).text
    assert DENIED in text


async def test_with_a_state_dir_each_refusal_is_in_the_audit_log_and_counted(
    tmp_path: Path, platform: Recorder
) -> None:
    config_path = _config(tmp_path, platform)
    config, digests = load(config_path)
    state = tmp_path / "state"
    engine = Engine(AgentPolicy(deadline_seconds=DEADLINE), clock=ManualClock(), state_dir=state)
    app = GatewayApp(config, digests, config_path=config_path, engine=engine)
    sock = free_socket()
    server = DrainingServer(
        uvicorn_config(
            app,
            Options(config_path=config_path, config=config, digests=digests, listen="127.0.0.1:0"),
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with httpx.AsyncClient(timeout=10) as client:
        refused = await _trip_then_refuse(client, url)
        text = (await client.get(url + "/-/metrics")).text
    server.should_exit = True
    await task
    engine.close()
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert DENIED in text
    with sqlite3.connect(state / "audit.sqlite3") as db:
        (lines,) = db.execute("SELECT count(*) FROM events WHERE type = 'call.denied'").fetchone()
    assert lines == 3
