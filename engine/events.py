"""Everything the engine reports, as one record type with the design's names.

Each event gets its sequence number from the engine when it is emitted, so the audit log, the
headless trace and the live feed all agree on order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

CALL_COMPLETED: Final = "call.completed"
CALL_DENIED: Final = "call.denied"
CALL_FAILED: Final = "call.failed"
TRIPPED: Final = "circuit_breaker.tripped"
HALF_OPEN: Final = "circuit_breaker.half_open"
REOPENED: Final = "circuit_breaker.reopened"
RECOVERED: Final = "circuit_breaker.recovered"
RESET: Final = "circuit_breaker_reset"
PAGE: Final = "circuit_breaker.page"
RESTORED: Final = "circuit_breaker.restored"
CREDENTIAL_REVOKED: Final = "credential.revoked"
CREDENTIAL_RESTORED: Final = "credential.restored"

TRANSITIONS: Final = frozenset({TRIPPED, HALF_OPEN, REOPENED, RECOVERED, RESET, PAGE, RESTORED})


@dataclass(slots=True)
class Event:
    """One line of history. `fields` keeps the design's per-type fields in the design's order."""

    seq: int
    type: str
    key: str
    agent: str | None
    wall: float
    fields: dict[str, Any] = field(default_factory=dict)


def iso_utc(wall: float) -> str:
    """ISO-8601 UTC to the millisecond, rounded (not truncated) so `at` agrees with `t`."""
    whole = math.floor(wall)
    stamp = datetime.fromtimestamp(whole, UTC) + timedelta(
        milliseconds=round((wall - whole) * 1000)
    )
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(event: Event, epoch: float) -> dict[str, Any]:
    """The public shape of an event (headless trace, feed, page hook): fixed keys first."""
    t = round(event.wall - epoch, 3)
    return {
        "seq": event.seq,
        "t": t,
        "at": iso_utc(epoch + t),
        "type": event.type,
        "key": event.key,
        "agent": event.agent,
        **event.fields,
    }


def audit_form(event: Event) -> Event | None:
    """The audit log keeps failures, refusals and transitions; a success is not history."""
    if event.type != CALL_COMPLETED:
        return event
    if event.fields.get("outcome") == "success":
        return None
    return Event(event.seq, CALL_FAILED, event.key, event.agent, event.wall, event.fields)
