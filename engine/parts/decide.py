"""Who decides a key's next step: its breaker here (`Local`), or the fleet's shared store
(`fleet.Fleet`, which falls back on a `Local` while the store is lost). The engine asks its
`Decider` at one point per operation, under the key's lock, and writes what it decided.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from breakerdeck.engine.core.breaker import Admission, Breaker
from breakerdeck.engine.events import Event, Transition
from breakerdeck.engine.outcomes import Outcome
from breakerdeck.engine.parts.keys import Slot
from breakerdeck.engine.parts.lines import EXPIRED, Lines

#: What a shared store's script takes as an argument.
Arg = str | int | float


@dataclass(frozen=True, slots=True)
class Write:
    """An operator's write on a key (a reset, a hold, a release, a mode), once for both
    deciders: what it does to the breaker here (`apply`), and the shared store's script that
    does it for the fleet (`op`, its arguments from the key's slot: `args`)."""

    op: str
    args: Callable[[Slot], tuple[Arg, ...]]
    apply: Callable[[Slot], Sequence[Transition]]


class Decider(Protocol):
    def admit(
        self, slot: Slot, number: int, now: float, lease: float
    ) -> tuple[Admission, Sequence[Transition]]:
        """Admit call `number` (a lost probe expired first) and the transitions that made."""
        ...

    def record(
        self, slot: Slot, number: int, outcome: Outcome, now: float
    ) -> tuple[bool, Sequence[Transition]]:
        """Record call `number`'s outcome: whether it was the probe, and what it caused."""
        ...

    def operate(self, slot: Slot, write: Write) -> Sequence[Transition]:
        """An operator's write, and the transitions it made (none: a release of a breaker
        the fleet no longer holds)."""
        ...

    def tick(self, slot: Slot, now: float) -> tuple[list[Event], Sequence[Transition]]:
        """What time alone causes: the lines of an expired probe, then the transitions."""
        ...

    def alone(self, slot: Slot) -> None:
        """The breaker took a verdict of this replica's own (a restore)."""
        ...

    def remote_admit(self, breaker: Breaker, now: float) -> bool:
        """Whether admitting now is a round trip (a coroutine makes it on a thread)."""
        ...

    def remote_record(self, slot: Slot, outcome: Outcome) -> bool: ...


class Local:
    """This engine's breakers decide alone. `alone` hears of every change made so (the fleet,
    while its store is lost, to reconcile on its return)."""

    def __init__(self, lines: Lines, alone: Callable[[Slot], None] | None = None) -> None:
        self._lines = lines
        self._alone = alone or _nothing

    def admit(
        self, slot: Slot, number: int, now: float, lease: float
    ) -> tuple[Admission, Sequence[Transition]]:
        self.expire(slot, now)
        admission, transitions = slot.breaker.admit(number, now, lease)
        if transitions or admission.as_probe:
            self._alone(slot)
        return admission, transitions

    def record(
        self, slot: Slot, number: int, outcome: Outcome, now: float
    ) -> tuple[bool, Sequence[Transition]]:
        breaker = slot.breaker
        count_before = breaker.count
        self.expire(slot, now)
        is_probe = breaker.is_probe(number)
        transitions = breaker.record(number, outcome, now)
        if outcome.counted or breaker.count != count_before:
            self._alone(slot)
        return is_probe, transitions

    def operate(self, slot: Slot, write: Write) -> Sequence[Transition]:
        transitions = write.apply(slot)
        self._alone(slot)
        return transitions

    def tick(self, slot: Slot, now: float) -> tuple[list[Event], Sequence[Transition]]:
        written = self.expire(slot, now)
        transitions = slot.breaker.poll(now)
        if transitions:
            self._alone(slot)
        return written, transitions

    def expire(self, slot: Slot, now: float) -> list[Event]:
        """A probe past its lease is recorded as a counted failure."""
        breaker = slot.breaker
        number = breaker.expired_probe(now)
        if number is None:
            return []
        call = slot.probe
        slot.probe = None
        transitions = breaker.record(number, EXPIRED, now)
        self._alone(slot)
        return self._lines.expired(slot, call, transitions)

    def alone(self, slot: Slot) -> None:
        self._alone(slot)

    def remote_admit(self, breaker: Breaker, now: float) -> bool:
        return False

    def remote_record(self, slot: Slot, outcome: Outcome) -> bool:
        return False


def _nothing(slot: Slot) -> None:
    return None
