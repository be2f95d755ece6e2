"""Stdio transports with a bound on each message: toward a stdio upstream, and the host's.

The SDK's stdio client reads a line of any length (and re-joins its chunks on every read, so a
50 MB answer costs minutes of copying before anything can judge it). This transport keeps at
most `limit` bytes of a line: a longer one is dropped as it arrives and the request it answers
(its id is near the start of the line) gets `RESULT_TOO_LARGE`, which the classifier counts as
`malformed`, the design's "result over the size limit".
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from breakerdeck.engine.front.mcp.wire import Lines, from_host, id_near_start, parsed
from breakerdeck.engine.text import printable

#: The JSON-RPC error code a too-large answer is delivered as (server-defined range).
RESULT_TOO_LARGE = -32099
#: How long a stdio upstream gets to exit after its stdin closes, then after SIGTERM.
EXIT_GRACE_SECONDS = 2.0
#: An upstream's stderr is relayed a line at a time, each cut to this many characters.
STDERR_LINE_CHARS = 2000
READ_BYTES = 65_536


@asynccontextmanager
async def bounded_stdio(
    command: list[str],
    env: dict[str, str] | None,
    limit: int,
    *,
    cwd: str | None = None,
    errlog: TextIO = sys.stderr,
    label: str = "",
) -> AsyncIterator[tuple[Any, Any]]:
    """Start `command` with the SDK's default environment plus `env` only, and speak
    newline-framed JSON-RPC on its pipes. Its stderr reaches `errlog` a line at a time, each
    prefixed with `label` and escaped (DESIGN: text from outside never reaches a terminal raw)."""
    process = await anyio.open_process(
        command,
        env={**get_default_environment(), **(env or {})},
        cwd=cwd,
        stderr=subprocess.PIPE,
    )
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        assert process.stdout is not None
        async with incoming:
            async for line, oversized in _lines(process.stdout, limit):
                await incoming.send(_message(line, oversized, limit))

    async def pump_err() -> None:
        assert process.stderr is not None
        async for line, _ in _lines(process.stderr, STDERR_LINE_CHARS):
            text = printable(line.decode("utf-8", "replace"))[:STDERR_LINE_CHARS]
            print(f"{label}: {text}", file=errlog, flush=True)

    async def pump_out() -> None:
        assert process.stdin is not None
        async with outgoing:
            try:
                async for item in outgoing:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await incoming.aclose()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump_in)
            group.start_soon(pump_err)
            group.start_soon(pump_out)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _lines(
    stream: anyio.abc.ByteReceiveStream, limit: int
) -> AsyncIterator[tuple[bytes, bool]]:
    """Whole lines, each flagged when it was over `limit` (then only its first bytes)."""
    lines = Lines(limit)
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            for line in lines.feed(await stream.receive()):
                yield line
    for line in lines.end():
        yield line


def _message(line: bytes, oversized: bool, limit: int) -> Any:
    if oversized:
        identifier = id_near_start(line)
        if identifier is None:
            return ValueError(f"a message over {limit} bytes, with no id near its start")
        error = types.ErrorData(code=RESULT_TOO_LARGE, message=f"the result is over {limit} bytes")
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=identifier, error=error))
    return parsed(line)


async def _stop(process: anyio.abc.Process) -> None:
    """Close its stdin, give it time to exit, then SIGTERM, then SIGKILL."""
    if process.stdin is not None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await process.stdin.aclose()
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            with suppress(ProcessLookupError):
                stop()
        with anyio.move_on_after(EXIT_GRACE_SECONDS):
            await process.wait()
            break
    with suppress(Exception):
        await process.aclose()


#: The largest message a host may send on stdio (a tools/call with its arguments).
HOST_MESSAGE_LIMIT = 16 * 1024 * 1024


@asynccontextmanager
async def host_stdio(
    limit: int = HOST_MESSAGE_LIMIT, *, before_end: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The host's JSON-RPC on this process's stdin and stdout, whatever files they are.

    Standard output carries nothing but JSON-RPC: the wire is a private copy of fd 1, and fd 1
    itself points at stderr while serving, so a stray print (ours, a library's) lands there.
    A pipe, socket or terminal is read and written on the event loop, without threads, so that
    a SIGTERM stops the proxy while the host keeps its end open (a thread blocked in a read is
    out of any cancellation's reach). A file the loop cannot wait on (a regular file,
    /dev/null) never blocks for long: it goes through anyio's file wrapper, in a worker thread.
    The end of input is the host going away: the read stream ends and so does the serving,
    once `before_end` has returned (the proxy lets the requests that wait for an upstream's
    first start be answered, so that a file of requests read at once is answered as a host's
    would be).
    """
    wire_out = os.dup(1)
    os.dup2(2, 1)
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    writing = anyio.Lock()
    async with AsyncExitStack() as stack:
        lines = await stack.enter_async_context(_host_lines(os.dup(0), limit))
        send = await stack.enter_async_context(_host_sink(wire_out))

        async def write(data: bytes) -> bool:
            """One whole line to the host; False once the host closed its end."""
            async with writing:
                try:
                    await send(data)
                except OSError:  # the host closed its end: it went away
                    group.cancel_scope.cancel()
                    return False
            return True

        async def pump_in() -> None:
            async with incoming:
                async for line, oversized in lines:
                    item = from_host(line, oversized, limit)
                    if isinstance(item, SessionMessage):
                        await incoming.send(item)
                    elif item is not None and not await write(item):
                        return
                if before_end is not None:
                    await before_end()

        async def pump_out() -> None:
            async with outgoing:
                async for item in outgoing:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    if not await write(data.encode() + b"\n"):
                        return

        async with anyio.create_task_group() as group:
            group.start_soon(pump_in)
            group.start_soon(pump_out)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on `fd`: a pipe, a socket or a terminal can; a regular
    file or /dev/null cannot (epoll refuses them, and asyncio would fail in a callback)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


