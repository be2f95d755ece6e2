"""The agent's connection, watched for the length of one gateway call (DESIGN: an upstream
request and response end when their agent disconnects)."""

from __future__ import annotations

import asyncio
from typing import Any

from breakerdeck.engine.front.protocol import EXTENSION, BoundedProtocol


class Cut:
    """The agent's connection, watched for the length of one call (DESIGN: an upstream
    request and response end when their agent disconnects). When the agent leaves, the
    call's task is cancelled; `uncancel` tells that cancellation (or the drain's end) from
    any other, and `abort` drops a connection whose answer cannot be finished."""

    __slots__ = ("_armed", "_connection", "_task", "agent_left", "happened")

    def __init__(self, scope: dict[str, Any]) -> None:
        self._connection: BoundedProtocol | None = scope.get(EXTENSION)
        self._task = asyncio.current_task()
        self._armed = False
        self.agent_left = False
        self.happened = False
        if self._connection is not None:
            self._connection.watch(self._left)

    def arm(self) -> None:
        """From here the agent's leaving cuts the call short (the exchange, the stream); the
        bookkeeping between them (the completion) is never cut (`disarm`)."""
        self._armed = True
        if self.agent_left:
            self._left()

    def disarm(self) -> None:
        self._armed = False

    def _left(self) -> None:
        self.agent_left = True
        if self._armed and self._task is not None:
            self._armed = False
            self._task.cancel()

    def uncancel(self) -> bool:
        """After a `CancelledError` in the call: True when it was the agent leaving or the
        drain's end (the call ends quietly, its upstream side closed), False to re-raise."""
        task = self._task
        if task is None or not (self.agent_left or task.cancelling()):
            return False
        task.uncancel()
        self.happened = True
        return True

    def write_paused(self) -> bool:
        return self._connection is not None and self._connection.write_paused

    def abort(self) -> None:
        self.happened = True
        if self._connection is not None and not self.agent_left:
            self._connection.abort()

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.watch(None)
