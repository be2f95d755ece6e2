"""The lines a decision writes, under the key's lock: a call's line, the transitions after
it, a relayed replica's transitions; each numbered by the ledger, carrying the key's view when
it changed, and counted in the key's tally.

The design's order: a call's line, then the transitions it caused, each with its `cause_seq`
and the cause's time (the trace's `t` is the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.events import (
    BreakerView,
    CallCompleted,
    CallDenied,
    CallDetails,
    CallEnding,
    Event,
    HalfOpened,
    Held,
    ModeChanged,
    Paged,
    Released,
    Reset,
    Restored,
    Transition,
)
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.durability import Durability
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.ledger import Ledger
from breakerdeck.engine.parts.outbox import Outbox
from breakerdeck.engine.parts.timers import Timers
from breakerdeck.engine.parts.views import Views, tally_name
from breakerdeck.engine.state import State


class Kept(Protocol):
    """A breaker's fields as a verdict or a snapshot keeps them (wall times)."""

    @property
    def state(self) -> State: ...
    @property
    def count(self) -> int: ...
    @property
    def last_failure_at(self) -> float | None: ...
    @property
    def opened_at(self) -> float | None: ...
    @property
    def cooldown(self) -> float: ...
    @property
    def failed_probes(self) -> int: ...
    @property
    def paged(self) -> bool: ...
    @property
    def rate_limited_streak(self) -> int: ...
    @property
    def last_retry_after(self) -> float | None: ...


EXPIRED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="probe never reported back")

#: Transitions no call caused: under `tool` they name no agent.
_TIME_OR_OPERATOR = (HalfOpened, Reset, Held, Released, ModeChanged)
_CLOSED = State.CLOSED


