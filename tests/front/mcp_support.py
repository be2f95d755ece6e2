"""The MCP proxy's test bench: the proxy in this process, its host (the SDK's real client) on
the other end of two OS pipes, and each upstream a fixture server in its own process."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from breakerdeck.engine import Engine, ToolPolicy
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.mcp.breakers import Breakers, ManualFrontClock
from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.engine.front.mcp.proxy import Proxy
from breakerdeck.engine.front.mcp.settings.config import ProxyConfig
from breakerdeck.engine.front.mcp.stdio import parsed
from breakerdeck.fixtures.mcp_server import FixtureControl
from tests.waiting import wait_until

#: The `[proxy]` table of a host that wants the opt-in `Unavailable` first line.
ANNOTATED = {"annotate_unavailable": True}
FIXTURE = [sys.executable, "-m", "breakerdeck.fixtures.mcp_server"]
#: The bench's start deadline: DESIGN's 10 s is the product's, and a loaded machine (the suite
#: on two workers beside other work) can take longer to start Python and the SDK, which would
#: fail a test that is not about the deadline. A test of the deadline passes its own.
START_DEADLINE = 30.0
#: How long the HTTP fixture may take to listen, on the same loaded machine.
HTTP_START_SECONDS = 60.0


def fixture_server(control: Path, *extra: str, **settings: Any) -> dict[str, Any]:
    """A `[servers.<name>]` table for a stdio fixture server with the control dir given."""
    return {"command": [*FIXTURE, "--control", str(control), *extra], **settings}


@dataclass
class Bench:
    host: Client
    proxy: Proxy
    engine: Engine
    clock: ManualFrontClock
    errlog: io.StringIO
    notices: list[Any] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    #: Every line the proxy wrote to the host, as bytes on the wire.
    wire: list[bytes] = field(default_factory=list)
    #: Each notice with the (loop) time it arrived.
    arrivals: list[tuple[float, Any]] = field(default_factory=list)

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        return await self.host.call_tool(name, arguments)

    def key(self, server: str, credential: str = "default") -> str:
        return f"{server}@{credential}"

    def state(self, server: str, credential: str = "default") -> str:
        return self.engine.view(self.key(server, credential)).state

    def cool_down(self, seconds: float = 30.0) -> None:
        """Moves the manual clock past a cooldown and lets the engine write the half-open."""
        self.clock.advance(seconds)
        self.engine.poll()


@asynccontextmanager
async def pipe_transport(
    read_fd: int, write_fd: int, wire: list[bytes] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The host's end of two OS pipes, as the SDK's client wants a transport: newline-framed
    JSON-RPC, read and written without threads so that leaving never waits on a blocked read.
    Leaving closes the write end, which the proxy reads as the host going away."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(read_fd, "rb")
    )
    write_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb"))
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        async with incoming:
            while line := await reader.readline():
                if wire is not None:
                    wire.append(line)
                await incoming.send(parsed(line))

    async def pump_out() -> None:
        async with outgoing:
            async for item in outgoing:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                write_transport.write(data.encode() + b"\n")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump_in)
            group.start_soon(pump_out)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()
    finally:
        write_transport.close()
        read_transport.close()


@asynccontextmanager
async def proxied(
    servers: dict[str, dict[str, Any]],
    *,
    host_mode: str = "legacy",
    upstream_mode: str = "auto",
    agent: str | None = "test-agent",
    start_deadline: float = START_DEADLINE,
    proxy_table: dict[str, Any] | None = None,
    state_dir: Path | None = None,
) -> AsyncIterator[Bench]:
    """The proxy over `servers`; `proxy_table` is the config's `[proxy]`, `state_dir` the dir
    its tool lists are kept in (none by default)."""
    config = ProxyConfig.model_validate({"servers": servers, "proxy": proxy_table or {}})
    clock = ManualFrontClock()
    errlog = io.StringIO()
    with Engine(ToolPolicy(), clock=clock) as engine:
        proxy = Proxy(
            config,
            Breakers(engine, clock),
            clock,
            errlog=errlog,
            upstream_mode=upstream_mode,
            start_deadline=start_deadline,
            lists=StoredLists(state_dir),
        )
        async with proxy.running():
            to_proxy = os.pipe()
            to_host = os.pipe()
            proxy_in = anyio.wrap_file(open(to_proxy[0], encoding="utf-8"))  # noqa: SIM115
            proxy_out = anyio.wrap_file(open(to_host[1], "w", encoding="utf-8"))  # noqa: SIM115
            notices: list[Any] = []
            wire: list[bytes] = []

            arrivals: list[tuple[float, Any]] = []

            async def on_message(message: Any) -> None:
                notices.append(message)
                arrivals.append((anyio.current_time(), message))

            async with anyio.create_task_group() as group:

                async def serve() -> None:
                    try:
                        async with stdio_server(proxy_in, proxy_out) as (read, write):
                            await proxy.server.run(read, write, proxy.initialization_options())
                    except* BrokenPipeError:
                        pass  # the host left first, closing the pipe under a write in flight

                group.start_soon(serve)
                info = types.Implementation(name=agent, version="1.0") if agent else None
                try:
                    async with Client(
                        pipe_transport(to_host[0], to_proxy[1], wire),
                        mode=host_mode,
                        client_info=info,
                        message_handler=on_message,
                        cache=None,
                    ) as host:
                        bench = Bench(
                            host,
                            proxy,
                            engine,
                            clock,
                            errlog,
                            notices,
                            wire=wire,
                            arrivals=arrivals,
                        )
                        engine.subscribe(bench.events.append)
                        yield bench
                finally:
                    group.cancel_scope.cancel()
            with suppress(OSError):
                await proxy_in.aclose()
            with suppress(OSError):
                await proxy_out.aclose()


@asynccontextmanager
async def listening(bench: Bench, *, modern: bool = True) -> AsyncIterator[list[Any]]:
    """The events a 2026-era host hears on `subscriptions/listen` while the block runs (none
    for a handshake-era host, which has no such channel)."""
    events: list[Any] = []
    if not modern:
        yield events
        return
    async with (
        anyio.create_task_group() as group,
        bench.host.listen(tools_list_changed=True) as subscription,
    ):

        async def collect() -> None:
            async for event in subscription:
                events.append(event)

        group.start_soon(collect)
        yield events
        group.cancel_scope.cancel()


def control(tmp_path: Path, name: str = "search") -> FixtureControl:
    return FixtureControl(tmp_path / name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def http_fixture(control_dir: Path) -> Iterator[str]:
    """The fixture server on streamable HTTP in its own process; yields its URL."""
    port = free_port()
    command = [*FIXTURE, "--control", str(control_dir), "--http", f"127.0.0.1:{port}"]
    with subprocess.Popen(command) as process:
        try:
            wait_until(lambda: _listening(port), "the HTTP fixture listening", HTTP_START_SECONDS)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
