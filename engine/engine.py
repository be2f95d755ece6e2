"""The engine: breakers by key, one sequence of events, persistence and subscribers.

The breaker core decides; this shell stamps decisions with sequence numbers and times, writes
them in the design's order (a call's line, then the transitions it caused), persists verdicts,
and hands events to the audit log and to subscribers. Each key has its own lock, so calls on
unrelated keys never wait for each other; a short numbering lock hands out seqs; the closed path
takes no lock. Listeners and the page hook run after the key's lock is released, one event at
a time in seq order (whichever caller finds them waiting delivers them, as Polly runs its
callbacks).

Storage never sits on the call path: verdicts and events are queued for writer threads. The one
exception the design asks for is a transition, reset or credential flag, whose caller waits
(after the lock is released, at most `COMMIT_WAIT` seconds) until it is on disk.

With a shared store the engine owns a `fleet.Fleet`, which keeps its breakers in step with the
other replicas'; the engine calls it where the fleet has a say, and only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import logging
import os
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from breakerdeck.engine import events as ev
from breakerdeck.engine import statedir
from breakerdeck.engine.audit import AuditLog
from breakerdeck.engine.breaker import (
    ADMIT_NORMAL,
    Admission,
    Breaker,
    BreakerState,
    DenyReason,
    State,
    Transition,
    picture,
)
from breakerdeck.engine.clock import Clock, SystemClock
from breakerdeck.engine.errors import StateDirError, UnknownKey
from breakerdeck.engine.events import BreakerView, CallCompleted, CallDenied, Event
from breakerdeck.engine.guard import Guard
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.replica import Member, Store, token
from breakerdeck.engine.store import Problems, VerdictStore
from breakerdeck.engine.verdict import Verdict, bounded, is_stale

log = logging.getLogger(__name__)

Listener = Callable[[Event], None]
PageHook = Callable[[dict[str, Any]], None]
Scheduler = Callable[[float, Callable[[], object]], None]

#: A probe that reports back this long after its lease still counts as on time: the harness's
#: own bookkeeping must not turn a probe that used its whole budget into an expired one.
LEASE_GRACE_SECONDS = 1.0

#: Transitions no call caused: under `tool` they name no agent.
_TIME_OR_OPERATOR = frozenset({ev.HALF_OPEN, ev.RESET})

MARK_FILE = "mark.json"
LOCK_FILE = "lock"

#: Seqs and call numbers are reserved this many ahead in the mark file, so a process killed
#: without closing never hands out a number again: the next one starts past the reservation.
NUMBER_BLOCK = 10_000

#: The longest a call waits for the transition it caused to reach the disk (real seconds).
COMMIT_WAIT = 1.0

#: A probe expires strictly after its deadline, so its poll is scheduled a moment later.
_JUST_AFTER = 1e-3

_SUCCESS = OutcomeClass.SUCCESS
#: Read once: the delivery path compares every event against it.
_PAGE = ev.PAGE
_DENIED = ev.CALL_DENIED
_CLOSED = State.CLOSED
#: The state each transition leads to, as metrics name it.
_TO = {
    ev.TRIPPED: "open",
    ev.REOPENED: "open",
    ev.HALF_OPEN: "half_open",
    ev.RECOVERED: "closed",
    ev.RESET: "closed",
    ev.CREDENTIAL_REVOKED: "paused",
    ev.CREDENTIAL_RESTORED: "closed",
}


def tally_name(event: Event) -> str | None:
    """What a key's event adds one to in its tally (None: nothing): a transition or a restore
    as `to:<state>`, a page, a reset, and the engine's own completion (an expired probe)."""
    if isinstance(event, CallCompleted):
        return "expired" if event.fault == "expired" else None
    kind = event.type
    if kind == ev.RESTORED:
        return f"to:{event.fields.get('state', 'closed')}"
    if kind == ev.RESET:
        return "reset"
    to = _TO.get(kind)
    if to is not None:
        return f"to:{to}"
    return "page" if kind == _PAGE else None


EXPIRED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="probe never reported back")


class Call:
    """One call's ticket, from the harness's first look at it to its `call.completed` line.

    The call's number is an integer; its printed id (`call-000042`) is formatted only when a
    line or an Idempotency-Key needs it."""

    __slots__ = (
        "admitted_as",
        "admitted_seq",
        "admitted_wall",
        "agent",
        "attempts",
        "deadline_seconds",
        "key",
        "number",
        "platform",
        "tool",
    )

    def __init__(
        self, number: int, key: str, agent: str, platform: str, tool: str, deadline: float
    ) -> None:
        self.number = number
        self.key = key
        self.agent = agent
        self.platform = platform
        self.tool = tool
        self.deadline_seconds = deadline
        self.attempts = 0
        self.admitted_wall: float | None = None
        self.admitted_as: str | None = None
        self.admitted_seq: int | None = None

    @property
    def call_id(self) -> str:
        return call_id(self.number)


def call_id(number: int) -> str:
    """A call's number as lines and Idempotency-Keys print it."""
    return f"call-{number:06d}"


