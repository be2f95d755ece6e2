"""Running `breakerdeck mcp`: the engine on its state dir (or an instance under it), the feed,
the metrics, and the proxy served to the host over stdio or streamable HTTP.

In stdio mode standard output is the host's JSON-RPC channel and nothing else: everything the
proxy says goes to standard error, and the host transport points fd 1 at stderr while it
serves, so a stray print from a library cannot corrupt the wire either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from breakerdeck.engine import ToolPolicy
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.front import logs
from breakerdeck.engine.front.mcp.breakers import Breakers
from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.engine.front.mcp.options import McpOptions, say
from breakerdeck.engine.front.mcp.proxy import ANSWER_FLUSH_SECONDS, Proxy
from breakerdeck.engine.front.mcp.stdio import host_stdio
from breakerdeck.engine.front.metrics import Counts, registry_for
from breakerdeck.engine.front.serving import (
    StartError,
    check_feed,
    feed_tokens,
    open_trace,
    split_address,
)
from breakerdeck.engine.front.speed import SpeedClock
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.telemetry import setup as telemetry_setup

#: A held state dir gets at most this many instances under it (hosts start one proxy a window).
MAX_INSTANCES = 64
INSTANCES = "instances"
FEED_URL_FILE = "feed.url"
#: Said once when a person starts the stdio proxy in a terminal, where it would look hung.
TTY_HINT = (
    "speaking MCP (JSON-RPC) on stdin/stdout: an MCP host starts this command itself; "
    "its config entry is in docs/mcp.md (Ctrl-D or Ctrl-C ends it)"
)


def open_engine(
    options: McpOptions, clock: SpeedClock, loop: asyncio.AbstractEventLoop
) -> tuple[Engine, Path | None]:
    """The engine on the state dir, or on the first free `instances/<n>` when another proxy
    holds the dir (a host starts one stdio proxy per window)."""
    policy = ToolPolicy()
    scheduler = clock.scheduler(loop)
    if options.state_dir is None:
        return Engine(policy, clock=clock, scheduler=scheduler), None
    try:
        return Engine(policy, clock=clock, state_dir=options.state_dir, scheduler=scheduler), None
    except StateDirError as error:
        if "in use" not in str(error):
            raise
    for number in range(1, MAX_INSTANCES + 1):
        directory = options.state_dir / INSTANCES / str(number)
        try:
            statedir.prepare(options.state_dir / INSTANCES)
            engine = Engine(policy, clock=clock, state_dir=directory, scheduler=scheduler)
        except StateDirError as error:
            if "in use" in str(error):
                continue
            raise
        return engine, directory
    raise StartError(f"{options.state_dir}: all {MAX_INSTANCES} instances are in use")


@contextlib.asynccontextmanager
async def feed_for(
    engine: Engine, options: McpOptions, instance: Path | None
) -> AsyncIterator[str | None]:
    """The live feed as `serve` has it; an instance serves on an ephemeral loopback port and
    writes its URL to `instances/<n>/feed.url`, where `watch --state-dir` finds it."""
    listen = options.feed_listen
    if instance is not None:
        listen = "127.0.0.1:0"
    if listen is None:
        yield None
        return
    check_feed(listen, options.state_dir)
    assert options.state_dir is not None
    viewer, operator = feed_tokens(options, options.state_dir)
    host, port = split_address(listen)
    async with serve_feed(
        engine, host=host, port=port, viewer_token=viewer, operator_token=operator
    ) as feed:
        if instance is not None:
            statedir.write_private(instance / FEED_URL_FILE, feed.url + "\n")
        say(f"feed on {feed.url}")
        yield feed.url


def start_metrics(engine: Engine, listen: str | None, counts: Counts) -> Any:
    """Prometheus text on `metrics_listen`, read at scrape time from the engine's counts."""
    if listen is None:
        return None
    from prometheus_client import start_http_server

    host, port = split_address(listen)
    server, _thread = start_http_server(port, addr=host, registry=registry_for(engine, counts))
    say(f"metrics on http://{listen}/metrics")
    return server


async def serve(options: McpOptions) -> None:
    """Serve until the host goes away or a signal; the engine is closed on the way out."""
    loop = asyncio.get_running_loop()
    clock = SpeedClock(options.speed)
    trace = open_trace(options.events)
    engine, instance = open_engine(options, clock, loop)
    metrics = None
    stop_telemetry: telemetry_setup.Stop = telemetry_setup.no_stop
    try:
        if trace is not None:
            engine.subscribe(trace.listener(engine.epoch))
        engine.subscribe(logs.say_transitions, calls=False)
        engine.restore()
        problems = list(engine.problems)
        if instance is not None:
            problems.append(
                f"state dir {options.state_dir} is held by another proxy: this one is "
                f"instance {instance.name} ({instance})"
            )
        for problem in problems:
            say(problem)
        counts = Counts()
        metrics = start_metrics(engine, options.metrics_listen, counts)
        stop_telemetry = telemetry_setup.start("mcp", engine, counts, logs.breakers)
        # Tool lists are kept in the dir's root, shared by its instances.
        lists = StoredLists(options.state_dir)
        proxy = Proxy(options.config, Breakers(engine, clock, counts), clock, lists=lists)
        async with feed_for(engine, options, instance), proxy.running():
            await _serve_host(proxy, options)
    finally:
        if metrics is not None:
            metrics.shutdown()
        closes = [engine.close] if trace is None else [engine.close, trace.close]
        telemetry_setup.flush_after(stop_telemetry, *closes)


async def _serve_host(proxy: Proxy, options: McpOptions) -> None:
    if options.http_listen is not None:
        from breakerdeck.engine.front.mcp.host_http import serve_http

        assert options.token_file is not None
        await serve_http(
            proxy, options.http_listen, options.token_file, say
        )  # uvicorn drains on SIGTERM, as the gateway does
        return
    if os.isatty(0):
        say(TTY_HINT)
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signals, proxy, group)
        async with host_stdio(before_end=proxy.settled) as (read, write):
            await proxy.server.run(read, write, proxy.initialization_options())
        group.cancel_scope.cancel()


async def _stop_on_signals(proxy: Proxy, group: anyio.abc.TaskGroup) -> None:
    """The first SIGTERM stops taking calls and lets those in flight finish (each within its
    budget); a second one stops at once."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            if proxy.draining:
                group.cancel_scope.cancel()
                return
            proxy.draining = True
            group.start_soon(_drain, proxy, group.cancel_scope)


async def _drain(proxy: Proxy, scope: anyio.CancelScope) -> None:
    longest = max(server.lease for server in proxy.config.servers.values())
    with anyio.move_on_after(proxy.clock.real(longest)):
        await proxy.idle()
        # The last handler has returned; its answer is written a few steps of the loop later.
        await anyio.sleep(ANSWER_FLUSH_SECONDS)
    scope.cancel()
