"""An operator's hold in words and numbers (DESIGN, "Operator control: hold and shadow"): the
durations an operator may give, the bounds on what they type, and the refusal's words."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

from breakerdeck.engine.core.breaker import Hold

#: Reasons and actors are kept as given, up to this many characters.
MAX_REASON: Final = 500
MAX_ACTOR: Final = 200

_DURATION = re.compile(r"([1-9][0-9]{0,6})([smh])")
_UNIT = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(text: str, most: float) -> float:
    """`90s`, `30m` or `2h` as seconds, at most `most`; anything else is a clear error."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise ValueError(
            f"a hold's duration is a whole number of s, m or h (90s, 30m, 2h), not {text!r}"
        )
    seconds = float(int(found[1]) * _UNIT[found[2]])
    if seconds > most:
        raise ValueError(f"a hold lasts at most {most:g} s (max_hold_seconds), not {text}")
    return seconds


def checked_words(actor: str, reason: str, *, reason_required: bool) -> None:
    """An operator's actor and reason within bounds (kept as given, shown escaped)."""
    if not actor or len(actor) > MAX_ACTOR:
        raise ValueError(f"an actor is 1 to {MAX_ACTOR} characters")
    if reason_required and not reason.strip():
        raise ValueError("a hold needs a reason")
    if len(reason) > MAX_REASON:
        raise ValueError(f"a reason is at most {MAX_REASON} characters, not {len(reason)}")


def held_words(hold: Hold) -> str:
    """The refusal's words while held: who, until when (UTC), why."""
    until = datetime.fromtimestamp(hold.until_wall, UTC).strftime("%H:%M")
    return f"held open by {hold.actor} until {until} UTC: {hold.reason}"
