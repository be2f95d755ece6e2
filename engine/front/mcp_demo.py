"""`breakerdeck mcp --demo`: the proxy in front of three fixture MCP servers, driven by a
scripted MCP client over streamable HTTP, so `watch` shows a tool breaker trip, probe and
recover with real MCP traffic.

The script breaks one server at a time (a hang, then JSON-RPC internal errors) and mends it a
while later; everything runs on the front doors' sped-up clock (10x unless `--speed` says
otherwise), and the feed is on `--feed-listen` (default 127.0.0.1:8765, `serve`'s port) with
the tokens in the state dir.

Layering: the demo drives the fixture servers, which `engine` must not import; it imports
`FixtureControl` only inside `run_demo` (as the gateway's demo does), and belongs in
`fixtures/` or `console/` once those take it.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from breakerdeck.engine.front.mcp_config import ProxyConfig
from breakerdeck.engine.front.mcp_engine import Breakers
from breakerdeck.engine.front.mcp_http import host_app
from breakerdeck.engine.front.mcp_proxy import Proxy
from breakerdeck.engine.front.mcp_serve import McpOptions, feed_for, open_engine, say
from breakerdeck.engine.front.server import StartError
from breakerdeck.engine.front.speed import SpeedClock

if TYPE_CHECKING:
    from breakerdeck.fixtures.mcp_server import FixtureControl

DEMO_SPEED = 10.0
DEMO_FEED = "127.0.0.1:8765"
#: (simulated second the step starts, server, mode, what the narration says)
SCRIPT = (
    (0, "search", "ok", "all three servers answer"),
    (40, "search", "hang", "search hangs: its lookups time out (two attempts each, idempotent)"),
    (120, "search", "ok", "search answers again: the next probe closes its breaker"),
    (200, "billing", "internal_error", "billing fails with JSON-RPC internal errors"),
    (300, "billing", "is_error", "billing's tools say no (isError): the tool ran, nothing counts"),
    (330, "billing", "ok", "billing mends: its probe closes the breaker"),
)
CALLS = (
    ("search__lookup", {"query": "breakers"}),
    ("billing__charge", {"amount": 42}),
    ("docs__lookup", {"query": "runbook"}),
)


def demo_config(controls: dict[str, FixtureControl]) -> ProxyConfig:
    fixture = [sys.executable, "-m", "breakerdeck.fixtures.mcp_server", "--control"]
    servers: dict[str, Any] = {
        name: {
            "command": [*fixture, str(control.dir)],
            "deadline_seconds": 5.0,
            "backoff_seconds": 1.0,
        }
        for name, control in controls.items()
    }
    return ProxyConfig.model_validate({"servers": servers})


def run_demo(args: argparse.Namespace) -> int:
    from breakerdeck.fixtures.mcp_server import FixtureControl

    speed = DEMO_SPEED if args.speed == 1.0 else args.speed
    work = Path(tempfile.mkdtemp(prefix="breakerdeck-mcp-demo-"))
    controls = {name: FixtureControl(work / name) for name in ("search", "billing", "docs")}
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else work / "state"
    options = McpOptions(
        config_path=work / "demo.toml",
        config=demo_config(controls),
        state_dir=state_dir,
        feed_listen=args.feed_listen or DEMO_FEED,
        metrics_listen=args.metrics_listen,
        speed=speed,
        viewer_token_file=args.viewer_token_file,
        operator_token_file=args.operator_token_file,
    )
    try:
        anyio.run(_demo, options, controls)
    except StartError as error:
        say(str(error))
        return 2
    except KeyboardInterrupt:
        pass
    return 0


async def _demo(options: McpOptions, controls: dict[str, FixtureControl]) -> None:
    clock = SpeedClock(options.speed)
    engine, instance = open_engine(options, clock, asyncio.get_running_loop())
    try:
        engine.restore()
        proxy = Proxy(options.config, Breakers(engine, clock), clock)
        async with feed_for(engine, options, instance), proxy.running():
            say(
                f"demo at {options.speed:g}x; watch it with: breakerdeck watch "
                f"ws://{options.feed_listen} --token-file {options.state_dir}/operator.token"
            )
            await _drive(proxy, controls, clock)
    finally:
        engine.close()


async def _drive(proxy: Proxy, controls: dict[str, FixtureControl], clock: SpeedClock) -> None:
    """The proxy on loopback HTTP and a scripted host calling a tool of each server."""
    token = secrets.token_urlsafe(24)
    server = uvicorn.Server(
        uvicorn.Config(
            host_app(proxy, token, "127.0.0.1"),
            host="127.0.0.1",
            port=0,
            lifespan="on",
            log_level="warning",
        )
    )
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as host,
        ):
            await _script(host, controls, clock)
        server.should_exit = True


async def _script(host: Client, controls: dict[str, FixtureControl], clock: SpeedClock) -> None:
    start = clock.monotonic()
    step = 0
    period = SCRIPT[-1][0] + 60
    while True:
        elapsed = (clock.monotonic() - start) % period
        if step and elapsed < SCRIPT[step - 1][0]:  # the script came round again
            step = 0
        while step < len(SCRIPT) and elapsed >= SCRIPT[step][0]:
            at, name, mode, narration = SCRIPT[step]
            controls[name].set_mode(mode)
            say(f"t={at:>3}s {narration}")
            step += 1
        async with anyio.create_task_group() as group:
            for tool, arguments in CALLS:
                group.start_soon(_call, host, tool, arguments)
        await anyio.sleep(clock.real(5.0))


async def _call(host: Client, tool: str, arguments: dict[str, Any]) -> None:
    result = await host.call_tool(tool, arguments)
    status = "ok"
    if result.is_error:
        status = (result.structured_content or {}).get("status", "isError")
    say(f"  {tool}: {status}")