Line = tuple[bytes, bool]


@asynccontextmanager
async def _host_lines(fd: int, limit: int) -> AsyncIterator[AsyncIterator[Line]]:
    """Lines from `fd` (owned: closed on the way out), each flagged when over `limit`."""
    if not _pollable(fd):
        async with anyio.wrap_file(os.fdopen(fd, "rb")) as file:
            yield _file_lines(file, limit)
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
        os.fdopen(fd, "rb", buffering=0),
    )
    try:
        yield _pipe_lines(reader, limit)
    finally:
        transport.close()


async def _pipe_lines(reader: asyncio.StreamReader, limit: int) -> AsyncIterator[Line]:
    lines = Lines(limit)
    while True:
        try:
            chunk = await reader.read(READ_BYTES)
        except OSError:  # a terminal hung up (EIO): the end of input
            chunk = b""
        if not chunk:
            break
        for line in lines.feed(chunk):
            yield line
    for line in lines.end():
        yield line


async def _file_lines(file: anyio.AsyncFile[bytes], limit: int) -> AsyncIterator[Line]:
    lines = Lines(limit)
    while chunk := await anyio.to_thread.run_sync(file.wrapped.read, READ_BYTES):
        for line in lines.feed(chunk):
            yield line
    for line in lines.end():
        yield line


@asynccontextmanager
async def _host_sink(fd: int) -> AsyncIterator[Callable[[bytes], Awaitable[None]]]:
    """Writes to `fd` (owned: closed on the way out), each awaited until it is on its way."""
    if not _pollable(fd):
        async with anyio.wrap_file(os.fdopen(fd, "wb")) as file:

            async def to_file(data: bytes) -> None:
                await file.write(data)
                await file.flush()

            yield to_file
        return
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
        os.fdopen(fd, "wb", buffering=0),
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def to_pipe(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    try:
        yield to_pipe
    finally:
        transport.close()
