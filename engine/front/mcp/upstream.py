"""One upstream MCP server as the proxy reaches it: a connection started on demand, its tools.

A connection is owned by one task (the SDK's client must be entered and left in the same
task); calls from any task share its session. A connection that died (the process exited, the
stream closed) is dropped, and the next attempt the breaker admits starts a new one: nothing
here starts a server on its own while calls are refused. Starting and the handshake have a
real-time deadline (`START_DEADLINE_SECONDS`), never sped up.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from breakerdeck.engine.front.mcp.classify import (
    AttemptTimedOut,
    ResultTooLarge,
    StartFailed,
    WireStatus,
)
from breakerdeck.engine.front.mcp.lists import StoredLists, same
from breakerdeck.engine.front.mcp.settings.config import (
    MAX_TOOL_NAME,
    SEPARATOR,
    START_DEADLINE_SECONDS,
    TOOL_NAME,
    ServerConfig,
    command_problem,
)
from breakerdeck.engine.front.mcp.settings.sources import describe, read_env, read_source
from breakerdeck.engine.front.mcp.stdio import bounded_stdio
from breakerdeck.engine.front.mcp.upstream_http import ATTEMPT_META, upstream_transport
from breakerdeck.engine.text import printable

log = logging.getLogger(__name__)

#: A result whose text and data add up to more than this is `malformed` (DESIGN's size limit).
RESULT_LIMIT_BYTES = 16 * 1024 * 1024
#: Each progress notification extends an attempt's deadline by one deadline, at most this often.
MAX_PROGRESS_EXTENSIONS = 10
#: A server that lists more tools than this is refused (its list is not taken), named.
MAX_TOOLS = 1000

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class _Connection:
    client: Client | None = None
    stop: anyio.Event = field(default_factory=anyio.Event)
    dead: bool = False

    def drop(self) -> None:
        self.dead = True
        self.stop.set()


class Upstream:
    """An upstream server: its config, its live connection (if any) and its listed tools."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        on_tools_changed: Callable[[bool], None],
        errlog: TextIO = sys.stderr,
        mode: str = "auto",
        start_deadline: float = START_DEADLINE_SECONDS,
        lists: StoredLists | None = None,
    ) -> None:
        self.name = name
        self.start_deadline = start_deadline
        self.config = config
        self.mode = mode
        self.problems: list[str] = []
        self._lists = lists or StoredLists(None)
        #: The tools as last listed: by the server in this run, else as it listed them last run.
        self.tools: dict[str, types.Tool] = self._relayable(self._lists.load(name) or [])
        #: Set once the first start (in the background, at launch) has ended either way.
        self.settled = anyio.Event()
        self.count_is_error = [re.compile(p) for p in config.count_is_error]
        self._on_tools_changed = on_tools_changed
        self._errlog = errlog
        self._group: anyio.abc.TaskGroup | None = None
        self._connection: _Connection | None = None
        self._starting = anyio.Lock()
        self._env_credential = read_env(config)
        self.wire: dict[str, WireStatus] = {}

    def attach(self, group: anyio.abc.TaskGroup) -> None:
        """The task group connection owners run in: the proxy's own."""
        self._group = group

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.dead

    async def ensure(self) -> Client:
        """The live connection, started now if there is none (once, for concurrent callers)."""
        connection = self._connection
        if connection is not None and not connection.dead and connection.client is not None:
            return connection.client
        async with self._starting:
            connection = self._connection
            if connection is None or connection.dead or connection.client is None:
                connection = await self._start()
                self._connection = connection
            assert connection.client is not None
            return connection.client

    def drop(self) -> None:
        """Forget the connection (it died, or a session expired); the owner task ends it."""
        if self._connection is not None:
            self._connection.drop()
            self._connection = None

    async def _start(self) -> _Connection:
        assert self._group is not None, "attach() the upstream to a task group first"
        if self.config.command is not None and (problem := command_problem(self.config.command)):
            raise StartFailed(problem)
        try:
            connection: _Connection = await self._group.start(self._own)
            return connection
        except StartFailed:
            raise
        except Exception as error:
            raise StartFailed(describe(error)) from None

    async def _own(self, *, task_status: anyio.abc.TaskStatus[_Connection]) -> None:
        """Owns one connection from start to end; never lets an error out into the group.

        The start deadline is the deadline of a scope around the connection's whole life,
        lifted once the tools are listed (and a 2026-era server's list changes subscribed to):
        the client's own task groups must nest inside it."""
        connection = _Connection()
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_deadline) as life:
                async with self._client() as client:
                    listing = await _list_all(client)
                    connection.client = client
                    self._absorb(listing)
                    async with anyio.create_task_group() as watchers:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            # Listening before the first call (a change it causes is heard),
                            # acknowledged within the start deadline.
                            await watchers.start(self._listen, client)
                        life.deadline = math.inf
                        started = True
                        task_status.started(connection)
                        await connection.stop.wait()
                        watchers.cancel_scope.cancel()
            if not started:
                raise StartFailed(f"no answer to the handshake within {self.start_deadline:g} s")
        except StartFailed:
            raise
        except Exception as error:
            if not started:
                raise StartFailed(describe(error), exited=self.config.command is not None) from None
            log.debug("upstream %s: connection ended: %s", self.name, error)
        finally:
            connection.dead = True

    def _client(self) -> Client:
        if self.config.command is not None:
            target: Any = bounded_stdio(
                self.config.command,
                self._stdio_env(),
                RESULT_LIMIT_BYTES,
                cwd=self.config.cwd,
                errlog=self._errlog,
                label=f"breakerdeck mcp: {self.name}",
            )
        else:
            target = self._http_transport()
        return Client(
            target,
            mode=self.mode,
            message_handler=self._on_message,
            client_info=types.Implementation(name="breakerdeck-mcp", version="0.1.0"),
            cache=None,
        )

    def _http_transport(self) -> Any:
        assert self.config.url is not None
        return upstream_transport(self.config.url, self.credential(), self.wire)

    def _stdio_env(self) -> dict[str, str]:
        """Beyond the SDK's default environment: the table's `env`, its secrets (read now),
        then the credential's own variable, which wins."""
        env = dict(self.config.env)
        for var, source in self.config.secret_env.items():
            env[var] = read_source(source, f"secret_env {var}", os.environ.get(source.env or ""))
        credential = self.config.credential
        if credential is not None:
            name = credential.name or credential.env
            assert name is not None
            env[name] = self.credential() or ""
        return env

    def credential(self) -> str | None:
        """The credential's value: an env var as read at start, a file or command now."""
        credential = self.config.credential
        if credential is None:
            return None
        return read_source(credential, "the credential", self._env_credential)

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """A 2026-era upstream announces list changes on `subscriptions/listen`; one that does
        not serve it simply never announces (its tools stay as first listed). Started once the
        subscription is acknowledged, or refused."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                async for _ in subscription:
                    await self.relist()
        except Exception as error:
            log.debug("upstream %s: no list changes: %s", self.name, error)
        finally:
            with contextlib.suppress(RuntimeError):  # already started
                task_status.started()

    async def _on_message(self, message: Any) -> None:
        """The upstream said its tools changed: list them again, then tell the hosts."""
        if isinstance(message, types.ServerNotification) and isinstance(
            message, types.ToolListChangedNotification
        ):
            await self.relist()

    async def relist(self) -> None:
        connection = self._connection
        if connection is None or connection.client is None or connection.dead:
            return
        try:
            with anyio.fail_after(self.start_deadline):
                listing = await _list_all(connection.client)
        except Exception as error:
            self.problems.append(f"{self.name}: could not list tools again: {describe(error)}")
            return
        self._absorb(listing)

    def _absorb(self, listing: list[types.Tool]) -> None:
        """Keep the tools the proxy can relay (and store them, for the next run); say why any
        other one is left out. Hosts hear of it only when the list is not the one they have."""
        if len(listing) > MAX_TOOLS:
            self._problem(f"lists {len(listing)} tools, over {MAX_TOOLS}: its list is refused")
            return
        kept = self._relayable(listing, report=True)
        if same(kept.values(), self.tools.values()):
            return
        first = not self.tools
        self.tools = kept
        if (problem := self._lists.save(self.name, kept.values())) is not None:
            self._problem(problem.removeprefix(f"{self.name}: "))
        self._on_tools_changed(first)

    def _relayable(
        self, listing: list[types.Tool], *, report: bool = False
    ) -> dict[str, types.Tool]:
        kept: dict[str, types.Tool] = {}
        say = self._problem if report else (lambda text: None)
        for tool in listing:
            shown = printable(tool.name)[:80]
            full = f"{self.name}{SEPARATOR}{tool.name}"
            if not TOOL_NAME.fullmatch(tool.name):
                say(f"tool {shown!r} left out: its name has characters hosts refuse")
            elif len(full) > MAX_TOOL_NAME:
                say(f"tool {shown!r} left out: {printable(full)[:70]}… is over {MAX_TOOL_NAME}")
            elif tool.name in kept:
                say(f"tool {shown!r} left out: listed twice (the first is kept)")
            else:
                kept[tool.name] = tool
        return kept

    def _problem(self, text: str) -> None:
        line = f"{self.name}: {text}"
        if line not in self.problems:
            self.problems.append(line)
            print(f"breakerdeck mcp: {line}", file=self._errlog)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        deadline_real: float,
        relay: Progress,
        attempt_id: str,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One attempt. Raises `StartFailed`, `AttemptTimedOut`, `MCPError`, ... for the
        classifier; a dead connection is dropped so the next admitted attempt starts anew."""
        client = await self.ensure()
        extensions = 0
        with anyio.CancelScope(deadline=anyio.current_time() + deadline_real) as scope:

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                nonlocal extensions
                if extensions < MAX_PROGRESS_EXTENSIONS:
                    extensions += 1
                    scope.deadline += deadline_real
                await relay(progress, total, message)

            try:
                result = await client.session.call_tool(
                    tool,
                    arguments,
                    progress_callback=on_progress,
                    meta=self._meta(attempt_id),
                    allow_input_required=True,
                )
            except MCPError as error:
                if error.code == types.CONNECTION_CLOSED:
                    self.drop()
                raise
        if scope.cancelled_caught:
            raise AttemptTimedOut()
        assert isinstance(result, types.CallToolResult | types.InputRequiredResult)
        if isinstance(result, types.CallToolResult) and _size(result) > RESULT_LIMIT_BYTES:
            raise ResultTooLarge(f"the result is over {RESULT_LIMIT_BYTES} bytes")
        return result

    def _meta(self, attempt_id: str) -> Any:
        """Over HTTP, the attempt's id rides in `_meta` so its POST's status can be found."""
        return {ATTEMPT_META: attempt_id} if self.config.url is not None else None

    async def close(self) -> None:
        self.drop()


async def _list_all(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _size(result: types.CallToolResult) -> int:
    total = 0
    for block in result.content:
        text = getattr(block, "text", None) or getattr(block, "data", None) or ""
        total += len(text)
    return total
