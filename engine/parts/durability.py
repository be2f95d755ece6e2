"""Durability: each key's verdict queued for the verdict store, what a caller must see on disk
before it returns (a transition, a reset, a credential flag), and the verdicts read back.

Storage never sits on the call path: verdicts go to the store's writer thread. A caller owed
a commit waits for it after the key's lock is released, at most `COMMIT_WAIT` seconds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from breakerdeck.engine.clock import Clock
from breakerdeck.engine.core.breaker import BreakerState, Hold
from breakerdeck.engine.core.verdict import Verdict, bounded, is_stale
from breakerdeck.engine.events import Event
from breakerdeck.engine.outcomes import OutcomeClass
from breakerdeck.engine.parts.keys import KeyTable, Slot
from breakerdeck.engine.parts.ledger import Ledger
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State
from breakerdeck.engine.storage.audit import AuditLog
from breakerdeck.engine.storage.store import Problems, VerdictStore

#: The longest a call waits for the transition it caused to reach the disk (real seconds).
COMMIT_WAIT = 1.0

#: What a caller must see committed before it returns: a store ticket, the last seq it wrote
#: and what they hold, as sentences.
Owed = tuple[int, int, list[str]] | None


class Durability:
    def __init__(
        self,
        policy: AgentPolicy | ToolPolicy,
        clock: Clock,
        keys: KeyTable,
        ledger: Ledger,
        problems: Problems,
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._keys = keys
        self._ledger = ledger
        self._problems = problems
        self.audit: AuditLog | None = None
        self.store: VerdictStore | None = None
        #: By key, touched only under that key's lock: the commit its caller waits for.
        self._owed: dict[str, tuple[int, int, list[str]]] = {}

    def open(self, directory: Path) -> None:
        self.audit = AuditLog(directory / "audit.sqlite3", wall=self._clock.wall)
        self.store = VerdictStore(directory / "verdicts.sqlite3")
        self.store.on_fresh_file = self._persist_all
        self._ledger.open(directory, self.audit, self.store)

    def persist(self, slot: Slot, *, urgent: bool, what: str | None = None, seq: int = 0) -> None:
        """Under the key's lock: queue its verdict; an urgent one is owed to the caller. One
        that is not (a counter, when the credential last worked) is built by the store's
        writer when it writes it, under the key's lock then: nobody waits for it, so the call
        that made it pays for none of it (a new key's first call, a counted failure)."""
        store = self.store
        if store is None:
            return
        if not urgent:
            saved_at = self._ledger.wall()  # its age is the state's: `is_stale` reads it
            store.submit_later(slot.breaker.key, lambda: self._verdict_locked(slot, saved_at))
            return
        ticket = store.submit(self.verdict(slot), urgent=True)
        key = slot.breaker.key
        _, last, said = self._owed.get(key, (0, 0, []))
        self._owed[key] = (ticket, max(last, seq), [*said, what or key])

    def persist_event(self, slot: Slot, event: Event) -> None:
        """Under the key's lock: the verdict after `event`, owed to the caller with it."""
        written = f"{event.key}: {event.type} (seq {event.seq})"
        self.persist(slot, urgent=True, what=written, seq=event.seq)

    def _persist_all(self) -> None:
        """Every key's verdict again: the store's file was replaced after damage."""
        for slot in self._keys.every():
            with slot.lock:
                self.persist(slot, urgent=False)

    def take_owed(self, slot: Slot) -> Owed:
        """Under the key's lock: what the caller now leaving must see on disk, if anything."""
        if not self._owed:
            return None
        return self._owed.pop(slot.breaker.key, None)

    def settle(self, owed: Owed) -> None:
        """Outside the lock: wait (at most `COMMIT_WAIT`) for the verdict and its lines to be
        committed; past that, the call returns and the write is listed in `problems`."""
        if owed is None or self.store is None or self.audit is None:
            return
        ticket, seq, what = owed
        deadline = time.monotonic() + COMMIT_WAIT
        handed = self._ledger.handed_by(seq, deadline)
        stored = self.store.wait(ticket, max(deadline - time.monotonic(), 0.0))
        logged = self.audit.flush(max(deadline - time.monotonic(), 0.0))
        if not (handed and stored and logged):
            self._problems.add(
                f"{'; '.join(what)}: not on disk within {COMMIT_WAIT:g} s; kept in memory and "
                "written when the disk allows."
            )

    async def settle_async(self, owed: Owed) -> None:
        """`settle` for a coroutine: the wait runs on a worker thread, so every other
        coroutine on the loop goes on meanwhile. Nothing owed costs no thread."""
        if owed is None or self.store is None or self.audit is None:
            return
        await asyncio.to_thread(self.settle, owed)

    def restorable(self) -> list[tuple[Verdict, bool]]:
        """The stored verdicts, read within bounds, each with whether it is stale; a stale one
        with nothing of its credential worth keeping is deleted instead."""
        if self.store is None:
            return []
        kept = []
        for verdict in self._bounded(self.store.load()):
            stale = is_stale(
                verdict,
                longest_cooldown=self._policy.longest_cooldown(),
                window=self._policy.window,
                now=self._clock.wall(),
            )
            if stale and verdict.credential_ok_at is None and not verdict.credential_revoked:
                self.store.delete(verdict.key)
                continue
            kept.append((verdict, stale))
        return kept

    def _bounded(self, verdicts: list[Verdict]) -> list[Verdict]:
        """Stored numbers read within bounds (a damaged or hostile store, a stepped clock)."""
        now = self._clock.wall()
        kept = []
        for verdict in verdicts:
            fixed, notes = bounded(
                verdict,
                now=now,
                trip_cooldown=self._policy.trip_cooldown(),
                longest_cooldown=self._policy.longest_cooldown(),
            )
            if notes:
                self._problems.add(
                    f"The stored verdict for {verdict.key!r} had values out of range "
                    f"({', '.join(notes)}); they were read as safe defaults."
                )
            kept.append(fixed)
        return kept

    def _verdict_locked(self, slot: Slot, saved_at: float) -> Verdict:
        with slot.lock:
            return self.verdict(slot, saved_at)

    def verdict(self, slot: Slot, saved_at: float | None = None) -> Verdict:
        """The key's verdict now, saved at `saved_at` (now when None)."""
        now = self._clock.wall()
        b = slot.breaker.snapshot(now - self._clock.monotonic())
        hold = b.hold if b.state is State.HELD else None
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
            saved_at=now if saved_at is None else saved_at,
            last_failure_detail=b.last_failure_detail,
            held_by=None if hold is None else hold.actor,
            held_reason=None if hold is None else hold.reason,
            held_until=None if hold is None else hold.until_wall,
            mode_chosen=None if slot.chosen is None else slot.chosen[0],
            mode_against=None if slot.chosen is None else slot.chosen[1],
        )

    def close(self) -> None:
        if self.audit is not None:
            self.audit.close()
        if self.store is not None:
            self.store.close()


def saved_state(verdict: Verdict) -> BreakerState:
    """A stored verdict as the breaker's fields (wall times). A breaker stored as not closed
    without an opening time comes back closed: it could never be due."""
    state = State(verdict.state) if verdict.opened_at is not None else State.CLOSED
    hold = None
    if verdict.held_until is not None:
        state = State.HELD
        actor, reason = verdict.held_by or "unknown", verdict.held_reason or ""
        hold = Hold(actor, reason, verdict.held_until, verdict.held_until)
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
        hold=hold,
    )
