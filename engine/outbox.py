"""The outbox: the engine's listeners and its page hook, handed events after the key's lock.

The ledger queues each event here in seq order; `deliver`, called once a key's lock is let
go, hands them out one at a time in that order, one deliverer at a time. A caller that finds
another delivering leaves its events to it: the deliverer looks again after letting go.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.store import Problems

log = logging.getLogger(__name__)

Listener = Callable[[Event], None]
PageHook = Callable[[dict[str, Any]], None]

_PAGE = ev.PAGE


class Outbox:
    def __init__(self, page_hook: PageHook | None, epoch: float, problems: Problems) -> None:
        self.page_hook = page_hook
        self._epoch = epoch
        self._problems = problems
        #: Replaced, never edited in place: the call path reads it without a lock.
        self.listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._waiting: deque[Event] = deque()
        self._delivering = threading.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self.listeners = [*self.listeners, listener]
        return lambda: self._unsubscribe(listener)

    def _unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            if listener in self.listeners:
                self.listeners = [kept for kept in self.listeners if kept is not listener]

    def queue(self, event: Event) -> None:
        """From the ledger, in seq order: kept only if someone will be handed it."""
        if self.listeners or (event.type == _PAGE and self.page_hook is not None):
            self._waiting.append(event)

    def deliver(self) -> None:
        waiting = self._waiting
        while waiting:
            if not self._delivering.acquire(blocking=False):
                return
            try:
                while waiting:
                    self._hand_out(waiting.popleft())
            finally:
                self._delivering.release()

    def _hand_out(self, event: Event) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception as error:
                self._drop(listener, error)
        if event.type == _PAGE and self.page_hook is not None and not event.relayed:
            self.page_hook(ev.record(event, self._epoch))

    def _drop(self, listener: Listener, error: Exception) -> None:
        """A listener that raises is cut off: a broken subscriber never breaks the call path."""
        problem = f"an event listener failed and was detached: {error!r}"
        log.error(problem)
        self._problems.add(problem)
        self._unsubscribe(listener)
