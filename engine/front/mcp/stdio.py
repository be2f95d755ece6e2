"""Stdio transports with a bound on each message: toward a stdio upstream, and the host's.

The SDK's stdio client reads a line of any length (and re-joins its chunks on every read, so a
50 MB answer costs minutes of copying before anything can judge it). This transport keeps at
most `limit` bytes of a line: a longer one is dropped as it arrives and the request it answers
(its id is near the start of the line) gets `RESULT_TOO_LARGE`, which the classifier counts as
`malformed`, the design's "result over the size limit".
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

#: The JSON-RPC error code a too-large answer is delivered as (server-defined range).
RESULT_TOO_LARGE = -32099
#: How long a stdio upstream gets to exit after its stdin closes, then after SIGTERM.
EXIT_GRACE_SECONDS = 2.0
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


@asynccontextmanager
async def bounded_stdio(
    command: list[str], env: dict[str, str] | None, limit: int
) -> AsyncIterator[tuple[Any, Any]]:
    """Start `command` with the SDK's default environment plus `env` only, and speak
    newline-framed JSON-RPC on its pipes."""
    process = await anyio.open_process(
        command, env={**get_default_environment(), **(env or {})}, stderr=sys.stderr
    )
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        assert process.stdout is not None
        async with incoming:
            async for line, oversized in _lines(process.stdout, limit):
                await incoming.send(_message(line, oversized, limit))

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
    """Whole lines; a line over `limit` yields its first bytes once, flagged, and the rest is
    dropped as it arrives."""
    buffer = bytearray()
    dropping = False
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            chunk = await stream.receive()
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if not dropping:
                    buffer += chunk[start:end]
                    yield bytes(buffer), False
                buffer.clear()
                dropping = False
                start = end + 1
            if not dropping:
                buffer += chunk[start:]
                if len(buffer) > limit:
                    yield bytes(buffer[:256]), True
                    buffer.clear()
                    dropping = True


def _message(line: bytes, oversized: bool, limit: int) -> Any:
    if oversized:
        found = _ID.search(line)
        if found is None:
            return ValueError(f"a message over {limit} bytes, with no id near its start")
        identifier = _json_id(found.group(1))
        error = types.ErrorData(code=RESULT_TOO_LARGE, message=f"the result is over {limit} bytes")
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=identifier, error=error))
    return parsed(line)


def parsed(line: bytes) -> SessionMessage | ValueError:
    """One line of JSON-RPC as the SDK's streams carry it: the message, or why it is not one
    (handed on, not raised: the session answers it and the stream goes on)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


def _json_id(raw: bytes) -> str | int:
    value = json.loads(raw)
    return value if isinstance(value, str | int) else str(value)


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
async def host_stdio(limit: int = HOST_MESSAGE_LIMIT) -> AsyncIterator[tuple[Any, Any]]:
    """The host's JSON-RPC on this process's stdin and stdout, whatever files they are.

    Standard output carries nothing but JSON-RPC: the wire is a private copy of fd 1, and fd 1
    itself points at stderr while serving, so a stray print (ours, a library's) lands there.
    A pipe, socket or terminal is read and written on the event loop, without threads, so that
    a SIGTERM stops the proxy while the host keeps its end open (a thread blocked in a read is
    out of any cancellation's reach). A file the loop cannot wait on (a regular file,
    /dev/null) never blocks for long: it goes through anyio's file wrapper, in a worker thread.
    The end of input is the host going away: the read stream ends and so does the serving.
    """
    wire_out = os.dup(1)
    os.dup2(2, 1)
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    async with AsyncExitStack() as stack:
        lines = await stack.enter_async_context(_host_lines(os.dup(0), limit))
        send = await stack.enter_async_context(_host_sink(wire_out))

        async def pump_in() -> None:
            async with incoming:
                async for line in lines:
                    # A line over the limit is dropped and said so (it arrives as the error).
                    await incoming.send(line if isinstance(line, ValueError) else parsed(line))

        async def pump_out() -> None:
            async with outgoing:
                async for item in outgoing:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await send(data.encode() + b"\n")
                    except OSError:  # the host closed its end: it went away
                        group.cancel_scope.cancel()
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


Line = bytes | ValueError


@asynccontextmanager
async def _host_lines(fd: int, limit: int) -> AsyncIterator[AsyncIterator[Line]]:
    """Lines from `fd` (owned: closed on the way out), each a ValueError when over `limit`."""
    if not _pollable(fd):
        async with anyio.wrap_file(os.fdopen(fd, "rb")) as file:
            yield _file_lines(file, limit)
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
        os.fdopen(fd, "rb", buffering=0),
    )
    try:
        yield _pipe_lines(reader)
    finally:
        transport.close()


async def _pipe_lines(reader: asyncio.StreamReader) -> AsyncIterator[Line]:
    while True:
        try:
            line = await reader.readline()
        except ValueError as error:
            yield error
            continue
        except OSError:  # a terminal hung up (EIO): the end of input
            return
        if not line:
            return
        yield line


async def _file_lines(file: anyio.AsyncFile[bytes], limit: int) -> AsyncIterator[Line]:
    async def readline() -> bytes:  # at most limit + 1 bytes: AsyncFile.readline has no bound
        return await anyio.to_thread.run_sync(file.wrapped.readline, limit + 1)

    while line := await readline():
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := await readline()) and not rest.endswith(b"\n"):
                pass
            yield ValueError(f"a message over {limit} bytes")
            continue
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
