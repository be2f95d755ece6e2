"""`breakerdeck gateway` as a process: SIGTERM's drain, the feed, memory under a huge upload."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from breakerdeck.engine.feed.client import fetch_snapshot
from breakerdeck.fixtures.faults import TIMEOUT, Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import auth, credential_file, write_config
from tests.front.upstream import Recorder
from tests.waiting import BOUND_SECONDS, eventually


class Gateway:
    """A gateway process and the addresses it printed."""

    def __init__(self, config: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "breakerdeck.console.cli",
                "gateway",
                "--config",
                str(config),
                "--listen",
                "127.0.0.1:0",
                *extra,
            ],
            stderr=subprocess.PIPE,
            text=True,
            env=None if env is None else {**os.environ, **env},
        )
        self.lines: list[str] = []
        self.url = self._printed(r"gateway on (http://\S+)")

    def _printed(self, pattern: str) -> str:
        assert self.process.stderr is not None
        for line in self.lines:
            found = re.search(pattern, line)
            if found:
                return found.group(1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            self.lines.append(line)
            found = re.search(pattern, line)
            if found:
                return found.group(1)
            if not line and self.process.poll() is not None:
                break
        raise AssertionError(f"the gateway never printed {pattern!r}: {''.join(self.lines)}")

    def said(self) -> str:
        """Everything the gateway wrote to standard error, once it has exited."""
        assert self.process.stderr is not None and self.process.poll() is not None
        self.lines.append(self.process.stderr.read())
        return "".join(self.lines)

    def rss_peak_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


async def stops_accepting(url: str, seconds: float = 30.0) -> None:
    """Waits until a new connection to the gateway is refused: the drain's first step (uvicorn
    closes its listener, then waits for the calls in flight), so the drain has begun."""
    address = urlsplit(url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            _, writer = await asyncio.open_connection(address.hostname, address.port)
        except ConnectionRefusedError:
            return
        writer.close()
        await writer.wait_closed()
        assert time.monotonic() < deadline, f"the gateway still accepted after {seconds} s"
        await asyncio.sleep(0.02)


@pytest.fixture
def payments() -> Iterator[tuple[FakePlatform, PlatformServer]]:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}, hang_seconds=30) as server:
        yield platform, server


@pytest.fixture
def gateway_config(tmp_path: Path, payments: tuple[FakePlatform, PlatformServer]) -> Path:
    return _billing_on_payments(tmp_path, payments[1])


def _billing_on_payments(tmp_path: Path, server: PlatformServer, gateway: str = "") -> Path:
    """The config: billing calls payments; `gateway`, more of `[gateway]`'s keys."""
    cred = credential_file(tmp_path)
    return write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"billing": {"payments": cred}},
        gateway=gateway,
    )


async def test_sigterm_lets_an_in_flight_call_finish_then_exits_0(
    gateway_config: Path, payments: tuple[FakePlatform, PlatformServer]
) -> None:
    platform, server = payments
    platform.set_fault(Fault(FaultKind.SLOW, delay=60))  # held on the wire until released
    gateway = Gateway(gateway_config)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            call = asyncio.create_task(
                client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
            )
            async with asyncio.timeout(30):
                while platform.requests == 0:
                    await asyncio.sleep(0.02)
            gateway.process.send_signal(signal.SIGTERM)
            await stops_accepting(gateway.url)
            assert not call.done()  # the drain began with the call still held on the wire
            server.release()
            answer = await call
        assert answer.status_code == 200
        assert await asyncio.to_thread(gateway.process.wait, 10) == 0
    finally:
        gateway.stop()


async def test_a_second_sigterm_ends_the_drain_at_once(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer]
) -> None:
    """The drain would last an hour and the platform holds the call 30 s: only the second
    signal ends it, answering the call as the drain's end does (503 `gateway_stopping`)."""
    platform, server = payments
    platform.set_fault(TIMEOUT)
    config = _billing_on_payments(tmp_path, server, "drain_seconds = 3600.0")
    gateway = Gateway(config)
    try:
        async with httpx.AsyncClient(timeout=BOUND_SECONDS) as client:
            call = asyncio.create_task(
                client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
            )
            await eventually(lambda: platform.requests > 0, "the call on the platform's wire")
            gateway.process.send_signal(signal.SIGTERM)
            await stops_accepting(gateway.url)
            assert gateway.process.poll() is None  # the drain waits for the call in flight
            gateway.process.send_signal(signal.SIGTERM)
            answer = await call
        assert (answer.status_code, answer.json()["error"]) == (503, "gateway_stopping")
        assert await asyncio.to_thread(gateway.process.wait, BOUND_SECONDS) == 0
    finally:
        gateway.stop()


