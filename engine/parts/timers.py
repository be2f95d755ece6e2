"""Timers: the keys that time alone can change (not closed), and the polls that change them:
a cooldown's end (half-open) and a probe's lease (expired), each at its moment.

The engine has no clock thread of its own: a `Scheduler` the caller gives (the simulation's
loop, the gateway's) runs `poll` when asked, later, never from inside the asking call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Scheduler = Callable[[float, Callable[[], object]], None]

#: A probe expires strictly after its deadline, so its poll is scheduled a moment later.
JUST_AFTER = 1e-3


class Timers:
    def __init__(
        self, scheduler: Scheduler | None, poll: Callable[[], object], *, aside: bool
    ) -> None:
        """`aside`: each poll on a thread of its own (with a shared store a due key is a round
        trip, and a scheduler on an event loop never waits for Redis)."""
        self.scheduler = scheduler
        self._poll = poll
        self._aside = aside
        self._lock = threading.Lock()
        self._unsettled: set[str] = set()
        self._polling = self._poll_again = False

    def track(self, key: str, *, settled: bool) -> None:
        """Keys not closed are the ones `poll` looks at."""
        with self._lock:
            if settled:
                self._unsettled.discard(key)
            else:
                self._unsettled.add(key)

    def unsettled(self) -> list[str]:
        with self._lock:
            return sorted(self._unsettled)

    def at(self, when: float) -> None:
        """A poll at `when` (monotonic). Called holding a key's lock: the scheduler must run
        it later, not now."""
        if self.scheduler is not None:
            self.scheduler(when, self._poll_aside if self._aside else self._poll)

    def probe_due(self, deadline: float) -> None:
        self.at(deadline + JUST_AFTER)

    def _poll_aside(self) -> None:
        """One poll thread at a time: a poll asked for while one runs makes it poll again."""
        with self._lock:
            if self._polling:
                self._poll_again = True
                return
            self._polling = True
        threading.Thread(
            target=self._poll_while_asked, name="breakerdeck-poll", daemon=True
        ).start()

    def _poll_while_asked(self) -> None:
        while True:
            self._poll()
            with self._lock:
                if not self._poll_again:
                    self._polling = False
                    return
                self._poll_again = False
