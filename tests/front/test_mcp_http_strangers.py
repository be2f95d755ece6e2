"""`mcp --http` as a shared service: what anyone who reaches its port can cost it before the
token is read, bounded by the gateway's own code (`front.protocol`): heads cut at their time
bound, connections per address and in total capped within the open-file limit, a host with
the token served while strangers hold what they may; the sessions hosts keep open, bounded;
and a second SIGTERM's answer to a call in flight (docs/mcp.md)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from breakerdeck.engine.front.drain import DrainingServer
from breakerdeck.engine.front.mcp.host_http import host_server
from breakerdeck.engine.storage.audit import AuditLog
from tests.front.conftest import free_socket
from tests.front.mcp_support import FIXTURE, control, fixture_server, free_port, proxied

COMMAND = [sys.executable, "-m", "breakerdeck.console.cli", "mcp"]
TOKEN = "t" * 32
#: Strangers come from another loopback address than the host, as they would from elsewhere.
STRANGER = "127.0.0.2"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def door(tmp_path: Path, **proxy_table: Any) -> AsyncIterator[str]:
    """`mcp --http`'s host side in this process, over the bench's proxy; yields its URL."""
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir)}, proxy_table=proxy_table) as bench:
        sock = free_socket()
        server: DrainingServer = host_server(bench.proxy, TOKEN, "127.0.0.1:0", print)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            async with asyncio.timeout(30):
                while not server.started:
                    await asyncio.sleep(0.02)
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            server.should_exit = True
            await task


async def initialize(client: httpx.AsyncClient, url: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}", **ACCEPT}
    return await client.post(url, json=INITIALIZE, headers=headers)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


class Strangers:
    """Connections from another address that send the start of a head and never its end
    (each writer kept: a writer collected closes its connection)."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []

    async def half_head(self, port: int) -> asyncio.StreamReader:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(STRANGER, 0))
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
        await writer.drain()
        self.writers.append(writer)
        return reader


@pytest.fixture
async def strangers() -> AsyncIterator[Strangers]:
    held = Strangers()
    yield held
    for writer in held.writers:
        writer.close()


async def test_heads_never_finished_are_cut_at_the_head_timeout(
    tmp_path: Path, strangers: Strangers
) -> None:
    async with door(tmp_path, head_timeout_seconds=0.5) as url:
        readers = [await strangers.half_head(_port(url)) for _ in range(50)]
        async with asyncio.timeout(30):  # cut at 0.5 s; the rest is margin for a loaded box
            answers = await asyncio.gather(*(reader.read() for reader in readers))
    assert {answer.split(b"\r\n", 1)[0] for answer in answers} == {b"HTTP/1.1 408 Request Timeout"}


async def test_a_host_with_the_token_is_served_while_strangers_hold_all_they_may(
    tmp_path: Path, strangers: Strangers
) -> None:
    async with door(tmp_path, max_client_connections_per_address=20) as url:
        held = [await strangers.half_head(_port(url)) for _ in range(20)]
        turned_away = [await strangers.half_head(_port(url)) for _ in range(30)]
        refusals = await asyncio.gather(*(reader.read() for reader in turned_away))
        async with httpx.AsyncClient(timeout=30) as host:
            answer = await initialize(host, url)
        assert not any(reader.at_eof() for reader in held)  # still held, under the bounds
    assert answer.status_code == 200
    assert {json.loads(r.partition(b"\r\n\r\n")[2]).get("limit") for r in refusals} == {
        "max_client_connections_per_address"
    }


async def test_a_session_beyond_max_sessions_is_refused_and_those_kept_still_serve(
    tmp_path: Path,
) -> None:
    async with door(tmp_path, max_sessions=2) as url, httpx.AsyncClient(timeout=30) as host:
        opened = [await initialize(host, url) for _ in range(2)]
        beyond = await initialize(host, url)
        first = opened[0].headers["mcp-session-id"]
        headers = {"Authorization": f"Bearer {TOKEN}", "mcp-session-id": first, **ACCEPT}
        headers["mcp-protocol-version"] = "2025-06-18"
        ping = await host.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers
        )
    assert [r.status_code for r in opened] == [200, 200]
    assert beyond.status_code == 503
    assert "mcp-session-id" not in beyond.headers
    assert ping.status_code == 200


