"""What no view carries, collected from events per key: denied calls, failures, trips and
how they ended, probes, and the state over time (bounded per key)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from breakerdeck.console.card import Denied, Failure, Trip
from breakerdeck.console.states import look_of
from breakerdeck.console.timeline import TRANSITION_STATE, Mark, Point
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event

#: Denied calls, failures and trips kept per key for the cards.
HISTORY = 6
#: Transitions that leave the breaker's state as it was: a page, a mode switch (a card's
#: "since" is when its state changed, not when its mode did).
_NO_STATE_CHANGE = frozenset({ev.PAGE, ev.MODE})
#: Timeline points and marks kept per key: days of a flapping breaker's episodes.
TIMELINE = 256


@dataclass(slots=True)
class History:
    """One key's history, folded from its events, each kind bounded for its cards."""

    denied: deque[Denied] = field(default_factory=lambda: deque(maxlen=HISTORY))
    failures: deque[Failure] = field(default_factory=lambda: deque(maxlen=2 * HISTORY))
    trips: deque[Trip] = field(default_factory=lambda: deque(maxlen=HISTORY))
    platform: str | None = None
    trip_total: int = 0
    #: `call.denied` lines since the last trip (the episode's refusals as this console saw them).
    denied_total: int = 0
    changed: float | None = None
    half_open: float | None = None
    last_probe: tuple[str, float] | None = None
    probe_seen: float | None = None
    timeline: tuple[Point, ...] = ()
    marks: tuple[Mark, ...] = ()

    def point(self, wall: float, state: str) -> None:
        """The state from `wall` on, if it differs from the last one known."""
        if not self.timeline or self.timeline[-1][1] != state:
            self.timeline = (*self.timeline[-(TIMELINE - 1) :], (wall, state))

    def mark(self, wall: float, kind: str) -> None:
        self.marks = (*self.marks[-(TIMELINE - 1) :], (wall, kind))

    def fold(self, event: Event, held: BreakerView | None) -> None:
        """Take one event in; `held`: the view the board holds for its key (a restored trip's
        cause, when no trip line was seen)."""
        f = event.fields
        kind = event.type
        if event.view is not None:
            self.point(event.wall, look_of(event.view.state, event.view.paused).name)
        if kind in (ev.CALL_COMPLETED, ev.CALL_FAILED):
            self.platform = f.get("platform") or self.platform
            if f.get("probe"):
                self.probe_seen = None  # the probe is back (an uncounted one leaves it half-open)
            if f.get("outcome") not in (None, "success"):
                self.failures.appendleft(
                    Failure(
                        event.seq,
                        event.wall,
                        f.get("platform") or "?",
                        f.get("outcome") or "?",
                        f.get("fault") or "?",
                        f.get("agent_status"),
                        event.agent,
                        bool(f.get("counted")),
                    )
                )
        elif kind == ev.CALL_WOULD_DENY:  # shadow: listed with the refusals, marked
            self.platform = f.get("platform") or self.platform
            self.denied.appendleft(
                Denied(
                    event.wall,
                    f.get("platform") or "?",
                    f.get("reason") or "?",
                    event.agent,
                    would=True,
                )
            )
        elif kind == ev.CALL_DENIED:
            self.platform = f.get("platform") or self.platform
            if f.get("reason") == "probe_in_flight" and self.half_open is not None:
                self.probe_seen = self.probe_seen or event.wall
            self.denied_total += 1
            self.denied.appendleft(
                Denied(event.wall, f.get("platform") or "?", f.get("reason") or "?", event.agent)
            )
        else:
            self._fold_transition(event, held)

    def _fold_transition(self, event: Event, held: BreakerView | None) -> None:
        f = event.fields
        kind = event.type
        if kind in ev.TRANSITIONS and kind not in _NO_STATE_CHANGE:
            self.changed = event.wall
        if event.view is None and kind in TRANSITION_STATE:  # read back from the audit log
            self.point(event.wall, TRANSITION_STATE[kind])
        if kind == ev.REOPENED:
            self.mark(event.wall, "probe_failed")
        elif kind == ev.RECOVERED and self.half_open is not None:
            self.mark(event.wall, "probe_ok")
        elif kind == ev.RESET:
            self.mark(event.wall, "reset")
        elif kind == ev.PAGE:
            self.mark(event.wall, "page")
        if kind == ev.HALF_OPEN:
            self.half_open = event.wall
        elif kind in (ev.REOPENED, ev.RECOVERED):
            result = "failed" if kind == ev.REOPENED else "ok"
            if self.half_open is not None or kind == ev.REOPENED:
                self.last_probe = (result, event.wall)
            self.half_open = None
        elif kind in (ev.RESET, ev.TRIPPED):
            self.half_open = None
            self.last_probe = None
        if kind in ev.TRANSITIONS and kind not in _NO_STATE_CHANGE:
            self.probe_seen = None  # a new episode, or the probe's outcome
        if kind == ev.TRIPPED:
            self.trip_total += 1
            self.denied_total = 0
            self.trips.appendleft(
                Trip(event.seq, event.wall, f.get("failure_class") or "?", f.get("count") or 0)
            )
        elif kind == ev.RESTORED and f.get("state") in ("open", "half_open"):
            cause = held.trip_cause if held and held.trip_cause else "restored"
            self.trip_total += 1
            self.trips.appendleft(Trip(event.seq, event.wall, cause, f.get("count") or 0))
        elif kind in (ev.REOPENED, ev.PAGE, ev.RECOVERED, ev.RESET):
            if not self.trips or self.trips[0].ended is not None:
                return
            trip = self.trips[0]
            if kind == ev.REOPENED:
                trip = replace(trip, reopened=trip.reopened + 1)
            elif kind == ev.PAGE:
                trip = replace(trip, paged=True)
            elif kind == ev.RECOVERED:
                trip = replace(trip, ended="recovered", ended_wall=event.wall)
            else:
                trip = replace(
                    trip,
                    ended="reset",
                    ended_wall=event.wall,
                    actor=f.get("actor"),
                    reason=f.get("reason"),
                )
            self.trips[0] = trip
