"""The outbox: the engine's listeners and its page hook, handed events after the key's lock,
one at a time in seq order (by the ledger's `deliver`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import CallCompleted, CallDenied, Event, Paged
from breakerdeck.engine.storage.store import Problems

log = logging.getLogger(__name__)

Listener = Callable[[Event], None]
PageHook = Callable[[dict[str, Any]], None]

#: What `subscribe(calls=False)` listeners are never handed.
_CALL_LINES = (CallCompleted, CallDenied)


class Outbox:
    def __init__(self, page_hook: PageHook | None, epoch: float, problems: Problems) -> None:
        self.page_hook = page_hook
        self._epoch = epoch
        self._problems = problems
        #: Replaced, never edited in place: the call path reads it without a lock.
        self.listeners: list[Listener] = []
        #: Listeners handed everything but call lines (`subscribe(calls=False)`).
        self.change_listeners: list[Listener] = []
        #: Whether a line reaches anyone: a listener, or the audit log (`audited`). Read
        #: first on the call path, which writes no line nobody reads.
        self.watched = False
        self._audited = False
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener, *, calls: bool = True) -> Callable[[], None]:
        """`calls=False`: the listener is handed no call lines, so it makes no call write one
        (`watched` stays as it was); it sees the lines written whoever reads them."""
        with self._lock:
            if calls:
                self.listeners = [*self.listeners, listener]
                self.watched = True
            else:
                self.change_listeners = [*self.change_listeners, listener]
        return lambda: self._unsubscribe(listener)

    def audited(self) -> None:
        """The audit log keeps lines from now on."""
        with self._lock:
            self._audited = self.watched = True

    def _unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            self.listeners = [kept for kept in self.listeners if kept is not listener]
            self.change_listeners = [k for k in self.change_listeners if k is not listener]
            self.watched = self._audited or bool(self.listeners)

    def hand_out(self, event: Event) -> None:
        """From the ledger, in seq order, after the key's lock."""
        for listener in self.listeners:
            try:
                listener(event)
            except Exception as error:
                self._drop(listener, error)
        if self.change_listeners and type(event) not in _CALL_LINES:
            for listener in self.change_listeners:
                try:
                    listener(event)
                except Exception as error:
                    self._drop(listener, error)
        if type(event) is Paged and self.page_hook is not None and not event.relayed:
            self.page_hook(ev.record(event, self._epoch))

    def _drop(self, listener: Listener, error: Exception) -> None:
        """A listener that raises is cut off: a broken subscriber never breaks the call path."""
        problem = f"an event listener failed and was detached: {error!r}"
        log.error(problem)
        self._problems.add(problem)
        self._unsubscribe(listener)
