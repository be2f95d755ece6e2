"""Hands engine events to asyncio consumers (the console, the feed's pump).

Each subscriber is one of the engine's own listeners, with a bounded buffer: the engine hands
it events in seq order, and a bus nobody subscribes to leaves the engine unwatched (its healthy
calls write no line). The engine's thread only appends and wakes a waiting consumer; it never
blocks on a slow one. A subscriber that falls behind loses its buffer and is told how much it
missed, so it resyncs from a snapshot instead of replaying.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event


@dataclass(frozen=True, slots=True)
class Missed:
    """Events were dropped for this subscriber: take a snapshot before reading on."""

    count: int


class Subscription:
    def __init__(self, loop: asyncio.AbstractEventLoop, maxsize: int) -> None:
        self._loop = loop
        self._maxsize = maxsize
        self._unsubscribe: Callable[[], None] | None = None
        self._items: deque[Event] = deque()
        self._missed = 0
        self._lock = threading.Lock()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    @classmethod
    def on(cls, engine: Engine, maxsize: int) -> Subscription:
        """A subscriber on the running loop, handed the engine's events from now on."""
        subscription = cls(asyncio.get_running_loop(), maxsize)
        subscription._unsubscribe = engine.subscribe(subscription.offer)
        return subscription

    def offer(self, event: Event) -> None:
        """Called from the engine's thread: append, or drop everything if the buffer is full.

        The engine hands events out one at a time (`ledger.Ledger.deliver`), so there is one
        producer at a time: an append with room takes no lock (a deque's append is atomic),
        and a consumer that went to wait is woken; a full buffer is emptied under the lock."""
        items = self._items
        if self.closed:
            return
        if len(items) < self._maxsize:
            items.append(event)
            if self._waiter is not None:
                self._wake()
            return
        with self._lock:
            self._missed += len(items) + 1
            items.clear()
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._loop.call_soon_threadsafe(_wake, waiter)

    async def get(self, linger: float = 0.0) -> list[Event] | Missed:
        """Everything buffered, oldest first, waiting for at least one; or a `Missed`.

        After waiting, a `linger` lets a burst gather into one batch: the engine's thread then
        wakes this loop once per burst instead of once per event.
        """
        while True:
            with self._lock:
                ready = self._take()
                if ready is not None:
                    return ready
                self._waiter = waiter = self._loop.create_future()
                # An append that read no waiter before it was set is seen here.
                ready = self._take()
                if ready is not None:
                    self._waiter = None
                    return ready
            await waiter
            if linger:
                await asyncio.sleep(linger)

    def _take(self) -> list[Event] | Missed | None:
        if self._missed:
            missed, self._missed = Missed(self._missed), 0
            return missed
        items = self._items
        if items:
            # One pop at a time: an event appended meanwhile is taken now or next time.
            return [items.popleft() for _ in range(len(items))]
        return [] if self.closed else None

    def close(self) -> None:
        with self._lock:
            self.closed = True
            waiter, self._waiter = self._waiter, None
        if self._unsubscribe is not None:
            self._unsubscribe()
        if waiter is not None:
            self._loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class EventBus:
    """The engine's events for any number of asyncio consumers, each its own `Subscription`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def subscribe(self, maxsize: int = 10_000) -> Subscription:
        """A new subscriber on the running loop; it sees events from now on."""
        return Subscription.on(self.engine, maxsize)
