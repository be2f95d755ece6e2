"""Streamable HTTP toward an upstream: the SDK's client transport on an HTTP client that sends
the credential as a Bearer and writes down each `tools/call` POST's status and `Retry-After` by
the attempt's id, because the SDK turns every error status without a JSON-RPC body into -32603
(a 403 would read as a counted failure) and a session's 404 into -32600."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from breakerdeck.engine.front.mcp.classify import WireStatus

#: Each attempt's id rides in its request's `_meta` under this key.
ATTEMPT_META = "dev.breakerdeck/attempt"
SESSION_HEADER = "mcp-session-id"
#: Statuses that are kept only until the attempt reads them; an attempt that never does (the
#: host cancelled) must not leave its entry behind forever.
MAX_KEPT = 4096


@asynccontextmanager
async def upstream_transport(
    url: str, credential: str | None, wire: MutableMapping[str, WireStatus]
) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client transport, its statuses recorded from the wire."""

    async def record(response: httpx2.Response) -> None:
        if response.request.method != "POST" or response.status_code < 400:
            return
        attempt = _attempt_of(response.request.content)
        if attempt is None:
            return
        if len(wire) >= MAX_KEPT:
            wire.clear()
        wire[attempt] = WireStatus(
            response.status_code,
            response.headers.get("retry-after"),
            had_session=SESSION_HEADER in response.request.headers,
        )

    headers = {"Authorization": f"Bearer {credential}"} if credential else None
    async with create_mcp_http_client(headers=headers) as client:
        client.event_hooks["response"].append(record)
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


def _attempt_of(content: bytes) -> str | None:
    """The attempt id in a `tools/call` body, or None for any other message."""
    if b"tools/call" not in content:
        return None
    try:
        message = json.loads(content)
    except ValueError:
        return None
    meta = (message.get("params") or {}).get("_meta") or {}
    attempt = meta.get(ATTEMPT_META) if isinstance(meta, dict) else None
    return attempt if isinstance(attempt, str) else None
