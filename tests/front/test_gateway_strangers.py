"""What anyone who reaches the gateway's port can cost it before a token is read: a bounded
head (size, headers, time), bounded connections per address, and quiet refusals (DESIGN, "A
shared service"). Raw sockets, since well-behaved clients cannot send these."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.front.conftest import Rig, StartRig, credential_file, write_config
from tests.front.upstream import Recorder
from tests.waiting import BOUND_SECONDS, eventually

TOKEN_LINE = b"Authorization: Bearer token-of-billing\r\n"


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


async def _rig(tmp_path: Path, platform: Recorder, start_gateway: StartRig, gateway: str) -> Rig:
    config = write_config(
        tmp_path,
        {"payments": platform.url("/api")},
        {"billing": {"payments": credential_file(tmp_path)}},
        gateway=gateway,
    )
    rig: Rig = await start_gateway(config)
    return rig


async def _open(rig: Rig) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", int(rig.url.rsplit(":", 1)[1]))


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and JSON body of the one answer before the gateway closed the connection."""
    raw = await asyncio.wait_for(reader.read(), 5.0)
    head, _, content = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(content)


async def _send_ignoring_reset(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Send what the gateway may stop reading part way (it answers, then closes)."""
    try:
        for start in range(0, len(data), 65_536):
            writer.write(data[start : start + 65_536])
            await writer.drain()
    except ConnectionError:
        pass


async def test_heads_of_two_megabytes_are_refused_431_without_holding_them(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    head = b"GET /p/payments/x HTTP/1.1\r\nHost: gw\r\nX-Big: " + b"a" * 2_000_000
    tracemalloc.start()
    try:
        connections = [await _open(rig) for _ in range(10)]
        await asyncio.gather(*(_send_ignoring_reset(w, head) for _, w in connections))
        answers = [await _answer(r) for r, _ in connections]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answers == [(431, {"error": "request_head_too_large"})] * 10
    assert peak < 8_000_000  # ten 2 MB heads held would be 20 MB at least
    assert platform.seen == []


async def test_a_head_over_the_bound_sent_in_one_write_is_refused_431_before_the_token(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    reader, writer = await _open(rig)
    writer.write(b"GET /p/payments/x HTTP/1.1\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n")
    assert await _answer(reader) == (431, {"error": "request_head_too_large"})


async def test_a_refused_request_whose_body_trickles_in_is_closed_without_reading_it(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    reader, writer = await _open(rig)
    writer.write(b"POST /p/payments/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000000\r\n\r\nx")

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            while True:
                await asyncio.sleep(0.3)
                writer.write(b"x")
                await writer.drain()

    trickling = asyncio.create_task(trickle())
    try:
        assert await _answer(reader) == (401, {"error": "unauthenticated"})
        # The gateway closed it: the trickle's write failed.
        await asyncio.wait_for(trickling, BOUND_SECONDS)
    finally:
        trickling.cancel()


async def test_twenty_thousand_headers_are_refused_431(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "head_limit_bytes = 1048576")
    reader, writer = await _open(rig)
    headers = b"".join(b"X-%d: 1\r\n" % number for number in range(20_000))
    await _send_ignoring_reset(writer, b"GET /p/payments/x HTTP/1.1\r\n" + headers + b"\r\n")
    assert await _answer(reader) == (431, {"error": "too_many_headers"})
    assert platform.seen == []


async def test_a_head_sent_a_line_at_a_time_is_closed_at_the_head_timeout(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "head_timeout_seconds = 1.0")
    reader, writer = await _open(rig)
    lines = [b"GET /p/payments/x HTTP/1.1\r\n", TOKEN_LINE] + [b"X-Slow: 1\r\n"] * 50

    async def drip() -> None:
        for line in lines:
            writer.write(line)
            await writer.drain()
            await asyncio.sleep(0.2)

    dripping = asyncio.create_task(drip())
    status, answer = await _answer(reader)
    dripping.cancel()
    assert (status, answer) == (408, {"error": "request_timeout"})
    assert platform.seen == []


async def test_a_connection_that_sends_nothing_is_closed_at_the_head_timeout(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "head_timeout_seconds = 0.5")
    reader, _ = await _open(rig)
    assert await asyncio.wait_for(reader.read(), 5.0) == b""


async def test_one_address_holds_at_most_its_connections_and_others_are_still_served(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "max_client_connections_per_address = 3")
    held = [await _open(rig) for _ in range(3)]
    reader, _ = await _open(rig)
    assert await _answer(reader) == (
        503,
        {"error": "too_many_connections", "limit": "max_client_connections_per_address"},
    )
    held.pop()[1].close()

    async def served() -> bool:
        return (await rig.call("billing", "/p/payments/x")).status_code == 200

    await eventually(served, "a call served once the gateway hears of the close")


async def test_a_websocket_upgrade_is_refused_400(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    reader, writer = await _open(rig)
    writer.write(
        b"GET /p/payments/ws HTTP/1.1\r\nHost: gw\r\n" + TOKEN_LINE + b"Connection: Upgrade\r\n"
        b"Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n"
    )
    assert await _answer(reader) == (400, {"error": "upgrade_not_supported"})
    assert platform.seen == []


async def test_a_thousand_malformed_requests_log_one_line_and_the_gateway_serves_on(
    tmp_path: Path,
    platform: Recorder,
    start_gateway: StartRig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    with caplog.at_level(logging.WARNING, logger="breakerdeck.engine.front.protocol"):
        for _ in range(1000):
            reader, writer = await _open(rig)
            writer.write(b"NOT HTTP\x00\r\n\r\n")
            assert (await _answer(reader))[0] == 400
            writer.close()
    refused = [r for r in caplog.records if r.name == "breakerdeck.engine.front.protocol"]
    assert len(refused) == 1
    assert "malformed" in refused[0].getMessage()
    answer = await rig.call("billing", "/p/payments/x")
    assert answer.status_code == 200
