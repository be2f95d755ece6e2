"""What enforcing would have done where a breaker ran in shadow, from the recording's
`call.would_deny` lines (`breakerdeck whatif`): per key, the calls it would have refused, how
many of those the platform then answered with a success (false refusals: the answers enforcing
would have cost), how many not (saved: every other outcome, uncounted answers included), and
the seconds the saved ones spent in attempts (the waiting enforcing would have spared).

A false refusal's seconds are not counted as saved: that time bought the answer the caller
wanted, and enforcing would have lost the answer with it. They stay out of every total, so
`seconds_saved` is what a team gains by enforcing, and `false_refusals` what it pays.

Pure: it takes events (a trace's lines or an audit log's rows, read by the replay's readers)
and keeps a few numbers per key and reason, whatever the recording's length. A would-deny line
whose fields are not the design's is skipped and counted, never guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from breakerdeck.engine.events import CALL_WOULD_DENY, Event
from breakerdeck.engine.outcomes import OutcomeClass

#: The line a shadow breaker writes for a call it would have refused (DESIGN, "Operator
#: control: hold and shadow").
WOULD_DENY: Final = CALL_WOULD_DENY
#: No call's attempts take longer (a headless run lasts at most a simulated year): a larger
#: `attempt_seconds` is not a call's, and would drown every real one in the total.
MAX_ATTEMPT_SECONDS: Final = 366 * 86400.0
#: Skipped lines described in words; the rest are counted.
SAID: Final = 5

_OUTCOMES = frozenset(OutcomeClass)


@dataclass(slots=True)
class Tally:
    """Calls shadow would have refused, and what became of them."""

    would_deny: int = 0
    false_refusals: int = 0
    seconds_saved: float = 0.0

    @property
    def saved(self) -> int:
        return self.would_deny - self.false_refusals

    def count(self, success: bool, seconds: float) -> None:
        self.would_deny += 1
        if success:
            self.false_refusals += 1
        else:
            self.seconds_saved += seconds

    def add(self, other: Tally) -> None:
        self.would_deny += other.would_deny
        self.false_refusals += other.false_refusals
        self.seconds_saved += other.seconds_saved

    def record(self) -> dict[str, Any]:
        """The numbers as `--json` writes them (seconds to the millisecond, as the trace's)."""
        return {
            "would_deny": self.would_deny,
            "false_refusals": self.false_refusals,
            "saved": self.saved,
            "seconds_saved": round(self.seconds_saved, 3),
        }


@dataclass(slots=True)
class KeyTally(Tally):
    """One key's tally, and the same split by the reason it would have refused with
    (`circuit_breaker_open`, `probe_in_flight`)."""

    by_reason: dict[str, Tally] = field(default_factory=dict)


@dataclass(slots=True)
class WhatIf:
    keys: dict[str, KeyTally] = field(default_factory=dict)
    #: Would-deny lines skipped, and the first `SAID` of them in words.
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def ranked(self) -> list[tuple[str, KeyTally]]:
        """Most would-be refusals first (the keys a decision is about), then by key."""
        return sorted(self.keys.items(), key=lambda item: (-item[1].would_deny, item[0]))

    def total(self) -> Tally:
        total = Tally()
        for tally in self.keys.values():
            total.add(tally)
        return total

    def take(self, event: Event) -> None:
        """One would-deny line counted under its key and reason, or skipped and said why."""
        read = _read(event.fields)
        if isinstance(read, str):
            self.skipped += 1
            if len(self.problems) < SAID:
                self.problems.append(f"{WOULD_DENY} seq {event.seq} (key {event.key!r}): {read}")
            return
        reason, success, seconds = read
        tally = self.keys.get(event.key)
        if tally is None:
            tally = self.keys[event.key] = KeyTally()
        tally.count(success, seconds)
        tally.by_reason.setdefault(reason, Tally()).count(success, seconds)


def _read(fields: dict[str, Any]) -> tuple[str, bool, float] | str:
    """A would-deny line's reason, whether the platform then answered with a success, and its
    attempts' seconds; or what is wrong with it."""
    reason, outcome = fields.get("reason"), fields.get("outcome")
    seconds = fields.get("attempt_seconds")
    if not isinstance(reason, str) or not reason:
        return f"reason {reason!r} is not a refusal's reason"
    if not isinstance(outcome, str) or outcome not in _OUTCOMES:
        return f"outcome {outcome!r} is not an outcome class"
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return f"attempt_seconds {seconds!r} is not a number"
    if not 0 <= seconds <= MAX_ATTEMPT_SECONDS:  # NaN fails this too
        return f"attempt_seconds {seconds!r} is not 0 to {MAX_ATTEMPT_SECONDS:g}"
    return reason, outcome == OutcomeClass.SUCCESS, float(seconds)


def what_if(events: Iterable[Event]) -> WhatIf:
    """The would-deny lines among `events` (any others are passed over), tallied per key."""
    result = WhatIf()
    for event in events:
        if event.type == WOULD_DENY:
            result.take(event)
    return result
