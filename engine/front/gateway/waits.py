"""The ASGI gateway's probe waits: `ProbeWaits`, with the gateway's listener attached only while
some call waits.

No listener sits on the call path: any listener makes the engine write a line for every call,
refusals included (the fast-fail path). But a waiter must hear of a reset, or of another
replica's probe ending, to ask the engine again at once; so the listener is attached before a
wait looks at the breaker (no reset slips between) and detached when the last waiter is done,
unless something else (the feed) listens anyway.
"""

from __future__ import annotations

from collections.abc import Callable

from breakerdeck.engine.calls.probewait import ProbeWaits
from breakerdeck.engine.engine import Engine, Listener


class ListeningWaits(ProbeWaits):
    def __init__(self, engine: Engine, listener: Listener) -> None:
        super().__init__(engine)
        self._listener = listener
        self._detach: Callable[[], None] | None = None
        self._waiting = 0
        self._always = False

    def listen_always(self) -> None:
        """Keep the listener attached: something else (the feed) listens anyway, so every call
        writes its line already."""
        self._always = True
        self._attach()

    def close(self) -> None:
        if self._detach is not None:
            self._detach()
            self._detach = None

    async def wait(self, key: str, real_seconds: float) -> None:
        self._waiting += 1
        self._attach()
        try:
            await super().wait(key, real_seconds)
        finally:
            self._waiting -= 1
            if not self._waiting and not self._always:
                self.close()

    def _attach(self) -> None:
        if self._detach is None:
            self._detach = self.engine.subscribe(self._listener)
