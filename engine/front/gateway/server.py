"""Running the gateway: the engine on the sped-up clock, uvicorn, the feed, SIGTERM's drain.

On the first SIGTERM (or Ctrl-C) uvicorn stops accepting, lets in-flight calls finish for at
most `drain_seconds` (real seconds), then cancels what is left (open streams too): a call
still waiting for its head is answered 503 `gateway_stopping` and audited. A second signal
ends the drain at once the same way (`front.drain`). The engine then flushes its audit log,
the exporters theirs in what is left of 2 s, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import uvicorn

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.front import logs
from breakerdeck.engine.front.drain import DrainingServer
from breakerdeck.engine.front.gateway.app import GatewayApp
from breakerdeck.engine.front.gateway.options import Options, say
from breakerdeck.engine.front.protocol import SPARE_FDS, door_config
from breakerdeck.engine.front.serving import (
    OPERATOR_TOKEN_FILE,
    StartError,
    check_feed,
    feed_tokens,
    open_trace,
    split_address,
)
from breakerdeck.engine.front.speed import SpeedClock
from breakerdeck.engine.shared import SharedStore
from breakerdeck.engine.storage.tracefile import TraceFile
from breakerdeck.engine.telemetry import setup as telemetry_setup

log = logging.getLogger(__name__)


def uvicorn_config(app: GatewayApp, options: Options) -> uvicorn.Config:
    """uvicorn as every door runs it (`front.protocol.door_config`), for the agents' port: the
    connections the platforms may take kept back from strangers', and in-flight calls given
    `drain_seconds` on SIGTERM."""
    gateway = options.config.gateway
    return door_config(
        app,
        options.listen,
        gateway,
        reserved=gateway.max_connections + SPARE_FDS,
        drain_seconds=gateway.drain_seconds,
        backlog=2048,
        say=say,
    )


def open_shared(options: Options) -> SharedStore | None:
    """The shared store when one is configured. Nothing is sent yet: a Redis that is down at
    start leaves the gateway running on degraded local breakers, which `problems` lists."""
    if options.shared is None:
        return None
    shared = options.shared
    try:
        store = SharedStore(
            shared.url,
            password=shared.password,
            sentinel_password=shared.sentinel_password,
            prefix=shared.prefix,
            timeout=shared.timeout,
        )
    except ValueError as error:
        raise StartError(f"gateway: shared store: {error}") from None
    say(f"shared breakers on {store.describe()} (prefix {shared.prefix})")
    return store


def clock_anchor(options: Options, store: SharedStore | None) -> float | None:
    """Where the sped-up clock runs from. Replicas sharing deadlines must read one time, so the
    first to start stores its anchor (`--clock-anchor`, else its start) and the others adopt
    it; `--clock-anchor` still wins in its own process, and a mismatch that would skew this
    replica's clock from the fleet's is said at start."""
    if store is None:
        return options.clock_anchor
    proposed = time.time() if options.clock_anchor is None else options.clock_anchor
    fleet = store.anchor(proposed)
    if options.clock_anchor is None:
        return fleet
    if fleet != options.clock_anchor and options.speed != 1:
        say(
            f"--clock-anchor {options.clock_anchor!r} differs from the shared store's "
            f"{fleet!r}: at --speed {options.speed:g} this replica's deadlines differ from "
            "the others'"
        )
    return options.clock_anchor


def open_engine(
    options: Options,
    loop: asyncio.AbstractEventLoop,
    store: SharedStore | None = None,
    trace: TraceFile | None = None,
) -> Engine:
    """The engine on the sped-up clock, `--clock-anchor` or the fleet's anchor; the trace
    listens from before the restore, so restored verdicts are its first lines."""
    clock = SpeedClock(options.speed, clock_anchor(options, store))
    engine = Engine(
        options.policy,
        clock=clock,
        state_dir=options.state_dir,
        scheduler=clock.scheduler(loop),
        shared=store,
    )
    if trace is not None:
        engine.subscribe(trace.listener(engine.epoch))
    engine.subscribe(logs.say_transitions, calls=False)
    engine.restore()
    return engine


@contextlib.asynccontextmanager
async def _maybe_feed(engine: Engine, app: GatewayApp, options: Options) -> AsyncIterator[None]:
    if options.feed_listen is None:
        yield
        return
    check_feed(options.feed_listen, options.state_dir)
    assert options.state_dir is not None
    viewer, operator = feed_tokens(options, options.state_dir)
    host, port = split_address(options.feed_listen)
    async with serve_feed(
        engine, host=host, port=port, viewer_token=viewer, operator_token=operator
    ) as feed:
        app.waits.listen_always()
        say(f"feed on {feed.url}")
        operator_file = options.operator_token_file or options.state_dir / OPERATOR_TOKEN_FILE
        say(f"watch it: breakerdeck watch {feed.url} --token-file {operator_file}")
        yield


async def serve(options: Options, sock: socket.socket | None = None) -> None:
    """Serve until a signal; the engine is closed (its log flushed, then the shared store it
    was given) on the way out."""
    loop = asyncio.get_running_loop()
    trace = open_trace(options.events)
    store = open_shared(options)
    try:
        engine = open_engine(options, loop, store, trace)
    except BaseException:
        if store is not None:
            store.close()
        if trace is not None:
            trace.close()
        raise
    stop_telemetry: telemetry_setup.Stop = telemetry_setup.no_stop
    try:
        app = GatewayApp(
            options.config,
            options.digests,
            config_path=options.config_path,
            engine=engine,
            speed=options.speed,
            shared_lost=None if store is None else lambda: store.lost is not None,
        )
        for problem in engine.problems:
            say(problem)
        stop_telemetry = telemetry_setup.start("gateway", engine, app.counts, logs.breakers)
        stop_metrics = _serve_metrics(app, options)
        server = DrainingServer(uvicorn_config(app, options))
        async with _maybe_feed(engine, app, options):
            if sock is None:
                sock = server.config.bind_socket()
            # Listening before the address is said: a client acting on the line is queued in
            # the backlog until uvicorn accepts, never refused.
            sock.listen(server.config.backlog)
            host, port = sock.getsockname()[:2]
            scheme = "https" if options.config.gateway.tls_cert else "http"
            say(f"gateway on {scheme}://{host}:{port} (speed {options.speed:g}x)")
            try:
                await server.serve(sockets=[sock])
            finally:
                stop_metrics()
    finally:
        closes = [engine.close] if trace is None else [engine.close, trace.close]
        telemetry_setup.flush_after(stop_telemetry, *closes)


def _serve_metrics(app: GatewayApp, options: Options) -> Callable[[], None]:
    """`metrics_listen`: the same metrics on a port of their own too (a scraper that may not
    reach the agents' port), from prometheus-client's own small server thread."""
    address = options.metrics_listen
    if address is None:
        return lambda: None
    from prometheus_client import start_http_server

    host, port = split_address(address)
    httpd, thread = start_http_server(port, host, registry=app.registry)
    say(f"metrics on http://{host}:{httpd.server_port}/metrics")

    def stop() -> None:
        httpd.shutdown()
        thread.join(5)

    return stop


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (uvicorn's `auto` loop only applies when uvicorn makes
    the loop; here we make it): its transports cost a third of asyncio's per request."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)
