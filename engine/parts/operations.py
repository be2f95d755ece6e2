"""Each operation's body, once: take the key's lock, let the `Decider` decide, write what that
caused (`Lines`), note what the caller is owed on disk; then, after the lock, deliver. The
engine's sync and async drivers call these and settle what is owed their own way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import Clock
from breakerdeck.engine.core import holds
from breakerdeck.engine.core.breaker import ADMIT_NORMAL, Admission, Breaker, DenyReason, Hold
from breakerdeck.engine.core.verdict import Verdict
from breakerdeck.engine.errors import NotHeld
from breakerdeck.engine.events import CallDenied, CallWouldDeny, Event, ModeChanged, Transition
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.parts import modes
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.parts.decide import Decider, Write
from breakerdeck.engine.parts.durability import Durability, Owed, saved_state
from breakerdeck.engine.parts.keys import KeyTable, Slot
from breakerdeck.engine.parts.ledger import Ledger
from breakerdeck.engine.parts.lines import Lines
from breakerdeck.engine.parts.outbox import Outbox, PageHook
from breakerdeck.engine.parts.timers import Timers
from breakerdeck.engine.parts.views import Views, tally_name
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State
from breakerdeck.engine.storage.store import Problems

#: A probe that reports back this long after its lease still counts as on time: the harness's
#: own bookkeeping must not turn a probe that used its whole budget into an expired one.
LEASE_GRACE_SECONDS = 1.0

_SUCCESS = OutcomeClass.SUCCESS
_HALF_OPEN = State.HALF_OPEN
_HELD = DenyReason.HELD


@dataclass(frozen=True, slots=True)
class Parts:
    """An engine's parts, each owning its state; what a fleet member may use of its engine."""

    policy: AgentPolicy | ToolPolicy
    instance: str
    clock: Clock
    #: The clock's wall reading, as cheap as it comes (`time.time` itself for the system's).
    wall: Callable[[], float]
    keys: KeyTable
    ledger: Ledger
    outbox: Outbox
    durability: Durability
    timers: Timers
    lines: Lines

    @classmethod
    def make(
        cls,
        policy: AgentPolicy | ToolPolicy,
        instance: str,
        clock: Clock,
        wall: Callable[[], float],
        problems: Problems,
        *,
        epoch: float,
        page_hook: PageHook | None,
        timers: Timers,
        mode: str,
    ) -> Parts:
        """An engine's parts, wired: each made once, handed what it calls downward."""
        keys = KeyTable(policy, mode)
        outbox = Outbox(page_hook, epoch, problems)
        ledger = Ledger(wall, problems, outbox)
        durability = Durability(policy, clock, keys, ledger, problems)
        lines = Lines(
            agent_policy=isinstance(policy, AgentPolicy),
            epoch=epoch,
            ledger=ledger,
            outbox=outbox,
            views=Views(clock),
            timers=timers,
            durability=durability,
        )
        return cls(policy, instance, clock, wall, keys, ledger, outbox, durability, timers, lines)