def _lower_open_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


async def test_strangers_past_the_open_file_limit_neither_lock_out_the_host_nor_flood_stderr(
    tmp_path: Path, strangers: Strangers
) -> None:
    """The issue's case as a process: 1,100 unfinished heads under `ulimit -n 1024`, here 300
    under 256, from one address whose bound leaves the host room."""
    ctl = control(tmp_path)
    config = tmp_path / "mcp.toml"
    command = json.dumps([*FIXTURE, "--control", str(ctl.dir)])
    config.write_text(
        f"[proxy]\nmax_client_connections_per_address = 100\n"
        f"[servers.search]\ncommand = {command}\n"
    )
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    port = free_port()
    process = subprocess.Popen(
        [
            *COMMAND,
            "--config",
            str(config),
            "--http",
            f"127.0.0.1:{port}",
            "--token-file",
            str(token),
        ],
        stderr=subprocess.PIPE,
        preexec_fn=lambda: _lower_open_files(256),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    try:
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(timeout=30) as host:
            while True:
                try:
                    await host.get(f"http://127.0.0.1:{port}/mcp")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "mcp --http never listened"
                    await asyncio.sleep(0.1)
            for _ in range(300):
                await strangers.half_head(port)
            answer = await initialize(host, f"http://127.0.0.1:{port}/mcp")
        assert answer.status_code == 200
    finally:
        process.terminate()
        _, errors = await asyncio.to_thread(process.communicate, timeout=30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    said = errors.decode()
    assert process.returncode == 0
    assert "Traceback" not in said
    assert len(said) < 4096, said


async def test_a_second_sigterm_answers_a_call_in_flight_refused_with_its_audit_row(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    ctl.set_mode("hang")
    config = tmp_path / "mcp.toml"
    command = json.dumps([*FIXTURE, "--control", str(ctl.dir)])
    config.write_text(f"[servers.search]\ncommand = {command}\ndeadline_seconds = 120\n")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    state = tmp_path / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    flags = ["--http", f"127.0.0.1:{port}", "--token-file", str(token), "--state-dir", str(state)]
    process = subprocess.Popen([*COMMAND, "--config", str(config), *flags], stderr=subprocess.PIPE)
    try:
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        ) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    await http.get(url)
                    break
                except httpx2.TransportError:
                    assert time.monotonic() < deadline, "mcp --http never listened"
                    await asyncio.sleep(0.1)
            async with Client(streamable_http_client(url, http_client=http)) as host:
                call = asyncio.create_task(host.call_tool("search__lookup", {"query": "q"}))
                async with asyncio.timeout(60):  # the call is on the upstream, hanging
                    while ctl.calls() == 0:
                        await asyncio.sleep(0.05)
                process.send_signal(signal.SIGTERM)
                await _stops_accepting(port)
                assert not call.done()  # the drain waits for the call in flight
                process.send_signal(signal.SIGTERM)
                result = await call
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        _, errors = await asyncio.to_thread(process.communicate, timeout=30)
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["status"] == "refused"
    with AuditLog(state / "audit.sqlite3") as audit:
        rows = audit.query(types="call.failed")
    assert [(r.fields["outcome"], r.fields["counted"]) for r in rows] == [
        ("refused_pre_call", False)
    ]
    assert "Traceback" not in errors.decode()


async def _stops_accepting(port: int) -> None:
    """Until a new connection is refused: uvicorn closed its listener, the drain began."""
    async with asyncio.timeout(30):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except ConnectionRefusedError:
                return
            writer.close()
            await asyncio.sleep(0.02)
