"""One connected client's outbox: the event frames queued for it (bounded: one that falls
behind is resynced from a snapshot instead) and the answers to its requests."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection

from breakerdeck.engine.feed import protocol as p

#: Answers a connection may have waiting before the server stops reading its requests.
MAX_PENDING_ANSWERS = 64


@dataclass(eq=False)
class Client:
    """A connection, its role, and what waits to be sent to it."""

    ws: ServerConnection
    role: p.Role
    buffer_limit: int
    frames: deque[tuple[bytes, int, int, list[dict[str, Any]]]] = field(default_factory=deque)
    answers: deque[bytes] = field(default_factory=deque)
    buffered: int = 0
    needs_snapshot: bool = True
    after_seq: int = -1
    snapshots: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: The timer that checks a blocked send is making progress (see FeedServer._send).
    watchdog: asyncio.TimerHandle | None = None
    #: Set while the answer queue has room; reading requests waits for it.
    room: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.room.set()

    def offer(self, frame: bytes, first: int, last: int, records: list[dict[str, Any]]) -> None:
        if self.needs_snapshot:
            return  # the coming snapshot covers it
        if self.buffered + len(frame) > self.buffer_limit and self.frames:
            # Fell behind: drop the backlog, resync from a snapshot when it can take one.
            self.frames.clear()
            self.buffered = 0
            self.needs_snapshot = True
        else:
            self.frames.append((frame, first, last, records))
            self.buffered += len(frame)
        self.wake.set()

    def answer(self, frame: bytes) -> None:
        self.answers.append(frame)
        self.wake.set()
        if len(self.answers) >= MAX_PENDING_ANSWERS:
            self.room.clear()
