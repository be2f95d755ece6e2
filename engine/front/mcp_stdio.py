"""A stdio upstream as the SDK's client wants a transport, with a bound on each message.

The SDK's stdio client reads a line of any length (and re-joins its chunks on every read, so a
50 MB answer costs minutes of copying before anything can judge it). This transport keeps at
most `limit` bytes of a line: a longer one is dropped as it arrives and the request it answers
(its id is near the start of the line) gets `RESULT_TOO_LARGE`, which the classifier counts as
`malformed`, the design's "result over the size limit".
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
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
