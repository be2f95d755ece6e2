"""The engine: breakers by key, one sequence of events, persistence and subscribers.

`Engine` is a facade over parts that each own their state and are called downward: each
call's entry and the one rule for calls nobody reads (`entries.py`), the key
table (`keys.py`: slots and their locks), the ledger (`ledger.py`: seqs, call numbers, the
mark file, the audit hand-off in seq order), the outbox (`outbox.py`: listeners and the page
hook, after the lock), durability (`durability.py`: commits, what is owed, what is restored),
timers (`timers.py`: probe expiry and polls), views and tallies (`views.py`), the lines a
decision writes (`lines.py`) and who decides (`decide.py`: the breaker here, or the fleet's
shared store behind the same interface). Each operation's body is written once
(`operations.py`: lock, decide, write; deliver after the lock); the methods here are its sync
and async drivers, with the closed path's shortcuts (`entries.py`: no lock, no line when
nobody reads one).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self

from breakerdeck.engine import results
from breakerdeck.engine.clock import Clock, SystemClock
from breakerdeck.engine.core import holds
from breakerdeck.engine.core.breaker import Admission, Breaker, DenyReason
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.outcomes import ABANDONED, Outcome, OutcomeClass, recorded_as
from breakerdeck.engine.parts import modes
from breakerdeck.engine.parts.call import Call, call_id
from breakerdeck.engine.parts.decide import Decider, Local
from breakerdeck.engine.parts.durability import COMMIT_WAIT, Owed
from breakerdeck.engine.parts.entries import Entries
from breakerdeck.engine.parts.guard import Guard
from breakerdeck.engine.parts.ledger import Mark, read_mark
from breakerdeck.engine.parts.lines import EXPIRED
from breakerdeck.engine.parts.operations import LEASE_GRACE_SECONDS, Operations, Parts
from breakerdeck.engine.parts.outbox import Listener, PageHook
from breakerdeck.engine.parts.timers import Scheduler, Timers
from breakerdeck.engine.parts.views import tally_name
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.replicas.replica import Member, Store
from breakerdeck.engine.state import State
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.storage.audit import AuditLog
from breakerdeck.engine.storage.store import Problems, VerdictStore

__all__ = [
    "COMMIT_WAIT",
    "EXPIRED",
    "LEASE_GRACE_SECONDS",
    "BreakerView",
    "Call",
    "Engine",
    "Listener",
    "Mark",
    "PageHook",
    "Scheduler",
    "call_id",
    "read_mark",
    "tally_name",
]

_SUCCESS = OutcomeClass.SUCCESS
_CLOSED = State.CLOSED


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
        mode: str = "enforce",
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
        self.clock = clock = clock or SystemClock()
        self.epoch = clock.wall()
        self._wall = time.time if type(clock) is SystemClock else clock.wall
        self._problems = Problems()
        self._closed = False
        self._closing = threading.Lock()
        self._parts = parts = Parts.make(
            policy,
            self.instance,
            clock,
            self._wall,
            self._problems,
            epoch=self.epoch,
            page_hook=page_hook,
            timers=Timers(scheduler, self.poll, aside=shared is not None),
            mode=modes.checked(mode),
        )
        self._keys, self._ledger, self._outbox = parts.keys, parts.ledger, parts.outbox
        self._durability, self._timers = parts.durability, parts.timers
        self._views = parts.lines.views
        self._entries = entries = Entries(parts)
        #: One call's entry (`Call`), for every door: it holds the admission (`admit`) and the
        #: attempts until the call's end (`complete`), and draws its number only when a line or
        #: an Idempotency-Key needs one (`parts/entries.py`: the rule for calls nobody reads).
        #: The part's own method, handed out as it is: every door's call comes this way.
        self.enter = entries.enter
        #: The admissions that take no lock and no wait (a closed breaker's, and a refusal
        #: nobody reads in the cooldown), decided at once, so a coroutine asks before it
        #: awaits `admit_async`. None: `admit` decides. (The part's own method, as `enter`.)
        self.admitted_now = entries.admitted
        #: Whether ending a call with an outcome records nothing (`complete` would return None
        #: at once), so a coroutine asks before it awaits `complete_async`. (As `enter`.)
        self.ends_unread = entries.ends_unread
        self._fleet: Member | None = None if shared is None else shared.member(parts)
        self._decide: Decider = self._fleet or Local(parts.lines)
        self._ops = Operations(parts, self._decide)
        if state_dir is not None:
            parts.durability.open(statedir.prepare(state_dir))

    @property
    def audit(self) -> AuditLog | None:
        return self._durability.audit

    @property
    def store(self) -> VerdictStore | None:
        return self._durability.store

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

    @property
    def shared_warning(self) -> str | None:
        """What is wrong with this replica though its shared store answers (its clock is off
        the store's), or None."""
        return None if self._fleet is None else self._fleet.store.clock_warning

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- setup -------------------------------------------------------------------------------

    def subscribe(self, listener: Listener, *, calls: bool = True) -> Callable[[], None]:
        """Called with every event, in seq order, after the key's lock is released, on the
        thread of whichever caller delivers it: keep it quick. With `calls=False` it is handed
        everything but the calls' lines (`call.completed`, `call.denied`): transitions, pages,
        credential events; such a listener alone makes no healthy call write a line."""
        return self._outbox.subscribe(listener, calls=calls)

    def restore(self) -> list[Event]:
        """Seed breakers from the verdict store, then (with a shared store) join the fleet:
        adopt what it holds and listen for its changes. Call once subscribers are attached."""
        restored = self._ops.restore()
        if self._fleet is not None:
            self._fleet.start()
        return restored

    # -- the call path ------------------------------------------------------------------------

    def key_for(self, agent: str, backend: str, credential: str) -> str:
        return agent if self._agent_policy else f"{backend}@{credential}"

    def guard(self, key: str, *, agent: str, lease: float, **settings: Any) -> Guard:
        """A reusable guard on one key, for code that makes its own calls (`engine.guard`):
        `with guard:` or `async with guard:` admits or raises `BreakerOpen`, and records
        the body's outcome. `settings`: `tool`, `deadline_seconds`, `classifier`."""
        slot = self._keys.slot(key, agent)
        parts = self._parts
        return Guard(self, self._entries, parts, slot, key, agent=agent, lease=lease, **settings)

    def idempotency_key(self, call: str | int) -> str:
        """What every attempt of a call sends upstream as its `Idempotency-Key`: the call's
        printed id or its number."""
        return f"{self.instance}.{call_id(call) if isinstance(call, int) else call}"

    def admit(self, call: Call, lease: float) -> Admission:
        """Let the call in, as normal or as the one probe, or refuse it (`call.denied`).

        A transition this causes (a due half-open) is on disk before it returns."""
        early = self._entries.admitted(call)
        if early is not None:
            return early
        admission, owed = self._ops.admit(call, lease)
        self._durability.settle(owed)
        return admission

    async def admit_async(self, call: Call, lease: float) -> Admission:
        """`admit` for a coroutine: the wait for the disk never blocks the event loop, nor a
        round trip to the shared store (made on a worker thread)."""
        early = self._entries.admitted(call)
        if early is not None:
            return early
        breaker = self._keys.slots[call.key].breaker
        if self._decide.remote_admit(breaker, self.clock.monotonic()):
            admission, owed = await asyncio.to_thread(self._ops.admit, call, lease)
        else:
            admission, owed = self._ops.admit(call, lease)
        await self._durability.settle_async(owed)
        return admission

    def may_retry(self, call: Call) -> bool:
        """The re-check before a retry: a closed breaker or this call's own probe slot."""
        breaker = self._keys.slots[call.key].breaker
        return breaker.state is _CLOSED or breaker.is_probe(call.number)

    def extend_probe(self, call: Call, seconds: float) -> None:
        self._ops.extend_probe(call, seconds)

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
        if self._entries.ends_unread(call, outcome):
            return None
        line, owed = self._ops.record(call, outcome, fault, agent_status, refresh, platform_status)
        if owed is not None:
            self._durability.settle(owed)
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
        """`complete` for a coroutine: the wait for the disk never blocks the event loop, nor a
        round trip to the shared store (made on a worker thread)."""
        if self._entries.ends_unread(call, outcome):
            return None
        args = (call, outcome, fault, agent_status, refresh, platform_status)
        if self._decide.remote_record(self._keys.slots[call.key], outcome):
            line, owed = await asyncio.to_thread(self._ops.record, *args)
        else:
            line, owed = self._ops.record(*args)
        await self._durability.settle_async(owed)
        return line

    def abandoned(self, call: Call) -> tuple[Outcome, str, int | str]:
        """How a call its caller abandoned is completed, at every door (DESIGN, "Both
        policies"): neutral, `caller_error` uncounted as an MCP host's cancellation; `fault`
        `cancelled` once a request went out (`none` before), and the caller's status 499 (the
        client closed the request) under `agent`, `cancelled` under `tool`. The breaker judges
        it (`Breaker.judge`): a probe's slot is freed, or its third in a row counts."""
        fault = "cancelled" if call.attempts else "none"
        return ABANDONED, fault, 499 if self._agent_policy else "cancelled"

    def abandon(self, call: Call) -> Outcome:
        """Complete a call its caller abandoned (`abandoned`): the outcome it was recorded as
        (neutral, or a probe's third in a row, a counted timeout). Synchronous: a cancelled
        caller must not await again, and nothing after its exception may be skipped."""
        line = self.complete(call, *self.abandoned(call))
        return recorded_as(ABANDONED, line is not None and line.fields["counted"])

    def refuse(self, call: Call, outcome: Outcome, agent_status: int | str) -> Event:
        """A refusal before the breaker: a line, attempts 0, never counted, no probe slot."""
        return self._ops.refuse(call, outcome, agent_status)

    # -- credentials (tool policy) ---------------------------------------------------------

    def credential_worked(self, key: str) -> bool:
        slot = self._keys.slots.get(key)
        return slot is not None and slot.credential_worked_at is not None

    def credential_paused(self, key: str) -> bool:
        slot = self._keys.slots.get(key)
        return slot is not None and slot.credential_revoked

    def restore_credential(self, key: str, actor: str) -> Event:
        """Mark-credential-fixed: calls on this key go out again."""
        event, owed = self._ops.restore_credential(key, actor)
        self._durability.settle(owed)
        return event

    # -- operator and time ------------------------------------------------------------------

    def reset(self, key: str, actor: str, reason: str) -> Event:
        event, owed = self._ops.reset(key, actor, reason)
        self._durability.settle(owed)
        return event

    def hold(self, key: str, actor: str, reason: str, seconds: float) -> Event:
        """Hold `key` open for `seconds` on the engine's clock (DESIGN, "Operator control"):
        every call refused without touching the wire, no probe, nothing counted, until it is
        released or runs out (then half-open). On disk before it returns."""
        return self._settled(self._ops.hold(key, actor, reason, seconds))

    def release(self, key: str, actor: str, reason: str = "", *, close: bool = False) -> Event:
        """End a hold early: half-open (the next call is the probe), or closed (`close`)."""
        return self._settled(self._ops.release(key, actor, reason, close))

    def set_mode(self, key: str, mode: str, actor: str, reason: str) -> Event:
        """An operator's `shadow` or `enforce` for `key` (`parts/modes.py`)."""
        return self._settled(self._ops.set_mode(key, mode, actor, reason))

    def configure_mode(self, key: str, mode: str | None = None) -> None:
        """The configuration names `key` (a door's table, `Tool(mode=...)`): its breaker exists
        from now on, so an operator can hold it before its first call; `mode` is the
        configuration's for it, the engine's default when None."""
        self._ops.configure_mode(key, mode)

    def _settled(self, done: tuple[Event, Owed]) -> Event:
        event, owed = done
        self._durability.settle(owed)
        return event

    def poll(self) -> list[Event]:
        """Write what time alone causes: half-opens, expired probes and holds."""
        return self._ops.poll()

    # -- views ------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        return self._ledger.last()

    def keys(self) -> list[str]:
        return list(self._keys.slots)

    def tally(self, key: str, name: str) -> int:
        """How many of the key's events had this `tally_name` so far (0 for an unknown key)."""
        slot = self._keys.slots.get(key)
        return 0 if slot is None or slot.tally is None else slot.tally.get(name, 0)

    def tallies(self) -> list[tuple[str, dict[DenyReason | None, int], dict[str, int]]]:
        """Each key's refusals by reason and its events by `views.tally_name`, copied now:
        what metrics read at scrape time."""
        return [
            (k, dict(s.denied or {}), dict(s.tally or {}))
            for k, s in list(self._keys.slots.items())
        ]

    def breaker(self, key: str) -> Breaker:
        return self._keys.known(key).breaker

    def open_reason(self, key: str) -> str:
        """A refusal's words for `key` (`results.open_reason`): its count and last failure, or
        while held, who holds it, until when and why."""
        b = self._keys.known(key).breaker
        if b.state is State.HELD and b.hold is not None:
            return holds.held_words(b.hold)
        return results.open_reason(key, b.count, b.last_failure_detail)

    def probe_out(self, key: str) -> bool:
        """Whether `key`'s half-open probe is out now (False for a key never called)."""
        slot = self._keys.slots.get(key)
        if slot is None:
            return False
        b = slot.breaker  # a shadow breaker's probe is waited for by no one
        return b.state is State.HALF_OPEN and b.probe_id is not None and slot.mode == "enforce"

    def cooling(self, key: str) -> bool:
        """Whether `key`'s breaker is in its cooldown now: a call would be refused (never in
        shadow)."""
        slot = self._keys.known(key)
        return slot.mode == "enforce" and slot.breaker.cooling(self.clock.monotonic()) is not None

    def view(self, key: str) -> BreakerView:
        return self._views.of(self._keys.known(key), self._ledger.last())

    def views(self, keys: Iterable[str] | None = None) -> list[BreakerView]:
        """Consistent pictures of the given keys (unknown ones skipped), or of every breaker."""
        if keys is None:
            return self.snapshot()[1]
        pictures = []
        for key in keys:
            slot = self._keys.slots.get(key)
            if slot is not None:
                with slot.lock:
                    pictures.append(self._views.of(slot, self._ledger.last()))
        return pictures

    def snapshot(self) -> tuple[int, list[BreakerView]]:
        """Every breaker and the seq of the last event they reflect, read together: every
        key's lock is held (in key order), so no transition is half-written meanwhile."""
        with self._keys.all_held() as slots:
            seq = self._ledger.last()
            return seq, [self._views.of(slot, seq) for _, slot in slots]

    def close(self) -> None:
        """Commit what is queued, give back the unused reservation, release the state dir.
        Closing twice is harmless."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        if self._fleet is not None:
            self._fleet.store.close()
        self._durability.close()
        self._ledger.close()