@dataclass(slots=True)
class _Slot:
    """A breaker with what the engine knows around it: who calls it, its credential, its lock,
    its probe's ticket and the commit its current caller must wait for."""

    breaker: Breaker
    agents: list[str] = field(default_factory=list)
    credential_worked_at: float | None = None
    credential_revoked: bool = False
    # Re-entrant: a scheduler may run `poll` at once, from inside a call on this key.
    lock: threading.RLock = field(default_factory=threading.RLock)
    probe: Call | None = None
    #: How many agents the last view put on an event named (-1: none yet), so the first event
    #: on a key and the first call from a new agent carry the key's view.
    shown_agents: int = -1
    owed: int = 0
    owed_what: list[str] = field(default_factory=list)
    #: The key's refusals by reason and its other events by `tally_name`, for metrics read at
    #: scrape time (DESIGN, "Metrics"): plain integer adds on the call path, no listener.
    denied: Counter[DenyReason | None] = field(default_factory=Counter)
    tally: Counter[str] = field(default_factory=Counter)
    #: With a shared store: the version and generation of the key last seen there, and
    #: whether this replica changed it while the store was lost (to reconcile on return).
    ver: int = 0
    gen: int = 0
    dirty: bool = False
    #: The highest version whose transitions this replica has shown (its own, or relayed in
    #: the order the store published them).
    shown: int = 0
    #: (probe id, since when) of the probe a view first showed out: what `probe_since` says.
    probe_seen: tuple[object, float] | None = None


#: What a caller must see committed before it returns: a store ticket and what it holds.
Owed = tuple[int, list[str]] | None


