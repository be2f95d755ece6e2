"""`breakerdeck mcp` against the same call made directly and through a bare SDK pass-through
proxy (no breaker), over stdio and streamable HTTP (issue 12). Printed, never asserted.

Each path is driven by the SDK's own client, 16 concurrent callers, against the fixture MCP
server answering at once (`charge`, no output schema):
- added latency p50/p99 (the path's minus the direct call's) and calls/s;
- a refusal's cost while the breaker is open, beside a successful call through the proxy;
- the proxy's own share of its CPU: cProfile on the stdio proxy's process, the time spent in
  breakerdeck's own functions over all the time the process spent.

Targets (issue 12): added p50 ≤ 1.25x the bare pass-through's; refusals answered ≥ 5x faster
than a successful upstream call; the proxy's own code ≤ 10% of its CPU.

Run alone: `.venv/bin/python bench/mcp.py` (`bench/run.py` runs it as a child process: this
file's name would shadow the SDK's `mcp` package in `bench/run.py`'s process).
`bench/mcp.py --bare-proxy …` is the bare pass-through itself (run as a child process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

# Run as a script, this file's folder is first on the path, where this file would shadow the
# SDK's `mcp` package: the repository root goes there instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from bench.common import table_header, table_row, yes  # noqa: E402

PYTHON = sys.executable
CONCURRENCY = 16
CALLS_PER_CALLER = int(os.environ.get("MCP_BENCH_CALLS", "150"))
REFUSALS = 2000
#: Calls by one caller alone: the added latency without queueing behind 15 others.
SEQUENTIAL = 300
TOKEN = "bench-token-" + "x" * 20
FIXTURE = [PYTHON, "-m", "breakerdeck.fixtures.mcp_server"]
HERE = Path(__file__).resolve()


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the bare pass-through: the SDK on both sides, nothing else --------------------------------


def bare_proxy(upstream: str, http: str | None) -> None:
    """A lowlevel SDK server relaying `tools/list` and `tools/call` to one upstream client."""
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        target: Any = upstream
        if not upstream.startswith("http"):
            command = json.loads(upstream)
            target = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(target, cache=None) as client:

            async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
                return await client.session.list_tools()

            async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
                return await client.session.call_tool(params.name, params.arguments)

            server = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
            if http is None:
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                return
            import uvicorn

            host, _, port = http.rpartition(":")
            config = uvicorn.Config(
                server.streamable_http_app(host=host),
                host=host,
                port=int(port),
                log_level="warning",
                lifespan="on",
            )
            await uvicorn.Server(config).serve()

    anyio.run(main)


# -- the paths under test ----------------------------------------------------------------------


@contextlib.contextmanager
def child(command: list[str], port: int | None = None) -> Any:
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL if port else None)
    try:
        if port is not None:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.asynccontextmanager
async def connect(target: Any) -> AsyncIterator[Client]:
    if isinstance(target, str):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(target, http_client=http), cache=None) as client,
        ):
            yield client
    else:
        async with Client(target, cache=None) as client:
            yield client


async def drive(
    client: Client, tool: str, calls: int, callers: int = CONCURRENCY
) -> tuple[list[float], float]:
    """Latencies of `calls` calls by each of `callers` concurrent callers, and the wall time."""
    latencies: list[float] = []

    async def caller() -> None:
        for _ in range(calls):
            began = time.perf_counter()
            await client.call_tool(tool, {"amount": 1})
            latencies.append(time.perf_counter() - began)

    for _ in range(20):  # warm up
        await client.call_tool(tool, {"amount": 1})
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(callers):
            group.start_soon(caller)
    return latencies, time.perf_counter() - began


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def write_config(work: Path, upstream: dict[str, Any]) -> Path:
    path = work / "mcp.toml"
    lines = ["[servers.fx]"]
    for key, value in upstream.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append("deadline_seconds = 5")
    lines.append("attempts = 1")
    path.write_text("\n".join(lines) + "\n")
    return path


def ours_command(config: Path, *extra: str) -> list[str]:
    return [
        PYTHON,
        "-m",
        "breakerdeck.console.cli",
        "mcp",
        "--config",
        str(config),
        *extra,
    ]


def stdio(command: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=command[0], args=command[1:])


async def measure_stdio(work: Path) -> dict[str, Any]:
    control = work / "fx-stdio"
    upstream = [*FIXTURE, "--control", str(control)]
    config = write_config(work, {"command": upstream})
    profile = work / "proxy.prof"
    paths = {
        "direct": (stdio(upstream), "charge"),
        "bare": (stdio([PYTHON, str(HERE), "--bare-proxy", json.dumps(upstream)]), "charge"),
        "ours": (stdio(ours_command(config)), "fx__charge"),
        "profiled": (
            stdio([PYTHON, "-m", "cProfile", "-o", str(profile), *ours_command(config)[1:]]),
            "fx__charge",
        ),
    }
    figures: dict[str, Any] = {}
    for name, (target, tool) in paths.items():
        _progress(f"mcp bench: stdio, {name} ...")
        async with connect(target) as client:
            figures[name] = await drive(client, tool, CALLS_PER_CALLER)
            figures[f"{name}-alone"] = await drive(client, tool, SEQUENTIAL, callers=1)
            if name == "ours":
                figures["refusal"] = await refusals(client, control, tool)
    # The profiled run is for the CPU share only: cProfile slows the proxy it watches.
    figures["own_cpu"] = own_share(profile)
    return figures


async def measure_http(work: Path) -> dict[str, Any]:
    control = work / "fx-http"
    up_port, bare_port, ours_port = free_port(), free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{up_port}/mcp"
    config = write_config(work, {"url": upstream_url})
    token_file = work / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    figures: dict[str, Any] = {}
    fixture = [*FIXTURE, "--control", str(control), "--http", f"127.0.0.1:{up_port}"]
    with child(fixture, up_port):
        bare = [PYTHON, str(HERE), "--bare-proxy", upstream_url, "--http", f"127.0.0.1:{bare_port}"]
        ours = ours_command(
            config, "--http", f"127.0.0.1:{ours_port}", "--token-file", str(token_file)
        )
        for name, command, port, tool in (
            ("direct", None, up_port, "charge"),
            ("bare", bare, bare_port, "charge"),
            ("ours", ours, ours_port, "fx__charge"),
        ):
            _progress(f"mcp bench: streamable HTTP, {name} ...")
            with contextlib.ExitStack() as stack:
                if command is not None:
                    stack.enter_context(child(command, port))
                async with connect(f"http://127.0.0.1:{port}/mcp") as client:
                    figures[name] = await drive(client, tool, CALLS_PER_CALLER // 3)
                    figures[f"{name}-alone"] = await drive(client, tool, SEQUENTIAL, callers=1)
                    if name == "ours":
                        figures["refusal"] = await refusals(client, control, tool)
    return figures


async def refusals(client: Client, control: Path, tool: str) -> list[float]:
    """Trip the breaker (JSON-RPC internal errors), then time the refusals while it is open."""
    from breakerdeck.fixtures.mcp_server import FixtureControl

    FixtureControl(control).set_mode("internal_error")
    for _ in range(3):
        await client.call_tool(tool, {"amount": 1})
    latencies = []
    for _ in range(REFUSALS):
        began = time.perf_counter()
        result = await client.call_tool(tool, {"amount": 1})
        latencies.append(time.perf_counter() - began)
        assert (result.structured_content or {}).get("status") == "circuit_open"
    FixtureControl(control).set_mode("ok")
    return latencies


def own_share(profile: Path) -> float | None:
    """Time in breakerdeck's own functions (tottime) over the process's whole time."""
    if not profile.exists():
        return None
    stats = pstats.Stats(str(profile))
    total = own = 0.0
    for (filename, _, _), row in stats.stats.items():  # type: ignore[attr-defined]
        tottime = row[2]
        total += tottime
        if "breakerdeck/engine" in filename:
            own += tottime
    return own / total if total else None


# -- the table ---------------------------------------------------------------------------------


def render(transport: str, figures: dict[str, Any]) -> list[str]:
    direct = figures["direct"][0]
    base50, base99 = percentile(direct, 0.5), percentile(direct, 0.99)
    rows = []
    added: dict[str, float] = {}
    for name in ("direct", "bare", "ours"):
        latencies, wall = figures[name]
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        rate = len(latencies) / wall
        label = {"direct": "direct", "bare": "bare SDK pass-through", "ours": "breakerdeck mcp"}
        if name == "direct":
            rows.append(
                table_row(f"{label[name]}: p50 / p99 ms", f"{p50 * 1e3:.2f}/{p99 * 1e3:.1f}")
            )
        else:
            added[name] = p50 - base50
            rows.append(
                table_row(
                    f"{label[name]}: added p50 / p99 ms",
                    f"{added[name] * 1e3:.2f}/{(p99 - base99) * 1e3:.1f}",
                )
            )
        rows.append(table_row(f"{label[name]}: calls/s at {CONCURRENCY}", f"{rate:.0f}"))
    alone = percentile(figures["direct-alone"][0], 0.5)
    alone_added = {
        name: percentile(figures[f"{name}-alone"][0], 0.5) - alone for name in ("bare", "ours")
    }
    rows.append(
        table_row(
            "one caller: added p50 ms, bare / ours",
            f"{alone_added['bare'] * 1e3:.2f}/{alone_added['ours'] * 1e3:.2f}",
        )
    )
    lone = alone_added["ours"] / alone_added["bare"] if alone_added["bare"] > 0 else float("inf")
    rows.append(
        table_row(
            "one caller: added p50, ours / bare", f"{lone:.2f}x", "", "≤ 1.25x", yes(lone <= 1.25)
        )
    )
    ratio = added["ours"] / added["bare"] if added["bare"] > 0 else float("inf")
    rows.append(
        table_row(
            f"{CONCURRENCY} callers: added p50, ours / bare",
            f"{ratio:.2f}x",
            "",
            "≤ 1.25x",
            yes(ratio <= 1.25),
        )
    )
    success = percentile(figures["ours"][0], 0.5)
    refusal = percentile(figures["refusal"], 0.5)
    faster = success / refusal
    rows.append(table_row("refusal while open: p50 ms", f"{refusal * 1e3:.2f}"))
    rows.append(table_row("success / refusal p50", f"{faster:.1f}x", "", "≥ 5x", yes(faster >= 5)))
    share = figures.get("own_cpu")
    if share is not None:
        rows.append(
            table_row(
                "proxy's own code, share of its CPU",
                f"{share:.1%}",
                "",
                "≤ 10%",
                yes(share <= 0.10),
            )
        )
    return [f"`breakerdeck mcp` over {transport} (16 concurrent callers)", *table_header(), *rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bare-proxy", default=None)
    parser.add_argument("--http", default=None)
    parser.add_argument("--only", choices=["stdio", "http"], default=None)
    args = parser.parse_args()
    if args.bare_proxy is not None:
        bare_proxy(args.bare_proxy, args.http)
        return
    with tempfile.TemporaryDirectory(prefix="breakerdeck-mcp-bench-") as directory:
        work = Path(directory)
        if args.only in (None, "stdio"):
            stdio_figures = anyio.run(measure_stdio, work)
            print("\n".join(render("stdio", stdio_figures)), flush=True)
        if args.only is None:
            print()
        if args.only in (None, "http"):
            http_figures = anyio.run(measure_http, work)
            print("\n".join(render("streamable HTTP", http_figures)), flush=True)


if __name__ == "__main__":
    main()
