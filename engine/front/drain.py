"""uvicorn's stop as both HTTP doors (`gateway`, `mcp --http`) want it (DESIGN, "Front doors").

The first SIGTERM (or Ctrl-C) stops accepting and lets the calls in flight finish, up to the
door's drain; then uvicorn cancels what is left, and each call answers with the door's own
words and writes its audit row. A second signal ends the drain at once the same way: uvicorn's
own second signal skips the cancelling altogether (its `force_exit`), so the calls in flight
were cut by the loop's end instead, answered with uvicorn's plain-text 500 and never audited.
Only when the calls so cancelled have not answered within `ANSWER_SECONDS`, or at a third
signal, is uvicorn told to stop waiting for them.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn

#: After the drain is ended, how long the cancelled calls get to send their answers.
ANSWER_SECONDS = 1.0
_ENDED = "Task cancelled, the drain was ended by a second signal"


class DrainingServer(uvicorn.Server):
    """uvicorn with the doors' drain; `on_drain` is told at the first signal (the MCP proxy
    answers new calls `refused` from then on), and `end_calls` ends the calls in flight at
    the second: by default each request's task is cancelled, which the gateway answers; the
    MCP proxy's calls run in its sessions' tasks instead, so it ends them itself and each
    answer goes back on its request as any answer does."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_drain: Callable[[], None] | None = None,
        end_calls: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_drain = on_drain
        self._end_calls = end_calls or self._cancel_requests
        self._loop: asyncio.AbstractEventLoop | None = None
        self.drain_ended = False

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            self.should_exit = True
            if self._on_drain is not None:
                self._on_drain()
        elif self.drain_ended or self._loop is None:
            self.force_exit = True
        else:
            self.drain_ended = True
            # A signal handler runs between any two steps of the loop: the tasks are
            # cancelled from the loop itself.
            self._loop.call_soon_threadsafe(self._end_drain)

    def _end_drain(self) -> None:
        self._end_calls()
        assert self._loop is not None
        self._loop.call_later(ANSWER_SECONDS, self._stop_waiting)

    def _cancel_requests(self) -> None:
        for task in list(self.server_state.tasks):
            task.cancel(msg=_ENDED)

    def _stop_waiting(self) -> None:
        self.force_exit = True