class Lines:
    def __init__(
        self,
        *,
        agent_policy: bool,
        epoch: float,
        ledger: Ledger,
        outbox: Outbox,
        views: Views,
        timers: Timers,
        durability: Durability,
    ) -> None:
        self.agent_policy = agent_policy
        self.epoch = epoch
        self._ledger = ledger
        self._outbox = outbox
        self.views = views
        self._timers = timers
        self._durability = durability

    def watched(self) -> bool:
        """Whether a line would reach anyone: a listener or the audit log."""
        return self._outbox.watched

    def publish(
        self, slot: Slot, event: Event, view: BreakerView | None, tally: str | None = None
    ) -> None:
        """Count the event in the key's tally (`tally`: what the writer knows it adds one
        to), put the view on it, and post it to the ledger, which numbers and times it."""
        if tally is not None:
            slot.count(tally)
        if view is not None:
            event.view = view
            slot.shown_agents = view.agents
        self._ledger.post(event)

    def emit(
        self,
        slot: Slot,
        type_: str,
        agent: str | None,
        fields: dict[str, Any],
        view: BreakerView | None = None,
        *,
        wall: float | None = None,
    ) -> Event:
        """`wall` is the time of the line that caused it; else it is timed as it is numbered."""
        event = Event(0, type_, slot.breaker.key, agent, wall or 0.0, fields)
        self.publish(slot, event, view, tally_name(event))
        return event

    def call_line(
        self,
        call: Call,
        slot: Slot,
        outcome: Outcome,
        is_probe: bool,
        fault: str,
        agent_status: int | str | None,
        refresh: str | None = None,
        platform_status: int | None = None,
        *,
        viewed: bool = True,
        moved: bool = False,
    ) -> Event:
        """The call's line, which carries the key's view when `viewed` and the view changed
        (`moved`, a new agent, the key's first line)."""
        details = self.details(call)
        view = None
        if viewed and (moved or slot.agents is not slot.shown_agents):
            view = self.views.of(slot)
        ending = (is_probe, fault, agent_status, refresh, platform_status)
        event = CallCompleted(
            call.key, call.key if self.agent_policy else call.agent, details, outcome, ending
        )
        self.publish(slot, event, view, "expired" if fault == "expired" else None)
        return event

    def details(self, call: Call) -> CallDetails:
        """The call's numbers as its line keeps them (`CallCompleted.call`)."""
        return (
            call.number,
            call.platform,
            call.tool,
            call.admitted_wall,
            call.admitted_as,
            call.attempts,
            call.deadline_seconds,
            call.admitted_seq,
            self.epoch,
        )

    def quiet_line(
        self,
        slot: Slot,
        agent: str,
        details: CallDetails,
        outcome: Outcome,
        ending: CallEnding,
    ) -> CallCompleted | None:
        """The line of a success that changes nothing (`Slot.quiet`), written under the key's
        lock if it still changes nothing there (None: it does not; the caller records it),
        then handed on. `details` are `call_line`'s, taken by the caller (a call that went in
        quietly keeps them from admission: `Entries.quiet_entry`)."""
        lock = slot.made_lock or slot.lock  # made by the key's first line: no property call
        lock.acquire()  # not `with`: on the hot path it measured twice acquire and release
        try:
            if not slot.quiet(self.agent_policy):
                return None
            key = slot.breaker.key
            event = CallCompleted(
                key, key if self.agent_policy else agent, details, outcome, ending
            )
            if slot.agents is slot.shown_agents:
                self._ledger.post(event)  # `publish`'s whole work when there is no view
            else:
                self.publish(slot, event, self.views.of(slot))
        finally:
            lock.release()
        self._ledger.deliver()
        return event

    def refused(
        self, slot: Slot, agent: str, platform: str, now: float, call: Call | None = None
    ) -> Admission | None:
        """A refusal in the cooldown that no listener reads, made with no lock when nobody
        reads a line: counted, and its `call.denied` written for the audit log when there is
        one (`call_id`: the entry's number, or with none, as `Engine.guard` refuses, one drawn
        now). None: the breaker decides (a listener reads the line; shadow; not cooling).

        With an audit log the row is decided and numbered under the key's lock (two lock
        calls, uncontended), so it never lands between a call's line and the transition that
        call caused, nor before a trip it was refused by (DESIGN, "The headless trace")."""
        outbox = self._outbox
        if outbox.listeners or slot.mode != "enforce":
            return None
        if not outbox.watched:
            return slot.cooling(now)
        lock = slot.made_lock or slot.lock  # made by the trip's lines: no property call
        lock.acquire()  # not `with`, as in `quiet_line`
        try:
            refusal = slot.cooling(now)
            if refusal is None:
                return None
            ledger = self._ledger
            key = slot.breaker.key
            denied = CallDenied(
                0,
                key,
                key if self.agent_policy else agent,
                0.0,
                ledger.draw_call() if call is None else call.number,
                platform,
                refusal.reason,
                round(refusal.retry_after, 3),
            )
            if slot.agents is slot.shown_agents:
                ledger.post(denied)  # `publish`'s whole work when there is no view
            else:
                self.publish(slot, denied, self.views.of(slot))
        finally:
            lock.release()
        ledger.deliver()
        return refusal

    def expired(
        self, slot: Slot, call: Call | None, transitions: Sequence[Transition]
    ) -> list[Event]:
        """A probe past its lease, recorded as a counted failure: our own call's line (`fault:
        expired`) first, then what it caused; another replica's probe has only the latter."""
        if call is None:
            return self.apply(slot, transitions, None, cause=None)
        line = self.call_line(call, slot, EXPIRED, True, "expired", None, viewed=False)
        return [line, *self.apply(slot, transitions, call.agent, cause=line)]

    def apply(
        self,
        slot: Slot,
        transitions: Sequence[Transition],
        agent: str | None,
        cause: Event | None,
        *,
        attach: bool = True,
    ) -> list[Event]:
        """After the breaker moved: number the transitions (the last carries the key's view
        unless `attach` is off: a later line takes it), track the key, owe their commit. A
        transition caused by a line (a call's, or a page's `reopened`) carries its
        `cause_seq` and its time."""
        written: list[Event] = []
        last = len(transitions) - 1
        for n, transition in enumerate(transitions):
            by = written[-1] if isinstance(transition, Paged) and written else cause
            if by is not None:
                transition.cause_seq = by.seq
                transition.wall = by.wall
            caller = None if isinstance(transition, _TIME_OR_OPERATOR) else agent
            transition.agent = self.transition_agent(slot, caller)
            self._stamp(slot, transition)
            view = self.views.of(slot) if attach and n == last else None
            self.publish(slot, transition, view, tally_name(transition))
            written.append(transition)
        if transitions:
            breaker = slot.breaker
            self._timers.track(breaker.key, settled=breaker.state is _CLOSED)
            due = breaker.reopens_at
            if due is not None:
                self._timers.at(due)
            self._durability.persist_event(slot, written[-1])
        return written

    def _stamp(self, slot: Slot, transition: Transition) -> None:
        """What a transition says of the key here: shadow or not, a hold's end in `t`."""
        transition.shadow = slot.mode == "shadow"
        if isinstance(transition, Held):
            transition.until_t = self.t(transition.until)

    def relay(self, slot: Slot, transitions: Sequence[Transition], origin: str) -> None:
        """Another replica's transitions, on this replica's feed (never audited or paged)."""
        key = slot.breaker.key
        last = len(transitions) - 1
        for n, transition in enumerate(transitions):
            transition.agent, transition.origin = key, origin
            self._stamp(slot, transition)
            view = self.views.of(slot) if n == last else None
            self.publish(slot, transition, view)

    def restored(self, key: str, kept: Kept) -> Restored:
        """`circuit_breaker.restored` for a breaker seeded from `kept` (a stored verdict, or
        the shared store's), its times in this run's `t`."""
        t = self.t
        return Restored(
            key,
            state=kept.state,
            count=kept.count,
            last_failure_t=t(kept.last_failure_at),
            opened_t=t(kept.opened_at),
            cooldown_seconds=kept.cooldown,
            failed_probes=kept.failed_probes,
            paged=kept.paged,
            rate_limited_streak=kept.rate_limited_streak,
            last_retry_after_seconds=kept.last_retry_after,
        )

    def key_agent(self, slot: Slot) -> str | None:
        return slot.breaker.key if self.agent_policy else None

    def transition_agent(self, slot: Slot, caller: str | None) -> str | None:
        return self.key_agent(slot) if self.agent_policy else caller

    def t(self, wall: float | None) -> float | None:
        return None if wall is None else round(wall - self.epoch, 3)
