"""The opt-in `Unavailable` line (`[proxy] annotate_unavailable = true`): while a server's
breaker is open, half-open or paused, its tools' descriptions begin with a line saying why and
until when (UTC). Off by default: each transition then changes the list, which busts the
host's prompt cache from the tool list onward (docs/mcp.md, the decision).
"""

from __future__ import annotations

import datetime

import mcp_types as types

from breakerdeck.engine.front.mcp.breakers import ServerState
from breakerdeck.engine.front.mcp.settings.config import SEPARATOR
from breakerdeck.engine.state import State


def annotated(server: str, tool: types.Tool, state: ServerState) -> types.Tool:
    """The upstream's tool under its proxied name; while its server is out, the description's
    first line says so (the model keeps seeing the tool and learns why it fails fast)."""
    description = tool.description or ""
    if not state.available:
        description = f"{unavailable_line(state)}\n{description}".rstrip()
    return tool.model_copy(
        update={"name": f"{server}{SEPARATOR}{tool.name}", "description": description}
    )


def unavailable_line(state: ServerState) -> str:
    if state.paused:
        return (
            "Unavailable: its credential was revoked; calls are refused until an operator "
            "marks it fixed."
        )
    if state.state == State.HALF_OPEN:
        return (
            "Unavailable: its server was failing; the next call is let through as a probe and "
            "others are refused until it answers."
        )
    until = _utc(state.until_wall) if state.until_wall is not None else "the cooldown ends"
    return f"Unavailable until {until}: {state.reason}"


def _utc(wall: float) -> str:
    stamp = datetime.datetime.fromtimestamp(wall, datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
