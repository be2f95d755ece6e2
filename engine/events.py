"""Everything the engine reports, as one record type with the design's names.

Each event gets its sequence number from the engine when it is emitted, so the audit log, the
headless trace and the live feed all agree on order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
