"""An engine's breakers kept in step with the fleet's shared store (docs/replicas.md).

`Fleet` is the part of an `Engine` that exists only when it shares its breakers with replicas:
the engine owns one, and calls it at the points of its call path where the fleet has a say. It
works on the engine's slots, under their locks, and writes through the engine's own lines, so
it reaches into the engine as a part of it. `replica.py` holds the store's answers and
interface; `shared.py` is the store itself, on Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from breakerdeck.engine import events as ev
from breakerdeck.engine.breaker import (
    ADMIT_NORMAL,
    ADMIT_PROBE,
    Admission,
    Breaker,
    DenyReason,
    State,
    Transition,
)
from breakerdeck.engine.engine import _JUST_AFTER, EXPIRED, Engine, _Slot
from breakerdeck.engine.events import Event, Relayed
from breakerdeck.engine.replica import (
    MAX_SHARED_KEYS,
    Arg,
    Foreign,
    Missing,
    Shared,
    Store,
    token,
)
from breakerdeck.engine.text import printable

_CLOSED = State.CLOSED


class Fleet:
    """This engine's membership of a fleet: its shared store, the scripts it runs there for
    the engine's calls, and what the other replicas' changes do here."""

    def __init__(self, engine: Engine, store: Store) -> None:
        self._engine = engine
        self.store = store
        # The engine takes a store only under the agent policy (its constructor checks).
        store.use_policy(engine.policy)  # type: ignore[arg-type]

    def start(self) -> None:
        """Join the fleet: adopt what the store holds, then listen for its changes."""
        self.store.start(self._relay, self._join, self._engine.clock.wall)

    def asks(self, breaker: Breaker, now: float) -> bool:
        """Whether admitting needs the fleet's word: a refusal in the cooldown or behind a live
        probe is this replica's own (its copy is current by subscription)."""
        if breaker.state is _CLOSED or breaker.cooling(now) is not None:
            return False
        busy = breaker.probe_id is not None and breaker.expired_probe(now) is None
        return not (breaker.state is State.HALF_OPEN and busy)

    def admit(
        self, slot: _Slot, number: int, lease: float
    ) -> tuple[Admission, Sequence[Transition]] | None:
        """Under the key's lock: the fleet's admission of call `number` and the transitions it
        made, or None: the caller decides locally (`step`)."""
        reply = self.step(slot, "admit", token(self._engine.instance, number), lease)
        return None if reply is None else (self._admission(slot, reply), reply.transitions)

    def step(
        self, slot: _Slot, op: str, *extra: Arg, written: list[Event] | None = None
    ) -> Shared | None:
        """Under the key's lock: one script on the key, its result taken as the breaker, the
        probe it expired written (into `written`). None when the store is lost or will not do:
        the caller decides locally."""
        engine, store = self._engine, self.store
        if slot.dirty and not self._reconcile(slot):
            return None
        name = slot.breaker.key
        reply = store.run(op, name, engine._wall(), engine.instance, (slot.gen, slot.ver), *extra)
        if isinstance(reply, Missing):
            store.note(
                f"{printable(name)!r} vanished from the shared store (wiped, or idle a day); "
                "this replica wrote its verdict back"
            )
            slot.dirty = True
            if not self._reconcile(slot):
                return None
            reply = store.run(
                op, name, engine._wall(), engine.instance, (slot.gen, slot.ver), *extra
            )
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

    def _expired_by_store(self, slot: _Slot, reply: Shared) -> list[Event]:
        """Under the key's lock: a script expired the probe. Ours gets its `call.completed`
        line (`fault: expired`) first; another replica's has only its transitions here."""
        engine = self._engine
        call = slot.probe
        if call is not None and token(engine.instance, call.number) != reply.expired:
            call = None
        made: list[Event] = []
        cause = None
        if call is not None:
            slot.probe = None
            line = engine._call_line(call, EXPIRED, True, "expired", None, None, None)
            made.append(line)
            cause = line
        expiring = reply.transitions[: reply.expired_count]
        agent = call.agent if call is not None else None
        return made + engine._apply(slot, expiring, agent, cause=cause)

    def _admission(self, slot: _Slot, reply: Shared) -> Admission:
        if reply.admit == "probe":
            return ADMIT_PROBE
        if reply.admit == "open":
            return slot.breaker.refusal(DenyReason.OPEN, reply.left)
        if reply.admit == "probe_in_flight":
            return slot.breaker.refusal(
                DenyReason.PROBE_IN_FLIGHT, self._engine.policy.probe_retry_after_seconds
            )
        return ADMIT_NORMAL

    def _take(self, slot: _Slot, reply: Shared) -> None:
        """Under the key's lock: the breaker as the store holds it. A probe slot held by one of
        this replica's calls is that call's number here; another replica's stays its token.
        Others' transitions before it are shown when their messages arrive (`_relay`)."""
        engine = self._engine
        own, _, number = reply.probe.rpartition(":")
        probe: int | str | None = reply.probe or None
        if own == engine.instance and number.isascii() and number.isdigit():
            probe = int(number)
        offset = engine.clock.monotonic() - engine.clock.wall()
        slot.breaker.take(reply.state, offset, probe, reply.probe_deadline)
        slot.ver, slot.gen = reply.ver, reply.gen

    def _reconcile(self, slot: _Slot) -> bool:
        """Under the key's lock: what this replica decided alone goes to the store, unless the
        store's generation moved meanwhile (another replica reset, tripped or recovered it) or
        the store holds a graver verdict of the outage (another returning replica's): then the
        store's verdict is taken. False when the store is lost again."""
        engine = self._engine
        to_wall = engine.clock.wall() - engine.clock.monotonic()
        breaker = slot.breaker
        b = breaker.snapshot(to_wall)
        # A probe still out goes with the verdict, so the store's slot stays taken by it.
        probe = breaker.probe_id if b.state is State.HALF_OPEN else None
        held = (
            ""
            if probe is None
            else (token(engine.instance, probe) if isinstance(probe, int) else probe)
        )
        reply = self.store.run(
            "reconcile",
            slot.breaker.key,
            engine._wall(),
            engine.instance,
            (slot.gen, slot.ver),
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
        )
        if not isinstance(reply, Shared):
            if isinstance(reply, Foreign):
                self._foreign(slot.breaker.key, reply)
            return False
        self._adopt(slot, reply, announce=True)
        slot.dirty = False
        return True

    def _adopt(self, slot: _Slot, reply: Shared, *, announce: bool, origin: str = "") -> None:
        """Under the key's lock: take a verdict from the store as a whole (on joining, or one a
        replica wrote back on its return); when it differs from this replica's, say so with a
        `circuit_breaker.restored` from `origin` (not audited). A read, or a reconcile the store
        won, writes nothing: the verdict is then its last writer's."""
        engine = self._engine
        before = slot.breaker.snapshot()
        self._take(slot, reply)
        slot.shown = max(slot.shown, reply.ver)  # what came before is summed up here
        _keep_probe(slot)
        if announce and slot.breaker.snapshot() != before:
            b = slot.breaker.snapshot(engine.clock.wall() - engine.clock.monotonic())
            fields = {
                "state": b.state.value,
                "count": b.count,
                "last_failure_t": engine._t(b.last_failure_at),
                "opened_t": engine._t(b.opened_at),
                "cooldown_seconds": b.cooldown,
                "failed_probes": b.failed_probes,
                "paged": b.paged,
                "rate_limited_streak": b.rate_limited_streak,
                "last_retry_after_seconds": b.last_retry_after,
            }
            self._show(slot, [Transition(ev.RESTORED, fields)], origin or reply.writer)
        self._follow(slot)

    def _foreign(self, name: str, reply: Foreign) -> None:
        self.store.note(
            f"{printable(name)!r} in the shared store was written by another format "
            f"({reply.format}); this replica keeps its own breaker for it"
        )

    def _relay(self, reply: Shared) -> None:
        """On the store's listener thread: another replica's script changed a breaker. Take
        it, and show its transitions with their origin (never audited or paged here)."""
        engine = self._engine
        if reply.name not in engine._slots and len(engine._slots) >= MAX_SHARED_KEYS:
            return  # a flood of names: what is already known is kept, no more is taken
        slot = engine._slot(reply.name, reply.name)
        with slot.lock:
            if slot.dirty and not self._reconcile(slot):
                return  # lost again: the next join reads it
            if reply.ver <= slot.shown or reply.origin == engine.instance:
                slot.shown = max(slot.shown, reply.ver)
                return
            slot.shown = reply.ver
            if reply.ver <= slot.ver:
                # Its state is already here (a script of ours answered with a later one): only
                # what it did is news.
                self._show(slot, reply.transitions, reply.origin)
            elif reply.won == "replica":  # a verdict written back after an outage
                self._adopt(slot, reply, announce=True, origin=reply.origin)
            else:
                call = slot.probe
                self._take(slot, reply)
                if call is not None and reply.expired == token(engine.instance, call.number):
                    # Another replica expired our probe: its line is ours to write.
                    slot.probe = None
                    engine._call_line(call, EXPIRED, True, "expired", None, None, None)
                _keep_probe(slot)
                self._show(slot, reply.transitions, reply.origin)
                self._follow(slot)
        engine._deliver()

    def _show(self, slot: _Slot, transitions: Sequence[Transition], origin: str) -> None:
        """Under the key's lock: another replica's transitions, on this replica's feed."""
        engine = self._engine
        key = slot.breaker.key
        last = len(transitions) - 1
        for n, transition in enumerate(transitions):
            fields = {**transition.fields, "origin": origin}
            view = engine._view(slot) if n == last else None
            engine._publish(Relayed(0, transition.type, key, key, 0.0, fields), view)

    def _follow(self, slot: _Slot) -> None:
        """Under the key's lock, after taking the store's verdict: poll it when it is due,
        and keep it on disk for a restart without the store."""
        engine = self._engine
        breaker = slot.breaker
        engine._track(breaker.key, settled=breaker.state is _CLOSED)
        due = breaker.reopens_at
        if due is not None:
            engine._schedule_poll(due)
        elif breaker.state is State.HALF_OPEN and breaker.probe_id is not None:
            engine._schedule_poll(breaker.probe_deadline + _JUST_AFTER)
        engine._persist(slot, urgent=False)

    def _join(self) -> None:
        """On joining the fleet (at start, and when a lost store is back): what this replica
        decided alone is reconciled; every other breaker is read and taken as the store has
        it, so a replica started late adopts the current verdicts at once."""
        engine, store = self._engine, self.store
        names = set(store.names())
        with engine._meta:
            names.update(engine._slots)
        clean = []
        for name in sorted(names):
            slot = engine._slot(name, name)
            if not slot.dirty:
                clean.append(name)
                continue
            with slot.lock:
                self._reconcile(slot)  # a key that will not (foreign, refused) stays ours
        slots = engine._slots
        seen = {name: (slots[name].gen, slots[name].ver) for name in clean}
        replies = store.run_many("read", clean, engine._wall(), engine.instance, seen)
        for name, reply in zip(clean, replies, strict=True):
            slot = slots[name]
            with slot.lock:
                if isinstance(reply, Missing):
                    slot.dirty = True
                    self._reconcile(slot)
                elif isinstance(reply, Shared) and reply.ver > slot.ver:
                    self._adopt(slot, reply, announce=True)
        engine._deliver()


def _keep_probe(slot: _Slot) -> None:
    """Under the key's lock: forget a probe ticket whose slot the store gave away."""
    if slot.probe is not None and slot.breaker.probe_id != slot.probe.number:
        slot.probe = None


def _text(value: float | None) -> str:
    return "" if value is None else repr(value)
