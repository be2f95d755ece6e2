"""Lines of newline-framed JSON-RPC, and the answers JSON-RPC 2.0 owes to lines that are not
one message (DESIGN: a host must never wait for ever on an id).

The SDK hands a line it cannot parse on as an exception and answers nothing, so a host that
sent garbage, a batch or an oversized request would wait on its id for ever. Here each such
line gets JSON-RPC 2.0's answer: -32700 with a null id for a line that is not JSON, -32600 for
JSON that is not a request (with its id when one can be read), a batch refused member by
member in one array (MCP has no batches since the 2025-06-18 revision), and a line over the
size limit -32600 with the id found near its start.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: How much of an oversized line is kept to find its id (the id is near the start).
HEAD_BYTES = 256
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


class Lines:
    """Whole lines from chunks as they arrive; a line over `limit` comes once as its first
    bytes, flagged, and the rest of it is dropped as it arrives (never held in memory)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._dropping = False

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        out: list[tuple[bytes, bool]] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not self._dropping:
                self._buffer += chunk[start:end]
                out.append(self._take())
            self._buffer.clear()
            self._dropping = False
            start = end + 1
        if not self._dropping:
            self._buffer += chunk[start:]
            if len(self._buffer) > self.limit:
                out.append(self._take())
                self._buffer.clear()
                self._dropping = True
        return out

    def end(self) -> list[tuple[bytes, bool]]:
        """The last line when the input ended without a newline."""
        if self._dropping or not self._buffer:
            return []
        return [self._take()]

    def _take(self) -> tuple[bytes, bool]:
        if len(self._buffer) > self.limit:
            return bytes(self._buffer[:HEAD_BYTES]), True
        return bytes(self._buffer), False


def parsed(line: bytes) -> SessionMessage | ValueError:
    """One line of JSON-RPC as the SDK's streams carry it: the message, or why it is not one
    (handed on, not raised: the session answers it and the stream goes on)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


def id_near_start(head: bytes) -> str | int | None:
    found = _ID.search(head)
    if found is None:
        return None
    value = json.loads(found.group(1))
    return value if isinstance(value, str | int) else str(value)


def error_line(identifier: str | int | None, code: int, message: str) -> bytes:
    return _encoded(_error(identifier, code, message))


def _error(identifier: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": identifier, "error": {"code": code, "message": message}}


def _encoded(answer: Any) -> bytes:
    return json.dumps(answer, separators=(",", ":")).encode() + b"\n"


def from_host(line: bytes, oversized: bool, limit: int) -> SessionMessage | bytes | None:
    """A host's line: the message for the session, or the answer owed to it (bytes), or
    None when nothing is owed (a blank line, a malformed notification or response)."""
    if oversized:
        return error_line(id_near_start(line), INVALID_REQUEST, f"a message over {limit} bytes")
    if not line.strip():
        return None
    message = parsed(line)
    if isinstance(message, SessionMessage):
        return message
    try:
        data = json.loads(line)
    except ValueError:
        return error_line(None, PARSE_ERROR, "Parse error: the line is not JSON")
    if isinstance(data, list):
        return _batch(data)
    answer = _invalid(data)
    return None if answer is None else _encoded(answer)


def _invalid(data: Any) -> dict[str, Any] | None:
    """The -32600 owed to JSON that is not a valid message; None for one that needs none."""
    if not isinstance(data, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC object")
    identifier = data.get("id")
    if "method" not in data and ("result" in data or "error" in data):
        return None  # a malformed response: nobody waits on an answer to it
    if "id" not in data and "method" in data:
        return None  # a malformed notification: never answered
    if isinstance(identifier, bool) or not isinstance(identifier, str | int):
        identifier = None
    return _error(identifier, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request")


def _batch(members: list[Any]) -> bytes | None:
    """Refused member by member: each request gets its -32600 in one array, notifications
    nothing; an empty batch is one -32600 (JSON-RPC 2.0, section 6)."""
    if not members:
        return error_line(None, INVALID_REQUEST, "Invalid Request: an empty batch")
    refused = "Invalid Request: MCP has no batches; send each message on its own line"
    answers = []
    for member in members:
        if isinstance(member, dict) and "method" in member and "id" not in member:
            continue
        identifier = member.get("id") if isinstance(member, dict) else None
        if isinstance(identifier, bool) or not isinstance(identifier, str | int):
            identifier = None
        answers.append(_error(identifier, INVALID_REQUEST, refused))
    return _encoded(answers) if answers else None
