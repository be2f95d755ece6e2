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
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.server.stdio import stdio_server
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
    """The host's JSON-RPC on this process's stdin and stdout, read without threads.

    Standard output carries nothing but JSON-RPC: the wire is a private copy of fd 1, and fd 1
    itself points at stderr while serving, so a stray print (ours, a library's) lands there.
    Reading without a thread lets a SIGTERM stop the proxy while the host keeps its end open
    (the SDK's stdio server reads in a thread, which no cancellation reaches). Standard input
    that is a regular file, not a pipe, falls back to the SDK's transport.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(os.dup(0), "rb", buffering=0),
        )
    except ValueError:
        async with stdio_server() as streams:
            yield streams
        return
    wire_out = os.dup(1)
    os.dup2(2, 1)
    write_transport, write_protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
        os.fdopen(wire_out, "wb", buffering=0),
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    incoming, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        async with incoming:
            while True:
                try:
                    line = await reader.readline()
                except ValueError as error:  # a line over the limit: dropped, said so
                    await incoming.send(error)
                    continue
                if not line:
                    return
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as error:
                    await incoming.send(error)
                    continue
                await incoming.send(SessionMessage(message))

    async def pump_out() -> None:
        async with outgoing:
            async for item in outgoing:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(data.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump_in)
            group.start_soon(pump_out)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()
