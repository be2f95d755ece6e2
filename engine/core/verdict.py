"""What survives a restart for one key, in wall-clock seconds so another process can read it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from breakerdeck.engine.state import State


@dataclass(slots=True)
class Verdict:
    key: str
    agent: str | None
    state: State
    count: int
    last_failure_at: float | None
    opened_at: float | None
    cooldown: float
    failed_probes: int
    paged: bool
    rate_limited_streak: int
    last_retry_after: float | None
    trip_cause: str | None
    credential_ok_at: float | None
    credential_revoked: bool
    saved_at: float
    last_failure_detail: str = ""


def is_stale(
    verdict: Verdict, *, longest_cooldown: float, window: float | None, now: float
) -> bool:
    """A breaker verdict older than every span it could still matter for is discarded on start.

    Only the breaker's part ages: what is known about the key's credential is kept however old.
    """
    keep = max(longest_cooldown, verdict.cooldown)
    if verdict.state == State.CLOSED and verdict.count > 0 and window is not None:
        keep = max(keep, window)
    return now - verdict.saved_at > keep


DAY = 86_400.0
"""No stored time span is longer than this; a longer one is a damaged or hostile value."""


def _span(value: float) -> bool:
    return math.isfinite(value) and 0 <= value <= DAY


def bounded(
    verdict: Verdict, *, now: float, trip_cooldown: float, longest_cooldown: float
) -> tuple[Verdict, list[str]]:
    """The verdict with every number read within bounds, and what had to be corrected.

    Not finite, negative or beyond a day is a safe reading: an unknown time, the policy's trip
    cooldown, a zero count. A time in the future (the clock stepped back since the save, or the
    save was made with the clock ahead) is read as now, so a cooldown never outlasts its length.
    """
    notes: list[str] = []

    def when(name: str, value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value) or value < 0:
            notes.append(f"{name}={value!r}")
            return None
        return min(value, now)

    def count(name: str, value: int) -> int:
        if value < 0:
            notes.append(f"{name}={value!r}")
            return 0
        return value

    cooldown = verdict.cooldown
    if not _span(cooldown):
        notes.append(f"cooldown={cooldown!r}")
        cooldown = trip_cooldown
    retry_after = verdict.last_retry_after
    if retry_after is not None and not _span(retry_after):
        notes.append(f"last_retry_after={retry_after!r}")
        retry_after = None
    opened_at = when("opened_at", verdict.opened_at)
    if opened_at is None and verdict.state != State.CLOSED:
        opened_at = now  # open with no usable start: one cooldown from now
    saved_at = when("saved_at", verdict.saved_at)
    fixed = replace(
        verdict,
        count=count("count", verdict.count),
        failed_probes=count("failed_probes", verdict.failed_probes),
        rate_limited_streak=count("rate_limited_streak", verdict.rate_limited_streak),
        last_failure_at=when("last_failure_at", verdict.last_failure_at),
        opened_at=opened_at,
        cooldown=min(cooldown, longest_cooldown),
        last_retry_after=retry_after,
        credential_ok_at=when("credential_ok_at", verdict.credential_ok_at),
        saved_at=now if saved_at is None else saved_at,
    )
    return fixed, notes
