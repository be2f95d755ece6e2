"""The drain's end, as a process: a call still waiting for its platform when `drain_seconds`
runs out gets the gateway's own answer and an audit row, never uvicorn's text 500."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx

from breakerdeck.engine.audit import AuditLog
from breakerdeck.fixtures.faults import TIMEOUT
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, write_config
from tests.front.test_gateway_process import Gateway


async def test_a_call_cut_by_the_drains_end_gets_its_answer_and_audit_row(
    tmp_path: Path,
) -> None:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}, hang_seconds=30) as server:
        config = write_config(
            tmp_path,
            {"payments": server.url("payments")},
            {"billing": {"payments": credential_file(tmp_path)}},
            gateway="drain_seconds = 1",
        )
        platform.set_fault(TIMEOUT)
        state = tmp_path / "state"
        gateway = Gateway(config, "--state-dir", str(state))
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                call = asyncio.create_task(
                    client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
                )
                async with asyncio.timeout(30):  # the call is on the platform's wire, hanging
                    while platform.requests == 0:
                        await asyncio.sleep(0.02)
                gateway.process.send_signal(signal.SIGTERM)
                answer = await call
            assert await asyncio.to_thread(gateway.process.wait, 10) == 0
        finally:
            gateway.stop()
    assert answer.status_code == 503
    assert answer.json()["error"] == "gateway_stopping"
    call_id = answer.headers["x-breakerdeck-call"]
    with AuditLog(state / "audit.sqlite3") as audit:
        rows = audit.query(types="call.failed")
    assert [(r.fields["call_id"], r.fields["outcome"], r.fields["counted"]) for r in rows] == [
        (call_id, "gateway_busy", False)
    ]
    assert "Traceback" not in "".join(gateway.lines)