class Engine:
    def __init__(
        self,
        policy: AgentPolicy | ToolPolicy,
        *,
        clock: Clock | None = None,
        state_dir: str | Path | None = None,
        page_hook: PageHook | None = None,
        scheduler: Scheduler | None = None,
        instance: str | None = None,
        shared: Store | None = None,
    ) -> None:
        if shared is not None and not isinstance(policy, AgentPolicy):
            raise ValueError(
                "replicas share breakers only under the agent policy: under the tool policy "
                "each harness keeps its own (docs/replicas.md)"
            )
        self.policy = policy
        #: 64 random bits per process: prefixed to each call id in the Idempotency-Key a call
        #: sends upstream, so keys never repeat across crashes, replicas or deployments.
        self.instance = instance or secrets.token_hex(8)
        self._agent_policy = isinstance(policy, AgentPolicy)
        self.clock = clock or SystemClock()
        self.epoch = self.clock.wall()
        self.page_hook = page_hook
        self.scheduler = scheduler
        self._problems = Problems()
        self._slots: dict[str, _Slot] = {}
        self._unsettled: set[str] = set()
        self._listeners: list[Listener] = []
        # Lock order: a key's lock, then `_numbering`; `_meta` and `_reserving` are taken alone
        # or innermost. No thread holds two keys' locks except `snapshot`, in key order.
        self._meta = threading.Lock()  # the slot table, listeners, unsettled keys, closing
        self._numbering = threading.Lock()  # seqs, and the audit log's order
        self._reserving = threading.Lock()
        self._delivering = threading.Lock()
        self._undelivered: deque[Event] = deque()
        self._wall = self.clock.wall
        self._call_ids = itertools.count(1)
        self.audit: AuditLog | None = None
        self.store: VerdictStore | None = None
        self._mark_file: Path | None = None
        self._lock_fd: int | None = None
        self._closed = False
        self._seq = 0
        # Numbers below these are reserved on disk (or need no reservation: no state dir).
        self._seq_refill = self._calls_refill = float("inf")
        self._seq_ceiling = self._calls_ceiling = 0
        self._seq_saved = 0
        self._fleet: Member | None = None
        self._polling = self._poll_again = False
        if shared is not None:
            self._fleet = shared.member(self)
        if state_dir is not None:
            self._open_state(statedir.prepare(state_dir))

    def _open_state(self, directory: Path) -> None:
        """Take the dir's lock, open its log and store, and reserve numbers past the last run's."""
        self._lock_fd = _lock_state_dir(directory)
        self.audit = AuditLog(directory / "audit.sqlite3", wall=self.clock.wall)
        self.store = VerdictStore(directory / "verdicts.sqlite3")
        self.store.on_fresh_file = self._persist_all
        self._mark_file = directory / MARK_FILE
        mark = read_mark(directory, self._problems)
        self._seq = max(self.audit.max_seq(), mark.seq)
        self._call_ids = itertools.count(mark.calls + 1)
        self._seq_ceiling = self._seq + NUMBER_BLOCK
        self._calls_ceiling = mark.calls + NUMBER_BLOCK
        self._set_refills()
        self._save_mark(self._seq_ceiling, self._calls_ceiling)

    @property
    def problems(self) -> list[str]:
        """What went wrong so far, as sentences: the engine's, the audit log's and the store's,
        read now (a write lost a minute ago shows here, not only what start-up found)."""
        found = self._problems.lines()
        if self.audit is not None:
            found += self.audit.problems
        if self.store is not None:
            found += self.store.problems
        if self._fleet is not None:
            found += self._fleet.store.problems()
        return found

    @property
    def sharing(self) -> bool:
        """Whether this engine shares its breakers with replicas (a shared store)."""
        return self._fleet is not None

    @property
    def shared_lost(self) -> str | None:
        """Why the shared store cannot be used now (this replica decides alone meanwhile), or
        None: with no shared store, or while it answers."""
        return None if self._fleet is None else self._fleet.store.lost

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- setup -------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Called with every event, in seq order, after the key's lock is released, on the
        thread of whichever caller delivers it: keep it quick."""
        with self._meta:
            self._listeners = [*self._listeners, listener]
        return lambda: self._unsubscribe(listener)

    def _drop_listener(self, listener: Listener, error: Exception) -> None:
        """A listener that raises is cut off: a broken subscriber never breaks the call path."""
        problem = f"an event listener failed and was detached: {error!r}"
        log.error(problem)
        self._problems.add(problem)
        self._unsubscribe(listener)

    def _unsubscribe(self, listener: Listener) -> None:
        with self._meta:
            if listener in self._listeners:
                self._listeners = [kept for kept in self._listeners if kept is not listener]

    def restore(self) -> list[Event]:
        """Seed breakers from the verdict store, then (with a shared store) join the fleet:
        adopt what it holds and listen for its changes. Call once subscribers are attached."""
        restored = self._restore_local()
        if self._fleet is not None:
            self._fleet.start()
        return restored

    def _restore_local(self) -> list[Event]:
        if self.store is None:
            return []
        restored = []
        for verdict in self._bounded(self.store.load()):
            stale = is_stale(
                verdict,
                longest_cooldown=self.policy.longest_cooldown(),
                window=self.policy.window,
                now=self.clock.wall(),
            )
            if stale and verdict.credential_ok_at is None and not verdict.credential_revoked:
                self.store.delete(verdict.key)
                continue
            slot = self._slot(verdict.key, verdict.agent)
            with slot.lock:
                if not stale:
                    restored.append(self._restore_one(slot, verdict))
                    continue
                slot.credential_worked_at = verdict.credential_ok_at
                slot.credential_revoked = verdict.credential_revoked
                self._persist(slot, urgent=False)
        self._deliver()
        return restored

    def _bounded(self, verdicts: list[Verdict]) -> list[Verdict]:
        """Stored numbers read within bounds (a damaged or hostile store, a stepped clock)."""
        now = self.clock.wall()
        kept = []
        for verdict in verdicts:
            fixed, notes = bounded(
                verdict,
                now=now,
                trip_cooldown=self.policy.trip_cooldown(),
                longest_cooldown=self.policy.longest_cooldown(),
            )
            if notes:
                self._problems.add(
                    f"The stored verdict for {verdict.key!r} had values out of range "
                    f"({', '.join(notes)}); they were read as safe defaults."
                )
            kept.append(fixed)
        return kept

    def _restore_one(self, slot: _Slot, verdict: Verdict) -> Event:
        to_mono = self.clock.monotonic() - self.clock.wall()
        saved = _saved_state(verdict)
        breaker = slot.breaker = Breaker.from_state(verdict.key, self.policy, saved, to_mono)
        if breaker.opened_at is not None:
            if saved.state is State.HALF_OPEN:
                # It lost its probe with the old process: open, and due now.
                breaker.opened_at = min(
                    breaker.opened_at, self.clock.monotonic() - breaker.cooldown
                )
            self._track(verdict.key, settled=False)
            self._schedule_poll(breaker.opened_at + breaker.cooldown)
        slot.credential_worked_at = verdict.credential_ok_at
        slot.credential_revoked = verdict.credential_revoked
        slot.dirty = self._fleet is not None  # the fleet's verdict, if any, wins on joining
        fields = {
            "state": verdict.state,
            "count": verdict.count,
            "last_failure_t": self._t(verdict.last_failure_at),
            "opened_t": self._t(verdict.opened_at),
            "cooldown_seconds": verdict.cooldown,
            "failed_probes": verdict.failed_probes,
            "paged": verdict.paged,
            "rate_limited_streak": verdict.rate_limited_streak,
            "last_retry_after_seconds": verdict.last_retry_after,
        }
        agent = self._transition_agent(slot, None)
        return self._emit(ev.RESTORED, verdict.key, agent, fields, self._view(slot))

    # -- the call path ------------------------------------------------------------------------

    def key_for(self, agent: str, backend: str, credential: str) -> str:
        return agent if self._agent_policy else f"{backend}@{credential}"

    def guard(self, key: str, *, agent: str, lease: float, **settings: Any) -> Guard:
        """A reusable guard on one key, for code that makes its own calls (`engine.guard`):
        `with guard:` or `async with guard:` admits or raises `BreakerOpen`, and records
        the body's outcome. `settings`: `tool`, `deadline_seconds`, `classifier`."""
        return Guard(self, key, agent=agent, lease=lease, **settings)

    def new_call(
        self, key: str, agent: str, platform: str, tool: str, deadline_seconds: float
    ) -> Call:
        """A ticket for one call: an integer number (its printed id is made only when a line
        needs it) and the settings its line reports."""
        number = next(self._call_ids)
        if number >= self._calls_refill:
            self._reserve_more(calls=number)
        slot = self._slots.get(key)
        if slot is None or agent not in slot.agents:
            self._slot(key, agent)
        return Call(number, key, agent, platform, tool, deadline_seconds)

    def idempotency_key(self, call: str | int) -> str:
        """What every attempt of a call sends upstream as its `Idempotency-Key`: the call's
        printed id or its number."""
        return f"{self.instance}.{call_id(call) if isinstance(call, int) else call}"

    def admit(self, call: Call, lease: float) -> Admission:
        """Let the call in, as normal or as the one probe, or refuse it (`call.denied`).

        A transition this causes (a due half-open) is on disk before it returns."""
        slot = self._slots[call.key]
        breaker = slot.breaker
        # The seq is read before the state: if a trip lands in between, this call still reads
        # as admitted before it, which is what a closed breaker let in.
        seq = self._seq
        if breaker.state is _CLOSED:
            call.admitted_as = "normal"
            call.admitted_wall = self._wall()
            call.admitted_seq = seq
            return ADMIT_NORMAL
        if not (self._listeners or self.audit is not None):  # `_watched()`, inlined
            # Nobody reads a refusal's line: a breaker in its cooldown refuses without a lock.
            refusal = breaker.cooling(self.clock.monotonic())
            if refusal is not None:
                slot.denied[refusal.reason] += 1
                return refusal
        admission, owed = self._admit_slow(call, lease)
        self._settle(owed)
        return admission

    async def admit_async(self, call: Call, lease: float) -> Admission:
        """`admit` for a coroutine: the wait for the disk never blocks the event loop."""
        slot = self._slots[call.key]
        breaker = slot.breaker
        seq = self._seq
        if breaker.state is _CLOSED:
            call.admitted_as = "normal"
            call.admitted_wall = self._wall()
            call.admitted_seq = seq
            return ADMIT_NORMAL
        if not (self._listeners or self.audit is not None):
            refusal = breaker.cooling(self.clock.monotonic())
            if refusal is not None:
                slot.denied[refusal.reason] += 1
                return refusal
        if self._fleet is not None and self._fleet.asks(breaker, self.clock.monotonic()):
            # A round trip to the shared store: on a worker thread, never on the loop.
            admission, owed = await asyncio.to_thread(self._admit_slow, call, lease)
        else:
            admission, owed = self._admit_slow(call, lease)
        await self.settle_async(owed)
        return admission

    def _admit_slow(self, call: Call, lease: float) -> tuple[Admission, Owed]:
        slot = self._slots[call.key]
        with slot.lock:
            admission = self._admit_locked(call, slot, lease)
            owed = self._take_owed(slot)
        self._deliver()
        return admission, owed

    def _admit_locked(self, call: Call, slot: _Slot, lease: float) -> Admission:
        """Under the key's lock: expire a lost probe, admit or refuse, write what that caused."""
        now = self.clock.monotonic()
        lease += LEASE_GRACE_SECONDS
        fleet = self._fleet
        decided = None
        if fleet is not None and fleet.asks(slot.breaker, now):
            decided = fleet.admit(slot, call.number, lease)
        if decided is None:
            self._expire(slot, now)
            admission, transitions = slot.breaker.admit(call.number, now, lease)
            if transitions or admission.as_probe:
                self._changed_alone(slot)
        else:
            admission, transitions = decided
        breaker = slot.breaker
        self._apply(slot, transitions, call.agent, cause=None)
        if admission.allowed:
            call.admitted_as = "probe" if admission.as_probe else "normal"
            call.admitted_wall = self._wall()
            call.admitted_seq = self._seq
            if admission.as_probe:
                slot.probe = call
                self._schedule_poll(breaker.probe_deadline + _JUST_AFTER)
        else:
            slot.denied[admission.reason] += 1
            if self._watched():
                denied = CallDenied(
                    0,
                    call.key,
                    self._call_agent(call),
                    0.0,
                    call.number,
                    call.platform,
                    admission.reason.value if admission.reason else None,
                    round(admission.retry_after, 3),
                )
                self._publish(denied, self._new_view(slot))
        return admission

    def may_retry(self, call: Call) -> bool:
        """The re-check before a retry: a closed breaker or this call's own probe slot."""
        breaker = self._slots[call.key].breaker
        return breaker.state is _CLOSED or breaker.is_probe(call.number)

    def extend_probe(self, call: Call, seconds: float) -> None:
        slot = self._slots[call.key]
        with slot.lock:
            breaker = slot.breaker
            if breaker.is_probe(call.number):
                breaker.extend_probe(call.number, seconds)
                self._schedule_poll(breaker.probe_deadline + _JUST_AFTER)

    def complete(
        self,
        call: Call,
        outcome: Outcome,
        fault: str,
        agent_status: int | str,
        refresh: str | None = None,
        platform_status: int | None = None,
    ) -> Event | None:
        """Record a finished call: its `call.completed` line, then what it caused. A transition
        it caused is on disk before it returns (at most `COMMIT_WAIT`)."""
        if self._untouched(call, outcome):
            return None
        line, owed = self._record(call, outcome, fault, agent_status, refresh, platform_status)
        self._settle(owed)
        return line

    async def complete_async(
        self,
        call: Call,
        outcome: Outcome,
        fault: str,
        agent_status: int | str,
        refresh: str | None = None,
        platform_status: int | None = None,
    ) -> Event | None:
        """`complete` for a coroutine: the wait for the disk never blocks the event loop."""
        if self._untouched(call, outcome):
            return None
        if self._fleet is not None and not self._unchanging(self._slots[call.key], outcome):
            # A round trip to the shared store: on a worker thread, never on the loop.
            line, owed = await asyncio.to_thread(
                self._record, call, outcome, fault, agent_status, refresh, platform_status
            )
        else:
            line, owed = self._record(call, outcome, fault, agent_status, refresh, platform_status)
        await self.settle_async(owed)
        return line

    def _unchanging(self, slot: _Slot, outcome: Outcome) -> bool:
        """A success on a closed breaker with no failures counted and a known credential: it
        changes nothing, so it needs only its line (no expiry check, no record, no verdict)."""
        breaker = slot.breaker
        return (
            outcome.cls is _SUCCESS
            and breaker.state is _CLOSED
            and breaker.count == 0
            and (self._agent_policy or slot.credential_worked_at is not None)
        )

    def _untouched(self, call: Call, outcome: Outcome) -> bool:
        """Nothing would change and nobody is watching: a healthy call costs no lock and no
        line (the audit log keeps no successes)."""
        if outcome.cls is not _SUCCESS or self._listeners:
            return False
        slot = self._slots[call.key]
        breaker = slot.breaker
        return (
            breaker.state is _CLOSED
            and breaker.count == 0
            and (self._agent_policy or slot.credential_worked_at is not None)
        )

    def _record(
        self,
        call: Call,
        outcome: Outcome,
        fault: str,
        agent_status: int | str,
        refresh: str | None,
        platform_status: int | None,
    ) -> tuple[Event, Owed]:
        slot = self._slots[call.key]
        if self._unchanging(slot, outcome):
            with slot.lock:
                quiet = self._unchanging(slot, outcome)  # again, now that no one can change it
                if quiet:
                    line = self._call_line(
                        call, outcome, False, fault, agent_status, refresh, platform_status, slot
                    )
            if quiet:
                self._deliver()
                return line, None
        with slot.lock:
            now = self.clock.monotonic()
            count_before = slot.breaker.count
            shared = None
            fleet = self._fleet
            if fleet is not None and (
                outcome.counted or outcome.cls is _SUCCESS or slot.breaker.state is not _CLOSED
            ):
                counted = "1" if outcome.counted else "0"
                call_token = token(self.instance, call.number)
                shared = fleet.step(
                    slot, "record", call_token, outcome.cls.value, counted, outcome.detail
                )
            # The breaker moves first, so the last line this writes carries its view after.
            if shared is None:
                self._expire(slot, now)
                is_probe = slot.breaker.is_probe(call.number)
                transitions = slot.breaker.record(call.number, outcome, now)
            else:
                is_probe, transitions = shared.was_probe, shared.transitions
            breaker = slot.breaker
            if is_probe or breaker.probe_id is None:
                slot.probe = None
            revoked = self._note_credential(slot, call, outcome)
            moved = outcome.counted or breaker.count != count_before
            if shared is None and moved:
                self._changed_alone(slot)
            line = self._call_line(
                call,
                outcome,
                is_probe,
                fault,
                agent_status,
                refresh,
                platform_status,
                None if transitions or revoked else slot,
                moved,
            )
            self._apply(slot, transitions, call.agent, cause=line, attach=not revoked)
            if revoked:
                self._revoked(slot, call, line)
            if moved and not transitions:
                self._persist(slot, urgent=False)
            owed = self._take_owed(slot)
        self._deliver()
        return line, owed

    def refuse(self, call: Call, outcome: Outcome, agent_status: int | str) -> Event:
        """A refusal before the breaker: a line, attempts 0, never counted, no probe slot."""
        slot = self._slots[call.key]
        with slot.lock:
            line = self._call_line(call, outcome, False, "none", agent_status, None, None, slot)
        self._deliver()
        return line

    def _call_line(
        self,
        call: Call,
        outcome: Outcome,
        is_probe: bool,
        fault: str,
        agent_status: int | str | None,
        refresh: str | None,
        platform_status: int | None,
        slot: _Slot | None = None,
        moved: bool = False,
    ) -> Event:
        """Under the key's lock: the call's line, which carries the key's view when `slot` is
        given and the view changed (`moved`, a new agent, the key's first line)."""
        details = (
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
        view = None
        if slot is not None and (moved or len(slot.agents) != slot.shown_agents):
            view = self._view(slot)
        event = CallCompleted(
            0,
            call.key,
            call.key if self._agent_policy else call.agent,
            0.0,
            details,
            outcome,
            is_probe,
            fault,
            agent_status,
            refresh,
            platform_status,
        )
        self._publish(event, view)
        return event

    # -- credentials (tool policy) ---------------------------------------------------------

    def credential_worked(self, key: str) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.credential_worked_at is not None

    def credential_paused(self, key: str) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.credential_revoked

    def _note_credential(self, slot: _Slot, call: Call, outcome: Outcome) -> bool:
        """Under the key's lock: what the outcome says of the key's credential. True when it
        was just revoked: the caller writes that line (`_revoked`) after the call's own."""
        if self._agent_policy:
            return False
        if outcome.is_success and slot.credential_worked_at is None:
            slot.credential_worked_at = self._wall()
            self._persist(slot, urgent=True, what=f"{call.key}: the credential worked")
        elif outcome.cls is OutcomeClass.CREDENTIAL_REVOKED and not slot.credential_revoked:
            slot.credential_revoked = True
            return True
        return False

    def _revoked(self, slot: _Slot, call: Call, cause: Event) -> None:
        fields = {"cause_seq": cause.seq}
        event = self._emit(
            ev.CREDENTIAL_REVOKED, call.key, call.agent, fields, self._view(slot), wall=cause.wall
        )
        self._persist(slot, urgent=True, what=_written(event))

    def restore_credential(self, key: str, actor: str) -> Event:
        """Mark-credential-fixed: calls on this key go out again."""
        slot = self._known(key)
        with slot.lock:
            slot.credential_revoked = False
            agent = self._key_agent(slot)
            event = self._emit(
                ev.CREDENTIAL_RESTORED, key, agent, {"actor": actor}, self._view(slot)
            )
            self._persist(slot, urgent=True, what=_written(event))
            owed = self._take_owed(slot)
        self._deliver()
        self._settle(owed)
        return event

    # -- operator and time ------------------------------------------------------------------

    def reset(self, key: str, actor: str, reason: str) -> Event:
        slot = self._known(key)
        with slot.lock:
            slot.probe = None
            fleet = self._fleet
            shared = None if fleet is None else fleet.step(slot, "reset", actor, reason)
            if shared is None:
                transitions: Sequence[Transition] = slot.breaker.reset(actor, reason)
                self._changed_alone(slot)
            else:
                transitions = shared.transitions
            events = self._apply(slot, transitions, None, cause=None)
            self._persist(slot, urgent=True, what=_written(events[-1]))
            owed = self._take_owed(slot)
        self._deliver()
        self._settle(owed)
        return events[-1]

    def poll(self) -> list[Event]:
        """Write what time alone causes: half-opens and expired probes, at their moment."""
        with self._meta:
            keys = sorted(self._unsettled)
        written: list[Event] = []
        for key in keys:
            slot = self._slots[key]
            with slot.lock:
                now = self.clock.monotonic()
                shared = None
                if self._fleet is not None and _due(slot.breaker, now):
                    shared = self._fleet.step(slot, "tick", written=written)
                if shared is None:
                    written += self._expire(slot, now)
                    transitions = slot.breaker.poll(now)
                    if transitions:
                        self._changed_alone(slot)
                else:
                    transitions = list(shared.transitions)
                written += self._apply(slot, transitions, None, None)
                self._take_owed(slot)  # time caused these: no caller waits for them
        self._deliver()
        return written

    def _expire(self, slot: _Slot, now: float) -> list[Event]:
        """Under the key's lock: a probe past its lease is recorded as a counted failure."""
        breaker = slot.breaker
        number = breaker.expired_probe(now)
        if number is None:
            return []
        call = slot.probe
        slot.probe = None
        transitions = breaker.record(number, EXPIRED, now)
        self._changed_alone(slot)
        if call is None:  # another replica's probe, expired here while the store is lost
            return self._apply(slot, transitions, None, cause=None)
        line = self._call_line(call, EXPIRED, True, "expired", None, None, None)
        return [line, *self._apply(slot, transitions, call.agent, cause=line)]

    def _changed_alone(self, slot: _Slot) -> None:
        """Under the key's lock: the breaker moved without the store (lost, or a foreign key),
        so the store hears this replica's verdict when it is back."""
        if self._fleet is not None:
            slot.dirty = True

    # -- views ------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        return self._seq

    def keys(self) -> list[str]:
        return list(self._slots)

    def tally(self, key: str, name: str) -> int:
        """How many of the key's events had this `tally_name` so far (0 for an unknown key)."""
        slot = self._slots.get(key)
        return 0 if slot is None else slot.tally[name]

    def tallies(self) -> list[tuple[str, dict[DenyReason | None, int], dict[str, int]]]:
        """Each key's refusals by reason and its events by `events.tally_name`, copied now:
        what metrics read at scrape time."""
        return [(k, dict(s.denied), dict(s.tally)) for k, s in list(self._slots.items())]

    def breaker(self, key: str) -> Breaker:
        return self._known(key).breaker

    def view(self, key: str) -> BreakerView:
        return self._view(self._known(key), self._seq)

    def _view(self, slot: _Slot, seq: int = 0) -> BreakerView:
        """Under the key's lock: its picture as of `seq` (an event about to be written takes
        its own seq in `_queue`)."""
        b = slot.breaker.snapshot(self.clock.wall() - self.clock.monotonic())
        return picture(
            slot.breaker.key,
            tuple(slot.agents),
            b,
            paused=slot.credential_revoked,
            seq=seq,
            probe_since=self._probe_since(slot),
        )

    def _probe_since(self, slot: _Slot) -> float | None:
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
            slot.probe_seen = seen = (probe, self.clock.wall() if since is None else since)
        return seen[1]

    def _new_view(self, slot: _Slot) -> BreakerView | None:
        """The key's view for a line that changes nothing in the breaker: only the key's
        first line and the first from a new agent need one."""
        return self._view(slot) if len(slot.agents) != slot.shown_agents else None

    def views(self, keys: Iterable[str] | None = None) -> list[BreakerView]:
        """Consistent pictures of the given keys (unknown ones skipped), or of every breaker."""
        if keys is None:
            return self.snapshot()[1]
        pictures = []
        for key in keys:
            slot = self._slots.get(key)
            if slot is not None:
                with slot.lock:
                    pictures.append(self.view(key))
        return pictures

    def snapshot(self) -> tuple[int, list[BreakerView]]:
        """Every breaker and the seq of the last event they reflect, read together: every
        key's lock is held (in key order), so no transition is half-written meanwhile."""
        with self._meta:
            slots = sorted(self._slots.items())
        with contextlib.ExitStack() as held:
            for _, slot in slots:
                held.enter_context(slot.lock)
            return self._seq, [self.view(key) for key, _ in slots]

    def close(self) -> None:
        """Commit what is queued, give back the unused reservation, release the state dir.
        Closing twice is harmless."""
        with self._meta:
            if self._closed:
                return
            self._closed = True
            calls = next(self._call_ids) - 1
        if self._fleet is not None:
            self._fleet.store.close()
        if self.audit is not None:
            self.audit.close()
        if self.store is not None:
            self.store.close()
        if self._mark_file is not None:
            # Every number used is on disk now, so the next run may continue without a gap.
            self._save_mark(self._seq, calls)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # -- internals --------------------------------------------------------------------------

    def _slot(self, key: str, agent: str | None) -> _Slot:
        with self._meta:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(Breaker(key, self.policy))
            if agent is not None and agent not in slot.agents:
                slot.agents = [*slot.agents, agent]  # readers hold no lock: never edit in place
            return slot

    def _known(self, key: str) -> _Slot:
        slot = self._slots.get(key)
        if slot is None:
            known = sorted(self._slots)
            shown = ", ".join(known[:10]) or "none yet"
            more = f" and {len(known) - 10} more" if len(known) > 10 else ""
            raise UnknownKey(f"no breaker with key {key!r} (known: {shown}{more})")
        return slot

    def _apply(
        self,
        slot: _Slot,
        transitions: Sequence[Transition],
        agent: str | None,
        cause: Event | None,
        *,
        attach: bool = True,
    ) -> list[Event]:
        """Under the key's lock, after the breaker moved: number the transitions (the last
        carries the key's view unless `attach` is off: a later line takes it), track the key,
        owe their commit. A transition caused by a line (a call's, or a page's `reopened`)
        carries its `cause_seq` and its time: the trace's `t` is the same (DESIGN)."""
        key = slot.breaker.key
        written: list[Event] = []
        last = len(transitions) - 1
        for n, transition in enumerate(transitions):
            fields = dict(transition.fields)
            by = written[-1] if transition.type == ev.PAGE and written else cause
            if by is not None:
                fields["cause_seq"] = by.seq
            caller = None if transition.type in _TIME_OR_OPERATOR else agent
            view = self._view(slot) if attach and n == last else None
            event = self._emit(
                transition.type,
                key,
                self._transition_agent(slot, caller),
                fields,
                view,
                wall=None if by is None else by.wall,
            )
            written.append(event)
        if transitions:
            self._track(key, settled=slot.breaker.state is _CLOSED)
            due = slot.breaker.reopens_at
            if due is not None:
                self._schedule_poll(due)
            self._persist(slot, urgent=True, what=_written(written[-1]))
        return written

    def _track(self, key: str, *, settled: bool) -> None:
        """Keys not closed are the ones `poll` looks at."""
        with self._meta:
            if settled:
                self._unsettled.discard(key)
            else:
                self._unsettled.add(key)

    def _schedule_poll(self, when: float) -> None:
        """The scheduler is called holding a key's lock: it must run `poll` later, not now.
        With a shared store a due key is a round trip, so the poll runs on a thread of its own
        (a scheduler on an event loop never waits for Redis)."""
        if self.scheduler is not None:
            self.scheduler(when, self.poll if self._fleet is None else self._poll_aside)

    def _poll_aside(self) -> None:
        """One poll thread at a time: a poll asked for while one runs makes it poll again."""
        with self._meta:
            if self._polling:
                self._poll_again = True
                return
            self._polling = True
        threading.Thread(
            target=self._poll_while_asked, name="breakerdeck-poll", daemon=True
        ).start()

    def _poll_while_asked(self) -> None:
        while True:
            self.poll()
            with self._meta:
                if not self._poll_again:
                    self._polling = False
                    return
                self._poll_again = False

    def _watched(self) -> bool:
        """Whether a line would reach anyone: a listener or the audit log."""
        return bool(self._listeners) or self.audit is not None

    def _emit(
        self,
        type_: str,
        key: str,
        agent: str | None,
        fields: dict[str, Any],
        view: BreakerView | None = None,
        *,
        wall: float | None = None,
    ) -> Event:
        """Under the key's lock: number the event and queue it for the log and the listeners.
        Numbering and the audit hand-off share one short lock, so the log is in seq order.
        `wall` is the time of the line that caused it; else it is timed as it is numbered."""
        event = Event(0, type_, key, agent, wall or 0.0, fields)
        self._publish(event, view)
        return event

    def _publish(self, event: Event, view: BreakerView | None) -> None:
        """Under the key's lock: number and time the event built outside the numbering lock
        (so threads wait on it only for the seq and the hand-off), put the view (as of this
        event) on it before anyone can see it, and queue it for the log and the listeners."""
        with self._numbering:
            self._seq = seq = self._seq + 1
            if seq >= self._seq_refill:
                self._reserve_more()
            event.seq = seq
            if not event.wall:
                event.wall = self._wall()
            name = tally_name(event) if event.type != _DENIED and not event.relayed else None
            if name is not None:
                self._slots[event.key].tally[name] += 1
            if view is not None:
                view.seq = seq
                event.view = view
                self._slots[event.key].shown_agents = len(view.agents)
            self._hand_off(event)

    def _hand_off(self, event: Event) -> None:
        """Under `_numbering`: to the audit log and the delivery queue, in seq order."""
        if self.audit is not None and not event.relayed:
            kept = ev.audit_form(event)
            if kept is not None:
                self.audit.append(kept)
        if self._listeners or (event.type == _PAGE and self.page_hook is not None):
            self._undelivered.append(event)

    def _deliver(self) -> None:
        """After the key's lock is released: hand waiting events to the listeners and the page
        hook, in seq order, one deliverer at a time. A caller that finds another delivering
        leaves its events to it: the deliverer looks again after letting go, so none is left."""
        waiting = self._undelivered
        while waiting:
            if not self._delivering.acquire(blocking=False):
                return
            try:
                while waiting:
                    self._hand_out(waiting.popleft())
            finally:
                self._delivering.release()

    def _hand_out(self, event: Event) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as error:
                self._drop_listener(listener, error)
        if event.type == _PAGE and self.page_hook is not None and not event.relayed:
            self.page_hook(ev.record(event, self.epoch))

    def _call_agent(self, call: Call) -> str:
        return call.key if self._agent_policy else call.agent

    def _key_agent(self, slot: _Slot) -> str | None:
        return slot.breaker.key if self._agent_policy else None

    def _transition_agent(self, slot: _Slot, caller: str | None) -> str | None:
        return self._key_agent(slot) if self._agent_policy else caller

    def _t(self, wall: float | None) -> float | None:
        return None if wall is None else round(wall - self.epoch, 3)

    def _persist(self, slot: _Slot, *, urgent: bool, what: str | None = None) -> None:
        """Under the key's lock: queue its verdict; an urgent one is owed to the caller."""
        if self.store is None:
            return
        ticket = self.store.submit(self._verdict(slot), urgent=urgent)
        if urgent:
            slot.owed = ticket
            slot.owed_what.append(what or slot.breaker.key)

    def _persist_all(self) -> None:
        """Every key's verdict again: the store's file was replaced after damage."""
        with self._meta:
            slots = list(self._slots.values())
        for slot in slots:
            with slot.lock:
                self._persist(slot, urgent=False)

    @staticmethod
    def _take_owed(slot: _Slot) -> Owed:
        """Under the key's lock: what the caller now leaving must see on disk, if anything."""
        if not slot.owed_what:
            return None
        owed = (slot.owed, slot.owed_what)
        slot.owed_what = []
        return owed

    def _settle(self, owed: Owed) -> None:
        """Outside the lock: wait (at most `COMMIT_WAIT`) for the verdict and its lines to be
        committed; past that, the call returns and the write is listed in `problems`."""
        if owed is None or self.store is None or self.audit is None:
            return
        ticket, what = owed
        deadline = time.monotonic() + COMMIT_WAIT
        stored = self.store.wait(ticket, COMMIT_WAIT)
        logged = self.audit.flush(max(deadline - time.monotonic(), 0.0))
        if not (stored and logged):
            self._problems.add(
                f"{'; '.join(what)}: not on disk within {COMMIT_WAIT:g} s; kept in memory and "
                "written when the disk allows."
            )

    async def settle_async(self, owed: Owed) -> None:
        """`_settle` for a coroutine: the wait runs on a worker thread, so every other
        coroutine on the loop goes on meanwhile. Nothing owed costs no thread."""
        if owed is None or self.store is None or self.audit is None:
            return
        await asyncio.to_thread(self._settle, owed)

    def _reserve_more(self, calls: int = 0) -> None:
        """Move the reservations a block ahead and save them off the call path."""
        with self._reserving:
            if self._seq < self._seq_refill and calls < self._calls_refill:
                return  # another thread got here first
            self._seq_ceiling = max(self._seq_ceiling, self._seq + NUMBER_BLOCK)
            self._calls_ceiling = max(self._calls_ceiling, calls + NUMBER_BLOCK)
            self._set_refills()
            if self._seq > self._seq_saved:
                self._problems.add(
                    f"Seqs past {self._seq_saved} were handed out before their reservation "
                    "reached the disk: a crash now could repeat them."
                )
            seq_ceiling, calls_ceiling = self._seq_ceiling, self._calls_ceiling
        if self.store is not None:
            self.store.run_on_writer(lambda: self._save_mark(seq_ceiling, calls_ceiling))

    def _set_refills(self) -> None:
        """Halfway through a block the next one is reserved, so the save has time to land."""
        self._seq_refill = self._seq_ceiling - NUMBER_BLOCK // 2
        self._calls_refill = self._calls_ceiling - NUMBER_BLOCK // 2

    def _save_mark(self, seq: int, calls: int) -> None:
        assert self._mark_file is not None
        mark = {"seq": seq, "wall": self.clock.wall(), "calls": calls}
        try:
            statedir.write_private(self._mark_file, json.dumps(mark))
        except OSError as error:
            self._problems.add(f"{self._mark_file}: could not be written ({error}).")
            return
        self._seq_saved = max(self._seq_saved, seq)

    def _verdict(self, slot: _Slot) -> Verdict:
        b = slot.breaker.snapshot(self.clock.wall() - self.clock.monotonic())
        return Verdict(
            key=slot.breaker.key,
            agent=slot.agents[0] if slot.agents else None,
            state=b.state,
            count=b.count,
            last_failure_at=b.last_failure_at,
            opened_at=b.opened_at,
            cooldown=b.cooldown,
            failed_probes=b.failed_probes,
            paged=b.paged,
            rate_limited_streak=b.rate_limited_streak,
            last_retry_after=b.last_retry_after,
            trip_cause=b.trip_cause.value if b.trip_cause else None,
            credential_ok_at=slot.credential_worked_at,
            credential_revoked=slot.credential_revoked,
            saved_at=self.clock.wall(),
            last_failure_detail=b.last_failure_detail,
        )


@dataclass(frozen=True, slots=True)
class Mark:
    """The numbers a run may have handed out (its reservation; after a clean close, the last
    used) and the wall time it was written."""

    seq: int = 0
    wall: float | None = None
    calls: int = 0


def read_mark(directory: Path, problems: Problems | None = None) -> Mark:
    """The numbers a previous run reserved (or, after a clean close, used), and when."""
    path = directory / MARK_FILE
    try:
        data = json.loads(statedir.read_private(path))
        return Mark(int(data["seq"]), float(data["wall"]), int(data.get("calls", 0)))
    except StateDirError as error:
        if isinstance(error.__cause__, FileNotFoundError):
            return Mark()
        problem = f"{path}: not used ({error}); continuing from the audit log"
    except (ValueError, KeyError, TypeError) as error:
        problem = f"{path}: unreadable mark ({error}); continuing from the audit log"
    if problems is not None:
        problems.add(problem)
    return Mark()


def _lock_state_dir(directory: Path) -> int:
    """An exclusive lock for this process's life: two engines on one dir would interleave."""
    path = directory / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        raise StateDirError(f"state dir {directory}: cannot open {path} ({error})") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (pid {holder})" if holder.isdigit() else ""
        raise StateDirError(
            f"state dir {directory} is in use by another breakerdeck process{by}: "
            "each process needs a state dir of its own"
        ) from error
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _saved_state(verdict: Verdict) -> BreakerState:
    """A stored verdict as the breaker's fields (wall times). A breaker stored as not closed
    without an opening time comes back closed: it could never be due."""
    state = State(verdict.state) if verdict.opened_at is not None else State.CLOSED
    return BreakerState(
        state=state,
        count=verdict.count,
        last_failure_at=verdict.last_failure_at,
        last_failure_detail=verdict.last_failure_detail,
        opened_at=None if state is State.CLOSED else verdict.opened_at,
        reopens_at=None,
        cooldown=verdict.cooldown,
        failed_probes=verdict.failed_probes,
        paged=verdict.paged,
        rate_limited_streak=verdict.rate_limited_streak,
        last_retry_after=verdict.last_retry_after,
        trip_cause=OutcomeClass(verdict.trip_cause) if verdict.trip_cause else None,
    )


def _due(breaker: Breaker, now: float) -> bool:
    """Whether time alone changes the breaker now: its cooldown or its probe's lease ended."""
    due = breaker.reopens_at
    return (due is not None and now >= due) or breaker.expired_probe(now) is not None


def _written(event: Event) -> str:
    return f"{event.key}: {event.type} (seq {event.seq})"
