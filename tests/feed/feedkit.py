"""Helpers for the feed tests: real loopback sockets, real engine call path."""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.outcomes import Outcome, OutcomeClass

VIEWER = "viewer-token-123"
OPERATOR = "operator-token-456"

AUTH = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail="reauth_failed")
OK = Outcome(OutcomeClass.SUCCESS)


def call(engine: Engine, key: str, outcome: Outcome = OK) -> None:
    """One finished call through the engine's real call path: a `call.completed` line."""
    ticket = engine.enter(
        key=key, agent=key, platform="payments", tool="charge", deadline_seconds=30.0
    )
    if engine.admit(ticket, 90.0).allowed:
        ticket.attempts = 1
        fault = "ok" if outcome is OK else "http_401"
        engine.complete(ticket, outcome, fault=fault, agent_status=200)


def trip(engine: Engine, key: str) -> None:
    for _ in range(3):
        call(engine, key, AUTH)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client(url: str, token: str = VIEWER, **kwargs):
    return connect(url, additional_headers=auth(token), compression=None, **kwargs)


async def receive(ws, timeout: float = 5.0):
    return p.parse_server_message(await asyncio.wait_for(ws.recv(), timeout))


async def request(ws, **fields):
    await ws.send(json.dumps(fields))
    while True:
        message = await receive(ws)
        if isinstance(message, p.AckMessage | p.ErrorMessage):
            return message


async def events_until(ws, seq: int, timeout: float = 5.0) -> list[p.EventRecord]:
    """Events (single or batched) until one with `seq` arrives."""
    seen: list[p.EventRecord] = []
    async with asyncio.timeout(timeout):
        while not seen or seen[-1].seq < seq:
            message = await receive(ws)
            if isinstance(message, p.EventMessage):
                seen.append(message.event)
            elif isinstance(message, p.EventsMessage):
                seen.extend(message.events)
    return seen
