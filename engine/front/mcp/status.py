"""`breakerdeck__status`, the opt-in tool that tells a model which servers are out and until
when, so it can plan instead of learning by failure (`[proxy] status_tool = true`).

It answers with DESIGN's `{"servers": [...]}` as `structuredContent` (and as JSON text), under
an `outputSchema`. `reason` gives the failure class and counts only: an upstream's own words
(an error message, a tool's text) would reach the model through it, and they are the
upstream's to say, in its own results.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import mcp_types as types

from breakerdeck.engine.events import BreakerView
from breakerdeck.engine.front.mcp.settings.config import RESERVED, SEPARATOR
from breakerdeck.engine.state import State
from breakerdeck.engine.text import counted

NAME = f"{RESERVED}{SEPARATOR}status"
_NULLABLE_STRING = {"type": ["string", "null"]}
_SERVER = {
    "type": "object",
    "properties": {
        "server": {"type": "string"},
        "key": {"type": "string"},
        "state": {"type": "string", "enum": ["closed", "open", "half_open", "paused"]},
        "probe_out": {"type": "boolean"},
        "until": {**_NULLABLE_STRING, "description": "when calls are let through again (UTC)"},
        "retry_after_ms": {"type": ["integer", "null"]},
        "reason": {"type": "string", "description": "the failure class and counts"},
    },
    "required": ["server", "key", "state", "probe_out", "until", "retry_after_ms", "reason"],
}
TOOL = types.Tool(
    name=NAME,
    description=(
        "Which tool servers behind this proxy are failing and until when. Read it before "
        "planning calls to many tools; a call to a failing server is answered at once with "
        "circuit_open and when to retry."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {"servers": {"type": "array", "items": _SERVER}},
        "required": ["servers"],
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)


def server_status(
    server: str, key: str, view: BreakerView | None, now_wall: float
) -> dict[str, Any]:
    """One server's line: its breaker as the model may plan with it."""
    if view is None:  # no call has reached it yet
        return _line(server, key, "closed", False, None, None, "")
    state = "paused" if view.paused else view.state.value
    until = view.reopens_at if view.state == State.OPEN and not view.paused else None
    retry_ms = None if until is None else math.ceil(max(0.0, until - now_wall) * 1000)
    reason = ""
    if view.paused:
        reason = "credential_revoked: calls wait until an operator marks it fixed"
    elif view.count:
        reason = f"{counted(view.count, 'counted failure')} in a row"
        if view.state != State.CLOSED and view.trip_cause:
            reason += f"; tripped by {view.trip_cause}"
        if view.failed_probes:
            reason += f"; {counted(view.failed_probes, 'failed probe')}"
    stamp = None if until is None else _utc(until)
    return _line(server, key, state, view.probe_since is not None, stamp, retry_ms, reason)


def _line(
    server: str,
    key: str,
    state: str,
    probe_out: bool,
    until: str | None,
    retry_after_ms: int | None,
    reason: str,
) -> dict[str, Any]:
    return {
        "server": server,
        "key": key,
        "state": state,
        "probe_out": probe_out,
        "until": until,
        "retry_after_ms": retry_after_ms,
        "reason": reason,
    }


def result(servers: list[dict[str, Any]]) -> types.CallToolResult:
    content = {"servers": servers}
    text = json.dumps(content, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=content
    )


def _utc(wall: float) -> str:
    return datetime.datetime.fromtimestamp(wall, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
