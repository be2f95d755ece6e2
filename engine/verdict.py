"""What survives a restart for one key, in wall-clock seconds so another process can read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Verdict:
    key: str
    agent: str | None
    state: str  # "closed" | "open" | "half_open"
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
    if verdict.state == "closed" and verdict.count > 0 and window is not None:
        keep = max(keep, window)
    return now - verdict.saved_at > keep
