"""`breakerdeck mcp`: an MCP server to the host in front of upstream MCP servers, one `tool`
policy breaker per `<server>@<credential id>` (DESIGN, "`breakerdeck mcp`").

Built on the SDK's lowlevel server, which serves both protocol eras on one connection. The
tool list is stable: each upstream's tools as it listed them (this run, or the last one, from
the state dir), in a fixed order, whatever the breakers do; breaker state lives in results.
Hosts hear of a list change (`notifications/tools/list_changed` in the handshake era, a
tools-changed event on `subscriptions/listen` in the 2026-07-28 era) only when an upstream's
own list changes, at most once a second, unless `annotate_unavailable` asks for the old
`Unavailable` line (then on every transition too). Every answer the proxy makes itself is a
`CallToolResult` with `isError: true` and the policy's object as `structuredContent`; the
model never sees a JSON-RPC error for a breaker decision.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from breakerdeck.engine import results
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.mcp import classify, status
from breakerdeck.engine.front.mcp.breakers import ANNOUNCED, Breakers, FrontClock, ServerState
from breakerdeck.engine.front.mcp.call import Answer, ToolCalls, own_result
from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.engine.front.mcp.settings.config import (
    SEPARATOR,
    START_DEADLINE_SECONDS,
    ProxyConfig,
)
from breakerdeck.engine.front.mcp.unavailable import annotated
from breakerdeck.engine.front.mcp.upstream import Upstream
from breakerdeck.engine.results import ToolResult
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

#: After these, file and command credentials are read again (DESIGN): the upstream restarts.
REREAD = frozenset({"credential.restored", "circuit_breaker_reset"})
#: A server whose tools could not be listed is tried again at most this often (engine clock).
RELIST_SECONDS = 30.0
#: Hosts hear of list changes at most this often (real seconds): a list that changes every
#: second must not bust a host's prompt cache every second.
ANNOUNCE_SECONDS = 1.0
#: After a handler returns, this long for its answer to reach the host.
ANSWER_FLUSH_SECONDS = 0.1


class Proxy:
    def __init__(
        self,
        config: ProxyConfig,
        breakers: Breakers,
        clock: FrontClock,
        *,
        errlog: TextIO = sys.stderr,
        upstream_mode: str = "auto",
        start_deadline: float = START_DEADLINE_SECONDS,
        lists: StoredLists | None = None,
    ) -> None:
        self.config = config
        self.breakers = breakers
        self.clock = clock
        self.errlog = errlog
        self.lists = lists or StoredLists(None)
        self.upstreams = {
            name: Upstream(
                name,
                server,
                on_tools_changed=self._tools_changed,
                errlog=errlog,
                mode=upstream_mode,
                start_deadline=start_deadline,
                lists=self.lists,
            )
            for name, server in config.servers.items()
        }
        self._keys = {
            self.breakers.key(name, server.credential_id): name
            for name, server in config.servers.items()
        }
        for key, name in self._keys.items():
            breakers.engine.configure_mode(key, config.servers[name].mode)
        self._hosts: dict[int, Any] = {}
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self.calls = ToolCalls(breakers, clock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_send, self._wake_receive = anyio.create_memory_object_stream[None](1)
        self._group: anyio.abc.TaskGroup | None = None
        self._relisted: dict[str, float] = {}
        #: Whether any host has been given a list yet, and how many lists wait for a first
        #: start: a server's first list is news only to a host that was given one without it.
        self._served = False
        self._waiting = 0
        #: Requests of any kind waiting for a first start (the end of input lets them end).
        self._held = 0
        #: Set on the first SIGTERM: new calls are refused, those in flight finish.
        self.draining = False
        self._in_flight = 0
        self._idle = anyio.Event()
        self.server = self._build_server()

    # -- the host-facing server --------------------------------------------------------------

    def _build_server(self) -> Server:
        server = Server(
            "breakerdeck-mcp",
            version="0.1.0",
            instructions=(
                "Tools are relayed to their servers through circuit breakers. A tool whose "
                "server is failing stays listed; a call to it is answered at once with a "
                "structured result saying why and when to retry."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        server.middleware.append(self._remember_host)
        server.middleware.append(self._object_arguments)
        return server

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def _remember_host(self, ctx: ServerRequestContext, call_next: Any) -> Any:
        """Handshake-era hosts get list changes on their connection's own channel."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = getattr(ctx.session, "_connection", ctx.session)
            self._hosts.setdefault(id(connection), ctx.session)
        return await call_next(ctx)

    async def _object_arguments(self, ctx: ServerRequestContext, call_next: Any) -> Any:
        """`arguments` that are not an object are the caller's to fix: an `invalid_request`
        result like every answer the proxy makes itself, not the SDK's -32602."""
        params = ctx.params if ctx.method == "tools/call" else None
        if isinstance(params, Mapping):
            arguments, name = params.get("arguments"), params.get("name")
            if arguments is not None and not isinstance(arguments, dict) and isinstance(name, str):
                return await self._call_tool(ctx, types.CallToolRequestParams(name=name), arguments)
        return await call_next(ctx)

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed: list[types.Tool] = []
        self._waiting += 1
        try:
            for upstream in self.upstreams.values():
                await self._first_start(upstream)
        finally:
            self._waiting -= 1
        for name, upstream in self.upstreams.items():
            state = self._state(name)
            if not upstream.tools and state.available:
                self._list_again(upstream)
            for tool in upstream.tools.values():
                listed.append(self._shown(name, tool, state))
        if self.config.proxy.status_tool:
            listed.append(status.TOOL)
        self._served = True
        # With `annotate_unavailable` a listing must not be served from a cache across a
        # transition; a stable list only changes with an upstream's, which is announced.
        return types.ListToolsResult(tools=listed, ttl_ms=0)

    def _shown(self, server: str, tool: types.Tool, state: ServerState) -> types.Tool:
        """The upstream's tool under its proxied name, its own words unchanged unless the
        `Unavailable` line is asked for."""
        if self.config.proxy.annotate_unavailable:
            return annotated(server, tool, state)
        return tool.model_copy(update={"name": f"{server}{SEPARATOR}{tool.name}"})

    def _state(self, server: str) -> ServerState:
        config = self.config.servers[server]
        return self.breakers.state(self.breakers.key(server, config.credential_id))

    async def _call_tool(
        self,
        ctx: ServerRequestContext,
        params: types.CallToolRequestParams,
        arguments: Any = None,
    ) -> Answer:
        """A host's call: the status tool, or an upstream's tool on the one call path
        (`arguments` overrides the params' when they are not an object)."""
        called = params.name
        if called == status.NAME and self.config.proxy.status_tool:
            return self.status()
        server, _, tool_name = called.partition(SEPARATOR)
        upstream = self.upstreams.get(server)
        if upstream is not None:
            await self._first_start(upstream)
        tool = upstream.tools.get(tool_name) if upstream is not None else None
        if upstream is None or tool is None:
            return own_result(_unknown_tool(called, self.upstreams))
        if self.draining:
            return own_result(results.refused(called, "the proxy is shutting down; call again"))
        self._in_flight += 1
        try:
            given = params.arguments if arguments is None else arguments
            return await self.calls.call(ctx, upstream, tool, called, given)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self.draining:
                self._idle.set()

    def status(self) -> types.CallToolResult:
        """`breakerdeck__status`: every server's breaker, as the model may plan with it."""
        now = self.clock.wall()
        lines = []
        for name, server in self.config.servers.items():
            key = self.breakers.key(name, server.credential_id)
            view = self.breakers.view(key)
            held = view is not None and view.state == State.HELD
            words = self.breakers.open_reason(key) if held else ""
            lines.append(status.server_status(name, key, view, now, words))
        return status.result(lines)

    async def settled(self) -> None:
        """Returns soon when no request waits for a first start; else once every first start
        has ended and the requests that waited have had time to be answered."""
        await anyio.sleep(ANSWER_FLUSH_SECONDS)  # the last lines read reach their handlers
        if not self._held:
            return
        for upstream in self.upstreams.values():
            await upstream.settled.wait()
        await anyio.sleep(ANSWER_FLUSH_SECONDS)

    async def _first_start(self, upstream: Upstream) -> None:
        """A server never listed (no stored list) is waited for while its first start lasts
        (at most the start deadline): a host that never rereads the list would not see it at
        all. One with a list, this run's or the last run's, is never waited for."""
        if upstream.tools or upstream.settled.is_set():
            return
        self._held += 1
        try:
            await upstream.settled.wait()
        finally:
            self._held -= 1

    def stop_taking_calls(self) -> None:
        """The drain began: a new call is answered `refused`, those in flight go on."""
        self.draining = True

    def end_calls(self) -> None:
        """The drain ended: the calls in flight are answered `refused` now, and audited."""
        self.calls.end_all()

    async def idle(self) -> None:
        """Returns once no call is in flight (after `draining` is set)."""
        if self._in_flight:
            await self._idle.wait()

    def _list_again(self, upstream: Upstream) -> None:
        """A server that could not start at launch is tried again when a host lists tools
        (while its breaker is closed, at most once per `RELIST_SECONDS`); its tools arrive with
        a list-change announcement."""
        now = self.clock.monotonic()
        if (
            self._group is None
            or now - self._relisted.get(upstream.name, -math.inf) < RELIST_SECONDS
        ):
            return
        self._relisted[upstream.name] = now

        async def start() -> None:
            with suppress(classify.StartFailed):
                await upstream.ensure()

        self._group.start_soon(start)

    # -- announcements -------------------------------------------------------------------------

    def _tools_changed(self, first: bool) -> None:
        """An upstream's own list changed: hosts hear of it, unless it is a server's first list
        and no host can have missed it (none was given a list yet, or the lists being answered
        wait for it)."""
        if first and (not self._served or self._waiting):
            return
        self.announce()

    def announce(self) -> None:
        """Ask for one list-change announcement soon (coalesced; any thread)."""
        loop = self._loop
        if loop is None:
            return
        loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._wake_send.send_nowait(None)

    def _on_event(self, event: Event) -> None:
        server = self._keys.get(event.key)
        if server is None or event.type not in ANNOUNCED:
            return
        if self.config.proxy.annotate_unavailable:  # the descriptions changed
            self.announce()
        if event.type in REREAD and self._loop is not None:
            # The operator fixed the credential: the next admitted attempt starts the upstream
            # again and reads a file or command credential anew.
            self._loop.call_soon_threadsafe(self.upstreams[server].drop)

    async def _announcer(self) -> None:
        """One announcement per wake, then a pause: wakes meanwhile make one more after it."""
        async for _ in self._wake_receive:
            await self._bus.publish(ToolsListChanged())
            for key, session in list(self._hosts.items()):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # the host went away: stop announcing to it
                    self._hosts.pop(key, None)
            await anyio.sleep(ANNOUNCE_SECONDS)

    # -- lifetime ------------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Proxy]:
        """Serving at once: upstreams start in the background, list changes are announced,
        until the block ends."""
        self._loop = asyncio.get_running_loop()
        unsubscribe = self.breakers.subscribe(self._on_event)
        for problem in self.lists.problems:
            print(f"breakerdeck mcp: {problem}", file=self.errlog, flush=True)
        try:
            async with anyio.create_task_group() as group:
                for upstream in self.upstreams.values():
                    upstream.attach(group)
                self._group = group
                group.start_soon(self._announcer)
                for upstream in self.upstreams.values():
                    group.start_soon(self._start_at_launch, upstream)
                try:
                    yield self
                finally:
                    for upstream in self.upstreams.values():
                        upstream.drop()
                    self._listen.close()
                    self._group = None
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()

    async def _start_at_launch(self, upstream: Upstream) -> None:
        """Started to be listed, not called: a failure is said, never counted, and a server
        whose verdict is not closed is left for the call its breaker admits."""
        self._relisted[upstream.name] = self.clock.monotonic()
        try:
            if self._state(upstream.name).available:
                await upstream.ensure()
        except classify.StartFailed as error:
            if upstream.tools:
                then = "it is listed from its last run's tools; a call starts it"
            else:
                then = (
                    "its tools are left out until it starts (tried again when a host lists tools)"
                )
            line = f"{upstream.name}: could not start: {error}; {then}"
            upstream.problems.append(line)
            print(f"breakerdeck mcp: {line}", file=self.errlog, flush=True)
        finally:
            upstream.settled.set()

    @property
    def problems(self) -> list[str]:
        problems = list(self.lists.problems)
        return problems + [line for up in self.upstreams.values() for line in up.problems]


def _unknown_tool(called: str, upstreams: dict[str, Upstream]) -> ToolResult:
    names = sorted(
        f"{name}{SEPARATOR}{tool}" for name, up in upstreams.items() for tool in up.tools
    )
    shown = ", ".join(names[:20]) or "none"
    more = f" and {len(names) - 20} more" if len(names) > 20 else ""
    return results.invalid_request(
        printable(called)[:100], f"no tool named {printable(called)[:100]!r}; known: {shown}{more}"
    )
