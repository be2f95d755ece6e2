"""The drain's end, as a process: a call still waiting for its platform when `drain_seconds`
runs out, or when a second SIGTERM ends the drain, gets the gateway's own answer and an audit
row, never uvicorn's text 500; and the exporters' flush is bounded after the audit log's."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from breakerdeck.engine.storage.audit import AuditLog
from breakerdeck.fixtures.faults import TIMEOUT
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, free_socket, write_config
from tests.front.test_gateway_process import Gateway, stops_accepting


@dataclass
class Stopped:
    """What a gateway stopped with calls hanging on its platform left behind."""

    answers: list[httpx.Response]
    #: (call id, outcome, counted) of each `call.failed` row, sorted.
    rows: list[tuple[str, str, bool]]
    said: str


async def _stop_with_calls_hanging(
    tmp_path: Path, *, drain_seconds: int, calls: int, second_sigterm: bool
) -> Stopped:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}, hang_seconds=60) as server:
        config = write_config(
            tmp_path,
            {"payments": server.url("payments")},
            {"billing": {"payments": credential_file(tmp_path)}},
            gateway=f"drain_seconds = {drain_seconds}",
        )
        platform.set_fault(TIMEOUT)
        state = tmp_path / "state"
        gateway = Gateway(config, "--state-dir", str(state))
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                hanging = [
                    asyncio.create_task(
                        client.get(gateway.url + f"/p/payments/{n}", headers=auth("billing"))
                    )
                    for n in range(calls)
                ]
                async with asyncio.timeout(30):  # the calls are on the platform's wire, hanging
                    while platform.requests < calls:
                        await asyncio.sleep(0.02)
                gateway.process.send_signal(signal.SIGTERM)
                if second_sigterm:
                    await stops_accepting(gateway.url)
                    assert not any(call.done() for call in hanging)  # the drain waits
                    gateway.process.send_signal(signal.SIGTERM)
                answers = await asyncio.gather(*hanging)
            assert await asyncio.to_thread(gateway.process.wait, 30) == 0
        finally:
            gateway.stop()
    with AuditLog(state / "audit.sqlite3") as audit:
        rows = audit.query(types="call.failed")
    fields = sorted((r.fields["call_id"], r.fields["outcome"], r.fields["counted"]) for r in rows)
    return Stopped(answers, fields, gateway.said())


def _assert_answered_stopping_and_audited(stopped: Stopped) -> None:
    assert {a.status_code for a in stopped.answers} == {503}
    assert {a.json()["error"] for a in stopped.answers} == {"gateway_stopping"}
    call_ids = sorted(a.headers["x-breakerdeck-call"] for a in stopped.answers)
    assert stopped.rows == [(call_id, "gateway_busy", False) for call_id in call_ids]
    assert "Traceback" not in stopped.said


async def test_a_call_cut_by_the_drains_end_gets_its_answer_and_audit_row(
    tmp_path: Path,
) -> None:
    stopped = await _stop_with_calls_hanging(
        tmp_path, drain_seconds=1, calls=1, second_sigterm=False
    )
    _assert_answered_stopping_and_audited(stopped)


async def test_a_second_sigterm_ends_the_drain_with_the_gateways_answer_and_audit_row(
    tmp_path: Path,
) -> None:
    stopped = await _stop_with_calls_hanging(
        tmp_path, drain_seconds=60, calls=3, second_sigterm=True
    )
    assert len(stopped.answers) == 3
    _assert_answered_stopping_and_audited(stopped)


async def test_a_collector_that_never_answers_holds_the_stop_at_most_the_flush_bound(
    tmp_path: Path,
) -> None:
    platform = FakePlatform("payments")
    collector = free_socket()
    collector.listen()  # connections are taken by the kernel and never answered
    endpoint = f"http://127.0.0.1:{collector.getsockname()[1]}"
    with collector, PlatformServer({"payments": platform}) as server:
        config = write_config(
            tmp_path,
            {"payments": server.url("payments")},
            {"billing": {"payments": credential_file(tmp_path)}},
            gateway="drain_seconds = 10",
        )
        state = tmp_path / "state"
        gateway = Gateway(
            config, "--state-dir", str(state), env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
        )
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                answer = await client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
            assert answer.status_code == 200  # a span, metrics and nothing else to send
            started = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(gateway.process.wait, 60) == 0
            stopped_in = time.monotonic() - started
        finally:
            gateway.stop()
    # Nothing in flight: the stop is the audit log's flush, then the exporters' 2 s at most
    # (it took 37 s, the exporters retrying); the rest is margin for a loaded machine.
    assert stopped_in < 8
    assert "exporters did not finish within" in gateway.said()
