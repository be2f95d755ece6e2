"""The engine: breakers by key, one sequence of events, persistence and subscribers.

The breaker core decides; this shell stamps decisions with sequence numbers and times, writes
them in the design's order (a call's line, then the transitions it caused), persists verdicts,
and hands events to the audit log and to subscribers. One lock orders all of that; the closed
path takes no lock.

Storage never sits on the call path: verdicts and events are queued for writer threads. The one
exception the design asks for is a transition, reset or credential flag, whose caller waits
(after the lock is released, at most `COMMIT_WAIT` seconds) until it is on disk.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from breakerdeck.engine import events as ev
from breakerdeck.engine import statedir
from breakerdeck.engine.audit import AuditLog
from breakerdeck.engine.breaker import ADMIT_NORMAL, Admission, Breaker, State, Transition
from breakerdeck.engine.clock import Clock, SystemClock
from breakerdeck.engine.errors import StateDirError, UnknownKey
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
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
_CLOSED = State.CLOSED

EXPIRED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="probe never reported back")


@dataclass(slots=True)
class Call:
    """One call's ticket, from the harness's first look at it to its `call.completed` line."""

    call_id: str
    key: str
    agent: str
    platform: str
    tool: str
    deadline_seconds: float
    attempts: int = 0
    admitted_wall: float | None = None
    admitted_as: str | None = None
    admitted_seq: int | None = None


@dataclass(slots=True)
class BreakerView:
    """A read-only picture of one breaker for the console, the feed and `status`."""

    key: str
    agents: tuple[str, ...]
    state: str
    count: int
    trip_cause: str | None
    opened_at: float | None
    reopens_at: float | None
    cooldown: float
    failed_probes: int
    paged: bool
    paused: bool
    last_failure_at: float | None

    @property
    def shared(self) -> bool:
        return len(self.agents) > 1


@dataclass(slots=True)
class _Slot:
    """A breaker with what the engine knows around it: who calls it, and its credential."""

    breaker: Breaker
    agents: list[str] = field(default_factory=list)
    credential_worked_at: float | None = None
    credential_revoked: bool = False


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
    ) -> None:
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
        self._probes: dict[str, Call] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()
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
        self._owed = 0  # the store ticket the current caller must see committed
        self._owed_what: list[str] = []
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
        return found

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- setup -------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Called with every event, in order, under the engine's lock: keep it quick."""
        with self._lock:
            self._listeners = [*self._listeners, listener]
        return lambda: self._unsubscribe(listener)

    def _drop_listener(self, listener: Listener, error: Exception) -> None:
        """A listener that raises is cut off: a broken subscriber never breaks the call path."""
        problem = f"an event listener failed and was detached: {error!r}"
        log.error(problem)
        self._problems.add(problem)
        self._unsubscribe(listener)

    def _unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners = [kept for kept in self._listeners if kept is not listener]

    def restore(self) -> list[Event]:
        """Seed breakers from the verdict store; call once subscribers are attached."""
        if self.store is None:
            return []
        restored = []
        with self._lock:
            for verdict in self._bounded(self.store.load()):
                if is_stale(
                    verdict,
                    longest_cooldown=self.policy.longest_cooldown(),
                    window=self.policy.window,
                    now=self.clock.wall(),
                ):
                    if verdict.credential_ok_at is None and not verdict.credential_revoked:
                        self.store.delete(verdict.key)
                    else:
                        slot = self._slot(verdict.key, verdict.agent)
                        slot.credential_worked_at = verdict.credential_ok_at
                        slot.credential_revoked = verdict.credential_revoked
                        self._persist(verdict.key, urgent=False)
                    continue
                restored.append(self._restore_one(verdict))
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

    def _restore_one(self, verdict: Verdict) -> Event:
        slot = self._slot(verdict.key, verdict.agent)
        breaker = slot.breaker
        to_mono = self.clock.monotonic() - self.clock.wall()
        breaker.count = verdict.count
        breaker.last_failure_at = _shift(verdict.last_failure_at, to_mono)
        breaker.cooldown = verdict.cooldown
        breaker.failed_probes = verdict.failed_probes
        breaker.paged = verdict.paged
        breaker.rate_limited_streak = verdict.rate_limited_streak
        breaker.last_retry_after = verdict.last_retry_after
        breaker.last_failure_detail = verdict.last_failure_detail
        breaker.trip_cause = OutcomeClass(verdict.trip_cause) if verdict.trip_cause else None
        if verdict.state != State.CLOSED and verdict.opened_at is not None:
            # A half-open verdict lost its probe with the old process: open, and due now.
            breaker.state = State.OPEN
            breaker.opened_at = verdict.opened_at + to_mono
            if verdict.state == State.HALF_OPEN:
                breaker.opened_at = min(
                    breaker.opened_at, self.clock.monotonic() - breaker.cooldown
                )
            self._unsettled.add(verdict.key)
            self._schedule_poll(breaker.opened_at + breaker.cooldown)
        slot.credential_worked_at = verdict.credential_ok_at
        slot.credential_revoked = verdict.credential_revoked
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
        return self._emit(ev.RESTORED, verdict.key, self._transition_agent(slot, None), fields)

    # -- the call path ------------------------------------------------------------------------

    def key_for(self, agent: str, backend: str, credential: str) -> str:
        return agent if self._agent_policy else f"{backend}@{credential}"

    def new_call(
        self, *, key: str, agent: str, platform: str, tool: str, deadline_seconds: float
    ) -> Call:
        number = next(self._call_ids)
        if number >= self._calls_refill:
            self._reserve_more(calls=number)
        call_id = f"call-{number:06d}"
        slot = self._slots.get(key)
        if slot is None or agent not in slot.agents:
            self._slot(key, agent)
        return Call(call_id, key, agent, platform, tool, deadline_seconds)

    def idempotency_key(self, call_id: str) -> str:
        """What every attempt of a call sends upstream as its `Idempotency-Key`."""
        return f"{self.instance}.{call_id}"

    def admit(self, call: Call, lease: float) -> Admission:
        """Let the call in, as normal or as the one probe, or refuse it (`call.denied`)."""
        breaker = self._slots[call.key].breaker
        # The seq is read before the state: if a trip lands in between, this call still reads
        # as admitted before it, which is what a closed breaker let in.
        seq = self._seq
        if breaker.state is _CLOSED:
            self._mark_admitted(call, "normal", seq)
            return ADMIT_NORMAL
        with self._lock:
            admission = self._admit_locked(call, breaker, lease)
            owed = self._take_owed()
        self._settle(owed)
        return admission

    def _admit_locked(self, call: Call, breaker: Breaker, lease: float) -> Admission:
        """Under the lock: expire a lost probe, admit or refuse, write what that caused."""
        now = self.clock.monotonic()
        self._expire(call.key, now)
        admission, transitions = breaker.admit(call.call_id, now, lease + LEASE_GRACE_SECONDS)
        self._apply(call.key, transitions, call.agent, cause_seq=None)
        if admission.allowed:
            self._mark_admitted(call, "probe" if admission.as_probe else "normal", self._seq)
            if admission.as_probe:
                self._probes[call.key] = call
                self._schedule_poll(breaker.probe_deadline + _JUST_AFTER)
        else:
            fields = {
                "call_id": call.call_id,
                "platform": call.platform,
                "reason": admission.reason.value if admission.reason else None,
                "retry_after_seconds": round(admission.retry_after, 3),
            }
            self._emit(ev.CALL_DENIED, call.key, self._call_agent(call), fields)
        return admission

    def may_retry(self, call: Call) -> bool:
        """The re-check before a retry: a closed breaker or this call's own probe slot."""
        breaker = self._slots[call.key].breaker
        return breaker.state is State.CLOSED or breaker.is_probe(call.call_id)

    def extend_probe(self, call: Call, seconds: float) -> None:
        with self._lock:
            breaker = self._slots[call.key].breaker
            if breaker.is_probe(call.call_id):
                breaker.extend_probe(call.call_id, seconds)
                self._schedule_poll(breaker.probe_deadline + _JUST_AFTER)

    def complete(
        self,
        call: Call,
        outcome: Outcome,
        *,
        fault: str,
        agent_status: int | str,
        refresh: str | None = None,
        platform_status: int | None = None,
    ) -> Event | None:
        """Record a finished call: its `call.completed` line, then what it caused."""
        slot = self._slots[call.key]
        if (
            outcome.cls is _SUCCESS
            and not self._listeners
            and slot.breaker.state is _CLOSED
            and slot.breaker.count == 0
            and (self._agent_policy or slot.credential_worked_at is not None)
        ):
            # Nothing would change and nobody is watching: a healthy call costs no lock and no
            # line (the audit log keeps no successes).
            return None
        with self._lock:
            slot = self._slots[call.key]
            now = self.clock.monotonic()
            self._expire(call.key, now)
            breaker = slot.breaker
            is_probe = breaker.is_probe(call.call_id)
            count_before = breaker.count
            line = self._call_line(
                call, outcome, is_probe, fault, agent_status, refresh, platform_status
            )
            transitions = breaker.record(call.call_id, outcome, now)
            if is_probe or breaker.probe_id is None:
                self._probes.pop(call.key, None)
            self._apply(call.key, transitions, call.agent, cause_seq=line.seq)
            self._note_credential(slot, call, outcome, line.seq)
            if breaker.count != count_before and not transitions:
                self._persist(call.key, urgent=False)
            owed = self._take_owed()
        self._settle(owed)
        return line

    def refuse(self, call: Call, outcome: Outcome, *, agent_status: int | str) -> Event:
        """A refusal before the breaker: a line, attempts 0, never counted, no probe slot."""
        with self._lock:
            return self._call_line(call, outcome, False, "none", agent_status, None, None)

    def _call_line(
        self,
        call: Call,
        outcome: Outcome,
        is_probe: bool,
        fault: str,
        agent_status: int | str | None,
        refresh: str | None,
        platform_status: int | None,
    ) -> Event:
        fields = {
            "call_id": call.call_id,
            "platform": call.platform,
            "tool": call.tool,
            "admitted_t": self._t(call.admitted_wall),
            "admitted_as": call.admitted_as,
            "probe": is_probe,
            "attempts": call.attempts,
            "deadline_seconds": call.deadline_seconds,
            "fault": fault,
            "refresh": refresh,
            "platform_status": platform_status,
            "agent_status": agent_status,
            "outcome": outcome.cls.value,
            "counted": outcome.counted,
            "retry_after_seconds": outcome.retry_after,
            "admitted_seq": call.admitted_seq,
        }
        return self._emit(ev.CALL_COMPLETED, call.key, self._call_agent(call), fields)

    def _mark_admitted(self, call: Call, admitted_as: str, seq: int) -> None:
        call.admitted_as = admitted_as
        call.admitted_wall = self.clock.wall()
        call.admitted_seq = seq

    # -- credentials (tool policy) ---------------------------------------------------------

    def credential_worked(self, key: str) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.credential_worked_at is not None

    def credential_paused(self, key: str) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.credential_revoked

    def _note_credential(self, slot: _Slot, call: Call, outcome: Outcome, cause: int) -> None:
        if self._agent_policy:
            return
        if outcome.is_success and slot.credential_worked_at is None:
            slot.credential_worked_at = self.clock.wall()
            self._persist(call.key, urgent=True, what=f"{call.key}: the credential worked")
        elif outcome.cls is OutcomeClass.CREDENTIAL_REVOKED and not slot.credential_revoked:
            slot.credential_revoked = True
            fields = {"cause_seq": cause}
            event = self._emit(ev.CREDENTIAL_REVOKED, call.key, call.agent, fields)
            self._persist(call.key, urgent=True, what=_written(event))

    def restore_credential(self, key: str, actor: str) -> Event:
        """Mark-credential-fixed: calls on this key go out again."""
        with self._lock:
            slot = self._known(key)
            slot.credential_revoked = False
            event = self._emit(ev.CREDENTIAL_RESTORED, key, self._key_agent(slot), {"actor": actor})
            self._persist(key, urgent=True, what=_written(event))
            owed = self._take_owed()
        self._settle(owed)
        return event

    # -- operator and time ------------------------------------------------------------------

    def reset(self, key: str, actor: str, reason: str) -> Event:
        with self._lock:
            slot = self._known(key)
            self._probes.pop(key, None)
            transitions = slot.breaker.reset(actor, reason)
            events = self._apply(key, transitions, None, cause_seq=None)
            self._persist(key, urgent=True, what=_written(events[-1]))
            owed = self._take_owed()
        self._settle(owed)
        return events[-1]

    def poll(self) -> list[Event]:
        """Write what time alone causes: half-opens and expired probes, at their moment."""
        with self._lock:
            now = self.clock.monotonic()
            written: list[Event] = []
            for key in sorted(self._unsettled):
                written += self._expire(key, now)
                written += self._apply(key, self._slots[key].breaker.poll(now), None, None)
            self._take_owed()  # time caused these: no caller waits for them
            return written

    def _expire(self, key: str, now: float) -> list[Event]:
        breaker = self._slots[key].breaker
        call_id = breaker.expired_probe(now)
        if call_id is None:
            return []
        call = self._probes.pop(key)
        line = self._call_line(call, EXPIRED, True, "expired", None, None, None)
        transitions = breaker.record(call_id, EXPIRED, now)
        return [line, *self._apply(key, transitions, call.agent, cause_seq=line.seq)]

    # -- views ------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        return self._seq

    def keys(self) -> list[str]:
        return list(self._slots)

    def breaker(self, key: str) -> Breaker:
        return self._known(key).breaker

    def view(self, key: str) -> BreakerView:
        slot = self._known(key)
        b = slot.breaker
        to_wall = self.clock.wall() - self.clock.monotonic()
        return BreakerView(
            key=key,
            agents=tuple(slot.agents),
            state=b.state.value,
            count=b.count,
            trip_cause=b.trip_cause.value if b.trip_cause else None,
            opened_at=_shift(b.opened_at, to_wall),
            reopens_at=_shift(b.reopens_at, to_wall),
            cooldown=b.cooldown,
            failed_probes=b.failed_probes,
            paged=b.paged,
            paused=slot.credential_revoked,
            last_failure_at=_shift(b.last_failure_at, to_wall),
        )

    def views(self, keys: Iterable[str] | None = None) -> list[BreakerView]:
        """Consistent pictures of the given keys (unknown ones skipped), or of every breaker."""
        if keys is None:
            return self.snapshot()[1]
        with self._lock:
            return [self.view(key) for key in keys if key in self._slots]

    def snapshot(self) -> tuple[int, list[BreakerView]]:
        """Every breaker and the seq of the last event they reflect, read together."""
        with self._lock:
            return self._seq, [self.view(key) for key in self._slots]

    def close(self) -> None:
        """Commit what is queued, give back the unused reservation, release the state dir.
        Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            calls = next(self._call_ids) - 1
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
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(Breaker(key, self.policy))
            if agent is not None and agent not in slot.agents:
                slot.agents.append(agent)
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
        key: str,
        transitions: Sequence[Transition],
        agent: str | None,
        cause_seq: int | None,
    ) -> list[Event]:
        slot = self._slots[key]
        written: list[Event] = []
        for transition in transitions:
            fields = dict(transition.fields)
            if transition.type == ev.PAGE and written:
                fields["cause_seq"] = written[-1].seq
            elif cause_seq is not None:
                fields["cause_seq"] = cause_seq
            caller = None if transition.type in _TIME_OR_OPERATOR else agent
            event = self._emit(transition.type, key, self._transition_agent(slot, caller), fields)
            written.append(event)
            if transition.type == ev.PAGE and self.page_hook is not None:
                self.page_hook(ev.record(event, self.epoch))
        if transitions:
            if slot.breaker.state is State.CLOSED:
                self._unsettled.discard(key)
            else:
                self._unsettled.add(key)
                due = slot.breaker.reopens_at
                if due is not None:
                    self._schedule_poll(due)
            self._persist(key, urgent=True, what=_written(written[-1]))
        return written

    def _schedule_poll(self, when: float) -> None:
        if self.scheduler is not None:
            self.scheduler(when, self.poll)

    def _emit(self, type_: str, key: str, agent: str | None, fields: dict[str, Any]) -> Event:
        self._seq += 1
        if self._seq >= self._seq_refill:
            self._reserve_more()
        event = Event(self._seq, type_, key, agent, self.clock.wall(), fields)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as error:
                self._drop_listener(listener, error)
        if self.audit is not None:
            kept = ev.audit_form(event)
            if kept is not None:
                self.audit.append(kept)
        return event

    def _call_agent(self, call: Call) -> str:
        return call.key if self._agent_policy else call.agent

    def _key_agent(self, slot: _Slot) -> str | None:
        return slot.breaker.key if self._agent_policy else None

    def _transition_agent(self, slot: _Slot, caller: str | None) -> str | None:
        return self._key_agent(slot) if self._agent_policy else caller

    def _t(self, wall: float | None) -> float | None:
        return None if wall is None else round(wall - self.epoch, 3)

    def _persist(self, key: str, *, urgent: bool, what: str | None = None) -> None:
        """Queue the key's verdict; an urgent one is owed to the caller before it returns."""
        if self.store is None:
            return
        ticket = self.store.submit(self._verdict(key), urgent=urgent)
        if urgent:
            self._owed = ticket
            self._owed_what.append(what or key)

    def _persist_all(self) -> None:
        """Every key's verdict again: the store's file was replaced after damage."""
        with self._lock:
            for key in self._slots:
                self._persist(key, urgent=False)

    def _take_owed(self) -> tuple[int, list[str]] | None:
        """Under the lock: what the caller now leaving must see on disk, if anything."""
        if not self._owed_what:
            return None
        owed = (self._owed, self._owed_what)
        self._owed_what = []
        return owed

    def _settle(self, owed: tuple[int, list[str]] | None) -> None:
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

    def _reserve_more(self, calls: int = 0) -> None:
        """Move the reservations a block ahead and save them off the call path."""
        with self._lock:
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

    def _verdict(self, key: str) -> Verdict:
        slot = self._slots[key]
        b = slot.breaker
        to_wall = self.clock.wall() - self.clock.monotonic()
        return Verdict(
            key=key,
            agent=slot.agents[0] if slot.agents else None,
            state=b.state.value,
            count=b.count,
            last_failure_at=_shift(b.last_failure_at, to_wall),
            opened_at=_shift(b.opened_at, to_wall),
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


def _written(event: Event) -> str:
    return f"{event.key}: {event.type} (seq {event.seq})"


def _shift(value: float | None, offset: float) -> float | None:
    return None if value is None else value + offset
