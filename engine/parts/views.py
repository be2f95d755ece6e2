"""Views and tallies: a key's breaker as a picture (for an event, the console, the feed and
`status`), and what each of its events adds to the key's tally for metrics."""

from __future__ import annotations

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import Clock
from breakerdeck.engine.core.breaker import picture
from breakerdeck.engine.events import BreakerView, CallCompleted, Event
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.state import State

#: The state each transition leads to, as metrics name it.
_TO = {
    ev.TRIPPED: "open",
    ev.REOPENED: "open",
    ev.HALF_OPEN: "half_open",
    ev.RECOVERED: "closed",
    ev.CREDENTIAL_REVOKED: "paused",
    ev.CREDENTIAL_RESTORED: "closed",
    ev.HELD: "held",
}
_PAGE = ev.PAGE


def tally_name(event: Event) -> str | None:
    """What a key's event adds one to in its tally (None: nothing): a transition as
    `to:<state>`, a page, a reset, and the engine's own completion (an expired probe). A verdict
    restored at start is no transition: counted as one, every restart read as a move to its
    state, and an alert on opens fired on each deploy."""
    if isinstance(event, CallCompleted):
        return "expired" if event.fault == "expired" else None
    kind = event.type
    if kind == ev.RESET:
        return "reset"
    to = _TO.get(kind)
    if to is not None:
        return f"to:{to}"
    return "page" if kind == _PAGE else None


class Views:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def of(self, slot: Slot, seq: int = 0) -> BreakerView:
        """Under the key's lock: its picture as of `seq` (an event about to be written takes
        its own seq when it is numbered)."""
        clock = self._clock
        b = slot.breaker.snapshot(clock.wall() - clock.monotonic())
        return picture(
            slot.breaker.key,
            slot.agents,
            b,
            paused=slot.credential_revoked,
            seq=seq,
            probe_since=self._probe_since(slot),
            mode=slot.mode,
        )

    def first(self, slot: Slot) -> BreakerView | None:
        """The key's view for a line that changes nothing in the breaker: only the key's
        first line and the first from a new agent need one."""
        return self.of(slot) if slot.agents is not slot.shown_agents else None

    def _probe_since(self, slot: Slot) -> float | None:
        """Under the key's lock: since when the probe is out (None: none is, and the next call
        is the probe). Its own ticket's admission time; a view written while the probe is being
        admitted (the half-open it caused) or another replica's probe: when first seen."""
        breaker = slot.breaker
        probe = breaker.probe_id
        if breaker.state is not State.HALF_OPEN or probe is None:
            return None
        seen = slot.probe_seen
        if seen is None or seen[0] != probe:
            call = slot.probe
            since = call.admitted_wall if call is not None and call.number == probe else None
            slot.probe_seen = seen = (probe, self._clock.wall() if since is None else since)
        return seen[1]