async def test_the_feed_serves_the_gateways_breakers_with_serves_tokens(
    tmp_path: Path, gateway_config: Path, payments: tuple[FakePlatform, PlatformServer]
) -> None:
    state = tmp_path / "state"
    gateway = Gateway(gateway_config, "--state-dir", str(state), "--feed-listen", "127.0.0.1:0")
    try:
        feed_url = gateway._printed(r"feed on (ws://\S+)")
        async with httpx.AsyncClient(timeout=10) as client:
            await client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
        token = (state / "viewer.token").read_text().strip()
        snapshot = await fetch_snapshot(feed_url, token, timeout=10)
        assert [b.key for b in snapshot.breakers] == ["billing"]
    finally:
        gateway.stop()


@pytest.fixture
async def sink() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


async def test_a_1_gb_upload_streams_through_in_under_100_mb_of_memory(
    tmp_path: Path, sink: Recorder
) -> None:
    cred = credential_file(tmp_path)
    config = write_config(
        tmp_path,
        {"payments": sink.url("/api")},
        {"billing": {"payments": cred}},
        gateway=f"body_limit_bytes = {2 << 30}",
    )
    gateway = Gateway(config)
    size = 1 << 30
    piece = os.urandom(1 << 20)

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(size // len(piece)):
            yield piece

    try:
        async with httpx.AsyncClient(timeout=120) as client:
            answer = await client.post(
                gateway.url + "/p/payments/upload",
                headers={**auth("billing"), "Content-Length": str(size)},
                content=upload(),
            )
        assert answer.status_code == 200
        assert sink.seen[0].body_bytes == size
        assert gateway.rss_peak_kib() < 100 * 1024
    finally:
        gateway.stop()


async def test_the_demo_runs_agents_through_the_gateway_and_the_feed_shows_a_trip(
    tmp_path: Path,
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "breakerdeck.console.cli",
            "gateway",
            "--demo",
            "--state-dir",
            str(tmp_path / "state"),
            "--listen",
            "127.0.0.1:0",
            "--feed-listen",
            "127.0.0.1:0",
            "--speed",
            "10",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    demo = Gateway.__new__(Gateway)
    demo.process, demo.lines = process, []
    try:
        feed_url = demo._printed(r"feed on (ws://\S+)")
        hint = demo._printed(r"watch it: (breakerdeck watch .*)")
        assert hint == f"breakerdeck watch {feed_url} --token-file {tmp_path}/state/operator.token"
        token = (tmp_path / "state" / "viewer.token").read_text().strip()
        states: dict[str, str] = {}
        for _ in range(100):
            snapshot = await fetch_snapshot(feed_url, token, timeout=10)
            states = {b.key: b.state for b in snapshot.breakers}
            if states.get("billing-assistant") == "open":
                break
            await asyncio.sleep(0.2)
        assert states.get("billing-assistant") == "open"  # payments refuses from t=1
        assert len(states) >= 10
        # The demo's log says the trip, as `breakerdeck gateway`'s does.
        said = demo._printed(r"breakerdeck\.breakers: (tripped billing-assistant: .*)")
        assert said == "tripped billing-assistant: upstream ×5, open 300 s"
    finally:
        demo.stop()


async def test_metrics_listen_serves_the_metrics_on_a_port_of_their_own(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer]
) -> None:
    _, server = payments
    config = _billing_on_payments(tmp_path, server, 'metrics_listen = "127.0.0.1:0"')
    gateway = Gateway(config)
    try:
        metrics_url = gateway._printed(r"metrics on (http://\S+)")
        async with httpx.AsyncClient(timeout=10) as client:
            await client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
            text = (await client.get(metrics_url)).text
        assert 'breakerdeck_breaker_state{key="billing",state="closed"} 1.0' in text
    finally:
        gateway.stop()
