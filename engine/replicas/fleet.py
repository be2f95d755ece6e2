"""An engine's breakers kept in step with the fleet's shared store (docs/replicas.md).

`Fleet` is the engine's `Decider` when it shares its breakers with replicas: asked at the one
point of each operation where a decision is made, it runs the store's script for it, or (the
store lost, or a foreign key) lets a `Local` decide and remembers to reconcile. It works on the
engine's parts (`operations.Parts`: the key table, the lines, the timers, durability), never on
the engine itself, and keeps what it knows of each key in the store on its own. `replica.py`
holds the store's answers and interface; `shared.py` is the store itself, on Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from breakerdeck.engine.core.breaker import (
    ADMIT_NORMAL,
    ADMIT_PROBE,
    Admission,
    Breaker,
    DenyReason,
)
from breakerdeck.engine.events import Event, Transition
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.parts import modes
from breakerdeck.engine.parts.decide import Arg, Local, Write
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.lines import EXPIRED
from breakerdeck.engine.parts.operations import Parts
from breakerdeck.engine.replicas.replica import (
    MAX_SHARED_KEYS,
    Foreign,
    Missing,
    Shared,
    Store,
    token,
)
from breakerdeck.engine.state import State
from breakerdeck.engine.text import printable

_CLOSED = State.CLOSED
_HELD = State.HELD
_SUCCESS = OutcomeClass.SUCCESS


@dataclass(slots=True)
class _Seen:
    """What this replica knows of a key in the store: the version and generation last seen
    there, whether it changed the key while the store was lost (to reconcile on return), and
    the highest version whose transitions it has shown (its own, or relayed in order)."""

    ver: int = 0
    gen: int = 0
    hold_gen: int = 0
    mode_gen: int = 0
    dirty: bool = False
    shown: int = 0


class Fleet:
    """This engine's membership of a fleet: its shared store, the scripts it runs there for
    the engine's calls, and what the other replicas' changes do here."""

    def __init__(self, parts: Parts, store: Store) -> None:
        self.store = store
        self._parts = parts
        self._keys = parts.keys
        self._lines = parts.lines
        self._clock = parts.clock
        self._instance = parts.instance
        self._local = Local(parts.lines, self.alone)
        self._seen: dict[str, _Seen] = {}
        # The engine takes a store only under the agent policy (its constructor checks).
        store.use_policy(parts.policy)  # type: ignore[arg-type]

    def start(self) -> None:
        """Join the fleet: adopt what the store holds, then listen for its changes."""
        self.store.start(self._relay, self._join, self._clock.wall)

    def _of(self, slot: Slot) -> _Seen:
        key = slot.breaker.key
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen.setdefault(key, _Seen())
        return seen

    # -- the engine's decisions --------------------------------------------------------------

    def admit(
        self, slot: Slot, number: int, now: float, lease: float
    ) -> tuple[Admission, Sequence[Transition]]:
        if self.remote_admit(slot.breaker, now):
            reply = self.step(slot, "admit", token(self._instance, number), lease)
            if reply is not None:
                return self._admission(slot, reply), reply.transitions
        return self._local.admit(slot, number, now, lease)

    def record(
        self, slot: Slot, number: int, outcome: Outcome, now: float
    ) -> tuple[bool, Sequence[Transition]]:
        if outcome.counted or outcome.cls is _SUCCESS or slot.breaker.state is not _CLOSED:
            counted = "1" if outcome.counted else "0"
            call_token = token(self._instance, number)
            reply = self.step(
                slot, "record", call_token, outcome.cls.value, counted, outcome.detail
            )
            if reply is not None:
                return reply.was_probe, reply.transitions
        return self._local.record(slot, number, outcome, now)

    def operate(self, slot: Slot, write: Write) -> Sequence[Transition]:
        """One script for the fleet (audited here, shown by the others with this replica's
        origin), or, the store lost, this replica's breaker alone until it returns."""
        reply = self.step(slot, write.op, *write.args(slot))
        return self._local.operate(slot, write) if reply is None else reply.transitions

    def tick(self, slot: Slot, now: float) -> tuple[list[Event], Sequence[Transition]]:
        if _due(slot.breaker, now):
            written: list[Event] = []
            reply = self.step(slot, "tick", written=written)
            if reply is not None:
                return written, list(reply.transitions)
        return self._local.tick(slot, now)

    def alone(self, slot: Slot) -> None:
        """The breaker moved without the store (lost, or a foreign key), so the store hears
        this replica's verdict when it is back."""
        self._of(slot).dirty = True

    def remote_admit(self, breaker: Breaker, now: float) -> bool:
        """Whether admitting needs the fleet's word: a refusal in the cooldown or behind a live
        probe is this replica's own (its copy is current by subscription)."""
        if breaker.state is _CLOSED or breaker.cooling(now) is not None:
            return False
        if breaker.state is _HELD:  # refused here until the hold runs out; then the script
            return breaker.hold is None or now >= breaker.hold.until
        busy = breaker.probe_id is not None and breaker.expired_probe(now) is None
        return not (breaker.state is State.HALF_OPEN and busy)

    def remote_record(self, slot: Slot, outcome: Outcome) -> bool:
        """Whether recording is a round trip: all but a success that changes nothing."""
        breaker = slot.breaker
        return not (outcome.cls is _SUCCESS and breaker.state is _CLOSED and breaker.count == 0)

    # -- the store's scripts -----------------------------------------------------------------

    def step(
        self, slot: Slot, op: str, *extra: Arg, written: list[Event] | None = None
    ) -> Shared | None:
        """Under the key's lock: one script on the key, its result taken as the breaker, the
        probe it expired written (into `written`). None when the store is lost or will not do:
        the caller decides locally."""
        store, seen = self.store, self._of(slot)
        if seen.dirty and not self._reconcile(slot):
            return None
        name = slot.breaker.key
        wall = self._clock.wall
        reply = store.run(op, name, wall(), self._instance, (seen.gen, seen.ver), *extra)
        if isinstance(reply, Missing):
            store.note(f"{printable(name)!r} {reply.happened}; this replica wrote its verdict back")
            seen.dirty = True
            if not self._reconcile(slot):
                return None
            reply = store.run(op, name, wall(), self._instance, (seen.gen, seen.ver), *extra)
        if not isinstance(reply, Shared):
            if isinstance(reply, Foreign):
                self._foreign(name, reply)
            return None
        self._take(slot, reply)
        if reply.expired_count:
            made = self._expired_by_store(slot, reply)
            if written is not None:
                written += made
            reply = replace(reply, transitions=reply.transitions[reply.expired_count :])
        _keep_probe(slot)
        return reply

    def _expired_by_store(self, slot: Slot, reply: Shared) -> list[Event]:
        """Under the key's lock: a script expired the probe. Ours gets its `call.completed`
        line (`fault: expired`) first; another replica's has only its transitions here."""
        call = slot.probe
        if call is not None and token(self._instance, call.number) != reply.expired:
            call = None
        if call is not None:
            slot.probe = None
        return self._lines.expired(slot, call, reply.transitions[: reply.expired_count])

    def _admission(self, slot: Slot, reply: Shared) -> Admission:
        if reply.admit == "probe":
            return ADMIT_PROBE
        if reply.admit == "open":
            return slot.breaker.refusal(DenyReason.OPEN, reply.left)
        if reply.admit == "held":
            return slot.breaker.held_refusal(self._clock.monotonic())
        if reply.admit == "probe_in_flight":
            return slot.breaker.refusal(
                DenyReason.PROBE_IN_FLIGHT, self._parts.policy.probe_retry_after_seconds
            )
        return ADMIT_NORMAL

    def _take(self, slot: Slot, reply: Shared) -> None:
        """Under the key's lock: the breaker as the store holds it. A probe slot held by one of
        this replica's calls is that call's number here; another replica's stays its token.
        Others' transitions before it are shown when their messages arrive (`_relay`)."""
        own, _, number = reply.probe.rpartition(":")
        probe: int | str | None = reply.probe or None
        if own == self._instance and number.isascii() and number.isdigit():
            probe = int(number)
        offset = self._clock.monotonic() - self._clock.wall()
        slot.breaker.take(reply.state, offset, probe, reply.probe_deadline)
        if reply.mode != slot.chosen:
            slot.chosen = reply.mode
            slot.mode = modes.effective_mode(slot)
        seen = self._of(slot)
        seen.ver, seen.gen = reply.ver, reply.gen
        seen.hold_gen, seen.mode_gen = reply.hold_gen, reply.mode_gen

    def _reconcile(self, slot: Slot) -> bool:
        """Under the key's lock: what this replica decided alone goes to the store, unless the
        store's generation moved meanwhile (another replica reset, tripped or recovered it) or
        the store holds a graver verdict of the outage (another returning replica's): then the
        store's verdict is taken. False when the store is lost again."""
        to_wall = self._clock.wall() - self._clock.monotonic()
        breaker = slot.breaker
        b = breaker.snapshot(to_wall)
        seen = self._of(slot)
        # A probe still out goes with the verdict, so the store's slot stays taken by it.
        probe = breaker.probe_id if b.state is State.HALF_OPEN else None
        held = (
            ""
            if probe is None
            else (token(self._instance, probe) if isinstance(probe, int) else probe)
        )
        hold = breaker.hold
        mode = slot.chosen or ("", "")
        reply = self.store.run(
            "reconcile",
            breaker.key,
            self._clock.wall(),
            self._instance,
            (seen.gen, seen.ver),
            b.state.value,
            b.count,
            _text(b.last_failure_at),
            b.last_failure_detail,
            _text(b.opened_at),
            repr(b.cooldown),
            b.failed_probes,
            "1" if b.paged else "0",
            b.trip_cause.value if b.trip_cause else "",
            held,
            repr(breaker.probe_deadline + to_wall) if held else "",
            "" if hold is None else hold.actor,
            "" if hold is None else hold.reason,
            "" if hold is None else repr(hold.until_wall),
            *mode,
            seen.hold_gen,
            seen.mode_gen,
        )
        if not isinstance(reply, Shared):
            if isinstance(reply, Foreign):
                self._foreign(breaker.key, reply)
            return False
        self._adopt(slot, reply, announce=True)
        seen.dirty = False
        return True

    def _adopt(self, slot: Slot, reply: Shared, *, announce: bool, origin: str = "") -> None:
        """Under the key's lock: take a verdict from the store as a whole (on joining, or one a
        replica wrote back on its return); when it differs from this replica's, say so with a
        `circuit_breaker.restored` from `origin` (not audited). A read, or a reconcile the store
        won, writes nothing: the verdict is then its last writer's."""
        before = slot.breaker.snapshot()
        self._take(slot, reply)
        seen = self._of(slot)
        seen.shown = max(seen.shown, reply.ver)  # what came before is summed up here
        _keep_probe(slot)
        if announce and slot.breaker.snapshot() != before:
            b = slot.breaker.snapshot(self._clock.wall() - self._clock.monotonic())
            self._lines.relay(
                slot, [self._lines.restored(slot.breaker.key, b)], origin or reply.writer
            )
        self._follow(slot)

    def _foreign(self, name: str, reply: Foreign) -> None:
        self.store.note(
            f"{printable(name)!r} in the shared store was written by another format "
            f"({reply.format}); this replica keeps its own breaker for it"
        )

    # -- the other replicas' changes ---------------------------------------------------------

    def _relay(self, reply: Shared) -> None:
        """On the store's listener thread: another replica's script changed a breaker. Take
        it, and show its transitions with their origin (never audited or paged here)."""
        keys = self._keys
        if keys.get(reply.name) is None and len(keys) >= MAX_SHARED_KEYS:
            return  # a flood of names: what is already known is kept, no more is taken
        slot = keys.slot(reply.name, reply.name)
        with slot.lock:
            seen = self._of(slot)
            if seen.dirty and not self._reconcile(slot):
                return  # lost again: the next join reads it
            if reply.ver <= seen.shown or reply.origin == self._instance:
                seen.shown = max(seen.shown, reply.ver)
                return
            seen.shown = reply.ver
            if reply.ver <= seen.ver:
                # Its state is already here (a script of ours answered with a later one): only
                # what it did is news.
                self._lines.relay(slot, reply.transitions, reply.origin)
            elif reply.won == "replica":  # a verdict written back after an outage
                self._adopt(slot, reply, announce=True, origin=reply.origin)
            else:
                call = slot.probe
                self._take(slot, reply)
                if call is not None and reply.expired == token(self._instance, call.number):
                    # Another replica expired our probe: its line is ours to write.
                    slot.probe = None
                    self._lines.call_line(call, slot, EXPIRED, True, "expired", None, viewed=False)
                _keep_probe(slot)
                self._lines.relay(slot, reply.transitions, reply.origin)
                self._follow(slot)
        self._parts.ledger.deliver()

    def _follow(self, slot: Slot) -> None:
        """Under the key's lock, after taking the store's verdict: poll it when it is due,
        and keep it on disk for a restart without the store."""
        timers = self._parts.timers
        breaker = slot.breaker
        timers.track(breaker.key, settled=breaker.state is _CLOSED)
        due = breaker.reopens_at
        if due is not None:
            timers.at(due)
        elif breaker.state is State.HALF_OPEN and breaker.probe_id is not None:
            timers.probe_due(breaker.probe_deadline)
        self._parts.durability.persist(slot, urgent=False)

    def _join(self) -> None:
        """On joining the fleet (at start, and when a lost store is back): what this replica
        decided alone is reconciled; every other breaker is read and taken as the store has
        it, so a replica started late adopts the current verdicts at once."""
        store, keys = self.store, self._keys
        names = set(store.names())
        names.update(keys.names())
        clean = []
        for name in sorted(names):
            slot = keys.slot(name, name)
            if not self._of(slot).dirty:
                clean.append(name)
                continue
            with slot.lock:
                self._reconcile(slot)  # a key that will not (foreign, refused) stays ours
        slots = keys.slots
        seen = {name: (self._of(slots[name]).gen, self._of(slots[name]).ver) for name in clean}
        replies = store.run_many("read", clean, self._clock.wall(), self._instance, seen)
        for name, reply in zip(clean, replies, strict=True):
            slot = slots[name]
            with slot.lock:
                if isinstance(reply, Missing):
                    self._of(slot).dirty = True
                    self._reconcile(slot)
                elif isinstance(reply, Shared) and reply.ver > self._of(slot).ver:
                    self._adopt(slot, reply, announce=True)
        self._parts.ledger.deliver()


def _keep_probe(slot: Slot) -> None:
    """Under the key's lock: forget a probe ticket whose slot the store gave away."""
    if slot.probe is not None and slot.breaker.probe_id != slot.probe.number:
        slot.probe = None


def _due(breaker: Breaker, now: float) -> bool:
    """Whether time alone changes the breaker now: its cooldown or its probe's lease ended."""
    due = breaker.reopens_at
    return (due is not None and now >= due) or breaker.expired_probe(now) is not None


def _text(value: float | None) -> str:
    return "" if value is None else repr(value)