class Operations:
    def __init__(self, parts: Parts, decider: Decider) -> None:
        self._policy = parts.policy
        self._agent_policy = isinstance(parts.policy, AgentPolicy)
        self._clock = parts.clock
        self._wall = parts.wall
        self._keys = parts.keys
        self._ledger = parts.ledger
        self._durability = parts.durability
        self._timers = parts.timers
        self._lines = parts.lines
        self._views = parts.lines.views
        self._decide = decider

    def unchanging(self, slot: Slot, outcome: Outcome) -> bool:
        """A success on a closed breaker with no failures counted and a known credential: it
        changes nothing, so it needs only its line (no expiry check, no record, no verdict)."""
        return outcome.cls is _SUCCESS and slot.quiet(self._agent_policy)

    # -- the call path ------------------------------------------------------------------------

    def admit(self, call: Call, lease: float) -> tuple[Admission, Owed]:
        """Under the key's lock: expire a lost probe, admit or refuse, write what that caused."""
        slot = self._keys.slots[call.key]
        with slot.lock:
            admission = self._admit_locked(call, slot, lease)
            owed = self._durability.take_owed(slot)
        self._ledger.deliver()
        return admission, owed

    def _admit_locked(self, call: Call, slot: Slot, lease: float) -> Admission:
        now = self._clock.monotonic()
        admission, transitions = self._decide.admit(
            slot, call.number, now, lease + LEASE_GRACE_SECONDS
        )
        breaker = slot.breaker
        self._lines.apply(slot, transitions, call.agent, cause=None)
        if not admission.allowed and slot.mode == "shadow" and admission.reason is not _HELD:
            # Shadow: let through, its refusal written when it completes (`record`).
            reason = admission.reason.value if admission.reason else None
            call.would_deny = (reason or "", round(admission.retry_after, 3))
            slot.count("would_deny")
            admission = ADMIT_NORMAL
        if admission.allowed:
            call.admitted_as = "probe" if admission.as_probe else "normal"
            call.admitted_wall = self._wall()
            call.admitted_seq = self._ledger.numbered
            if admission.as_probe:
                slot.probe = call
                self._timers.probe_due(breaker.probe_deadline)
        else:
            slot.count_denied(admission.reason)
            if self._lines.watched():
                denied = CallDenied(
                    0,
                    call.key,
                    call.key if self._agent_policy else call.agent,
                    0.0,
                    call.number,
                    call.platform,
                    admission.reason.value if admission.reason else None,
                    round(admission.retry_after, 3),
                )
                self._lines.publish(slot, denied, self._views.first(slot))
        return admission

    def extend_probe(self, call: Call, seconds: float) -> None:
        slot = self._keys.slots[call.key]
        with slot.lock:
            breaker = slot.breaker
            if breaker.is_probe(call.number):
                breaker.extend_probe(call.number, seconds)
                self._timers.probe_due(breaker.probe_deadline)

    def record(
        self,
        call: Call,
        outcome: Outcome,
        fault: str,
        agent_status: int | str,
        refresh: str | None,
        platform_status: int | None,
    ) -> tuple[Event, Owed]:
        """A finished call: its `call.completed` line, then what it caused."""
        slot = self._keys.slots[call.key]
        lines = self._lines
        if call.would_deny is not None:
            return self._would_have_denied(
                call, slot, outcome, fault, agent_status, refresh, platform_status
            ), None
        if self.unchanging(slot, outcome):
            ending = (False, fault, agent_status, refresh, platform_status)
            quiet = lines.quiet_line(slot, call.agent, lines.details(call), outcome, ending)
            if quiet is not None:
                return quiet, None
        with slot.lock:
            now = self._clock.monotonic()
            breaker = slot.breaker
            if breaker.state is _HALF_OPEN:  # only the probe's outcome is judged
                judged = breaker.judge(call.number, outcome, fault != "none")
                if judged is not outcome:
                    outcome, fault = judged, "timeout"
            count_before = breaker.count
            # The breaker moves first, so the last line this writes carries its view after.
            is_probe, transitions = self._decide.record(slot, call.number, outcome, now)
            breaker = slot.breaker
            if is_probe or breaker.probe_id is None:
                slot.probe = None
            revoked = self._note_credential(slot, call, outcome)
            moved = outcome.counted or breaker.count != count_before
            line = lines.call_line(
                call,
                slot,
                outcome,
                is_probe,
                fault,
                agent_status,
                refresh,
                platform_status,
                viewed=not (transitions or revoked),
                moved=moved,
            )
            lines.apply(slot, transitions, call.agent, cause=line, attach=not revoked)
            if revoked:
                self._revoked(slot, call, line)
            if moved and not transitions:
                self._durability.persist(slot, urgent=False)
            owed = self._durability.take_owed(slot)
        self._ledger.deliver()
        return line, owed

    def _would_have_denied(
        self,
        call: Call,
        slot: Slot,
        outcome: Outcome,
        fault: str,
        agent_status: int | str,
        refresh: str | None,
        platform_status: int | None,
    ) -> Event:
        """A call a shadow breaker would have refused: its `call.would_deny`, then its line.
        Its outcome moves nothing (enforcing, it would not have happened)."""
        assert call.would_deny is not None
        reason, retry_after = call.would_deny
        admitted = call.admitted_wall
        seconds = 0.0 if admitted is None else round(max(self._wall() - admitted, 0.0), 3)
        agent = call.key if self._agent_policy else call.agent
        with slot.lock:
            would = CallWouldDeny(
                call.key,
                agent,
                call.number,
                call.platform,
                reason,
                retry_after,
                outcome.cls.value,
                seconds,
            )
            self._lines.publish(slot, would, None)
            uncounted = replace(outcome, counted=False)  # it moved nothing: it says so
            line = self._lines.call_line(
                call, slot, uncounted, False, fault, agent_status, refresh, platform_status
            )
        self._ledger.deliver()
        return line

    def refuse(self, call: Call, outcome: Outcome, agent_status: int | str) -> Event:
        """A refusal before the breaker: a line, attempts 0, never counted, no probe slot."""
        slot = self._keys.slots[call.key]
        with slot.lock:
            line = self._lines.call_line(call, slot, outcome, False, "none", agent_status)
        self._ledger.deliver()
        return line

    # -- credentials (tool policy) ---------------------------------------------------------

    def _note_credential(self, slot: Slot, call: Call, outcome: Outcome) -> bool:
        """Under the key's lock: what the outcome says of the key's credential. True when it
        was just revoked: the caller writes that line (`_revoked`) after the call's own."""
        if self._agent_policy:
            return False
        if outcome.is_success and slot.credential_worked_at is None:
            # When it last worked is kept as counters are (DESIGN, "Durability"): within a
            # second, never waited for; only the credential's flag (revoked) is.
            slot.credential_worked_at = self._wall()
            self._durability.persist(slot, urgent=False)
        elif outcome.cls is OutcomeClass.CREDENTIAL_REVOKED and not slot.credential_revoked:
            slot.credential_revoked = True
            return True
        return False

    def _revoked(self, slot: Slot, call: Call, cause: Event) -> None:
        fields = {"cause_seq": cause.seq}
        view = self._views.of(slot)
        event = self._lines.emit(
            slot, ev.CREDENTIAL_REVOKED, call.agent, fields, view, wall=cause.wall
        )
        self._durability.persist_event(slot, event)

    def restore_credential(self, key: str, actor: str) -> tuple[Event, Owed]:
        slot = self._keys.known(key)
        with slot.lock:
            slot.credential_revoked = False
            agent = self._lines.key_agent(slot)
            view = self._views.of(slot)
            event = self._lines.emit(slot, ev.CREDENTIAL_RESTORED, agent, {"actor": actor}, view)
            self._durability.persist_event(slot, event)
            owed = self._durability.take_owed(slot)
        self._ledger.deliver()
        return event, owed

    # -- operator and time ------------------------------------------------------------------

    def reset(self, key: str, actor: str, reason: str) -> tuple[Event, Owed]:
        """An operator's reset: closed, counter and ladder zeroed; the reset's own line."""
        events, owed = self._operator(
            key,
            Write("reset", lambda _: (actor, reason), lambda s: s.breaker.reset(actor, reason)),
        )
        return events[-1], owed

    def hold(self, key: str, actor: str, reason: str, seconds: float) -> tuple[Event, Owed]:
        """An operator's hold (`Breaker.hold_open`), checked first: a reason, and 1 s up to
        the policy's `max_hold_seconds`."""
        holds.checked_words(actor, reason, reason_required=True)
        most = self._policy.max_hold_seconds
        if not 0 < seconds <= most:
            raise ValueError(f"a hold lasts 1 s to {most:g} s")
        clock = self._clock
        hold = Hold(actor, reason, clock.wall() + seconds, clock.monotonic() + seconds)
        return self._first(
            key,
            Write(
                "hold",
                lambda _: (actor, reason, repr(hold.until_wall)),
                lambda slot: slot.breaker.hold_open(hold),
            ),
        )

    def release(self, key: str, actor: str, reason: str, close: bool) -> tuple[Event, Owed]:
        """A hold ended early: half-open, or closed (`close`)."""
        holds.checked_words(actor, reason, reason_required=False)
        return self._first(
            key,
            Write(
                "release",
                lambda _: (actor, reason, "1" if close else "0"),
                lambda slot: slot.breaker.release(actor, reason, close=close),
            ),
        )

    def set_mode(self, key: str, mode: str, actor: str, reason: str) -> tuple[Event, Owed]:
        """An operator's `shadow` or `enforce`: it stands until the configuration's value for
        the key changes (`modes.effective_mode`)."""
        holds.checked_words(actor, reason, reason_required=False)
        modes.checked(mode)

        def switch(slot: Slot) -> list[Transition]:
            before = slot.mode
            slot.chosen = (mode, slot.configured)
            slot.mode = modes.effective_mode(slot)
            return [ModeChanged(key, actor, reason, before, mode)]

        def args(slot: Slot) -> tuple[str, ...]:
            return (mode, slot.configured, actor, reason, slot.mode)

        return self._first(key, Write("mode", args, switch))

    def configure_mode(self, key: str, mode: str | None) -> None:
        # under `agent` a key is its agent: `status` names it before its first call
        slot = self._keys.slot(key, key if self._agent_policy else None)
        with slot.lock:
            modes.configure(slot, self._keys.mode if mode is None else mode)

    def _first(self, key: str, write: Write) -> tuple[Event, Owed]:
        events, owed = self._operator(key, write)
        return events[0], owed

    def _operator(self, key: str, write: Write) -> tuple[list[Event], Owed]:
        """An operator's write under the key's lock, decided here or, on replicas sharing a
        store, by the store's script for the whole fleet (audited here only)."""
        slot = self._keys.known(key)
        with slot.lock:
            transitions = self._decide.operate(slot, write)
            if not transitions:  # the fleet's breaker was released meanwhile
                raise NotHeld(f"{key} is not held")
            if slot.breaker.probe_id is None:
                slot.probe = None
            events = self._lines.apply(slot, transitions, None, cause=None)
            self._durability.persist_event(slot, events[-1])
            owed = self._durability.take_owed(slot)
        self._ledger.deliver()
        return events, owed

    def poll(self) -> list[Event]:
        """Write what time alone causes: half-opens and expired probes, at their moment."""
        written: list[Event] = []
        for key in self._timers.unsettled():
            slot = self._keys.slots[key]
            with slot.lock:
                expired, transitions = self._decide.tick(slot, self._clock.monotonic())
                written += expired
                written += self._lines.apply(slot, transitions, None, None)
                self._durability.take_owed(slot)  # time caused these: no caller waits for them
        self._ledger.deliver()
        return written

    # -- restore ----------------------------------------------------------------------------

    def restore(self) -> list[Event]:
        """Seed breakers from the verdict store."""
        restored = []
        for verdict, stale in self._durability.restorable():
            slot = self._keys.slot(verdict.key, verdict.agent)
            with slot.lock:
                if verdict.mode_chosen is not None and verdict.mode_against is not None:
                    slot.chosen = (verdict.mode_chosen, verdict.mode_against)
                    slot.mode = modes.effective_mode(slot)
                if not stale:
                    restored.append(self._restore_one(slot, verdict))
                    continue
                slot.credential_worked_at = verdict.credential_ok_at
                slot.credential_revoked = verdict.credential_revoked
                self._durability.persist(slot, urgent=False)
        self._ledger.deliver()
        return restored

    def _restore_one(self, slot: Slot, verdict: Verdict) -> Event:
        clock = self._clock
        to_mono = clock.monotonic() - clock.wall()
        saved = saved_state(verdict)
        breaker = slot.breaker = Breaker.from_state(verdict.key, self._policy, saved, to_mono)
        if breaker.opened_at is not None and saved.state is State.HALF_OPEN:
            # It lost its probe with the old process: open, and due now.
            breaker.opened_at = min(breaker.opened_at, clock.monotonic() - breaker.cooldown)
        due = breaker.reopens_at  # a cooldown's end, or a hold's
        if due is not None:
            self._timers.track(verdict.key, settled=False)
            self._timers.at(due)
        slot.credential_worked_at = verdict.credential_ok_at
        slot.credential_revoked = verdict.credential_revoked
        self._decide.alone(slot)  # the fleet's verdict, if any, wins on joining
        event = self._lines.restored(verdict.key, verdict)
        event.agent = self._lines.transition_agent(slot, None)
        self._lines.publish(slot, event, self._views.of(slot), tally_name(event))
        if breaker.state is State.HELD:  # a hold that ran out while nobody ran: released now
            self._lines.apply(slot, breaker.poll(clock.monotonic()), None, cause=None)
        return event
