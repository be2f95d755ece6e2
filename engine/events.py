"""Everything the engine reports, as one record type with the design's names.

Each event gets its sequence number from the engine when it is emitted, so the audit log, the
headless trace and the live feed all agree on order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.state import State

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
class BreakerView:
    """A read-only picture of one breaker for the console, the feed and `status`. `seq` is the
    last event it reflects (0 when not known), so a reader can tell an older picture from a
    newer one."""

    key: str
    agents: tuple[str, ...]
    state: State
    count: int
    trip_cause: str | None
    opened_at: float | None
    reopens_at: float | None
    cooldown: float
    failed_probes: int
    paged: bool
    paused: bool
    last_failure_at: float | None
    seq: int = 0
    #: Half-open with its probe out: since when (wall). None when no probe is out, so a
    #: half-open breaker with None lets its next call through as the probe.
    probe_since: float | None = None

    @property
    def shared(self) -> bool:
        return len(self.agents) > 1


class Event:
    """One line of history. `fields` keeps the design's per-type fields in the design's order.

    Kinds written on every call (`CallCompleted`, `CallDenied`) keep their values as typed
    attributes and build `fields` on first read, so an event nobody reads costs no dict; the
    public record (`record`) is built once and shared by every reader. Both are read-only.

    `view` is the key's breaker as of this event, on the events that change it (see
    docs/engine.md); None on the others.
    """

    __slots__ = ("_fields", "_record", "agent", "key", "seq", "type", "view", "wall")

    #: Made by another replica's script (`Relayed`): shown here, never audited or paged here.
    relayed = False

    def __init__(
        self,
        seq: int,
        type: str,
        key: str,
        agent: str | None,
        wall: float,
        fields: dict[str, Any] | None = None,
        view: BreakerView | None = None,
    ) -> None:
        self.seq = seq
        self.type = type
        self.key = key
        self.agent = agent
        self.wall = wall
        self._fields = fields
        self._record: tuple[float, dict[str, Any]] | None = None
        self.view = view

    @property
    def fields(self) -> dict[str, Any]:
        built = self._fields
        if built is None:
            built = self._fields = self._build_fields()
        return built

    def _build_fields(self) -> dict[str, Any]:
        return {}

    def renumbered(self, seq: int) -> Event:
        """The same event under another seq (a console that keeps one engine's seqs growing
        across its restarts)."""
        return Event(seq, self.type, self.key, self.agent, self.wall, self.fields, self.view)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.seq, self.type, self.key, self.agent, self.wall, self.fields) == (
            other.seq,
            other.type,
            other.key,
            other.agent,
            other.wall,
            other.fields,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(seq={self.seq}, type={self.type!r}, key={self.key!r}, "
            f"agent={self.agent!r}, wall={self.wall!r}, fields={self.fields!r})"
        )


class Relayed(Event):
    """A transition another replica's script made on a shared breaker (docs/replicas.md): its
    fields end with `origin`, that replica's instance, and carry no `cause_seq`."""

    __slots__ = ()

    relayed = True


#: A call's numbers as its line keeps them: (number, platform, tool, admitted wall, admitted
#: as, attempts, deadline seconds, admitted seq, the engine's epoch).
CallDetails = tuple[int, str, str, float | None, str | None, int, float, int | None, float]
#: How it ended: (probe, fault, agent status, refresh, platform status).
CallEnding = tuple[bool, str, int | str | None, str | None, int | None]


class CallCompleted(Event):
    """`call.completed`: a finished call, as the engine saw it. The call's numbers are copied
    into one tuple when the line is written (a probe's line may be written while its call goes
    on), how it ended into another (a healthy call's is one shared constant, `QUIET_ENDING`);
    the outcome is kept whole; each is read out only when asked. A line is written for every
    call a listener sees, so it is built with as few stores as it takes."""

    __slots__ = ("call", "ending", "result")

    type = CALL_COMPLETED  # every one's: its slot on `Event` goes unused

    def __init__(
        self,
        key: str,
        agent: str | None,
        call: CallDetails,
        result: Outcome,
        ending: CallEnding,
    ) -> None:
        self.seq = 0
        self.key = key
        self.agent = agent
        self.wall = 0.0
        self._fields = None
        self._record = None
        self.view = None
        self.call = call
        self.result = result
        self.ending = ending

    @property
    def probe(self) -> bool:
        return self.ending[0]

    @property
    def fault(self) -> str:
        return self.ending[1]

    @property
    def agent_status(self) -> int | str | None:
        return self.ending[2]

    @property
    def refresh(self) -> str | None:
        return self.ending[3]

    @property
    def platform_status(self) -> int | None:
        return self.ending[4]

    @property
    def call_number(self) -> int:
        return self.call[0]

    @property
    def call_id(self) -> str:
        return f"call-{self.call[0]:06d}"

    @property
    def platform(self) -> str:
        return self.call[1]

    @property
    def tool(self) -> str:
        return self.call[2]

    @property
    def admitted_t(self) -> float | None:
        admitted = self.call[3]
        return None if admitted is None else round(admitted - self.call[8], 3)

    @property
    def admitted_as(self) -> str | None:
        return self.call[4]

    @property
    def attempts(self) -> int:
        return self.call[5]

    @property
    def deadline_seconds(self) -> float:
        return self.call[6]

    @property
    def admitted_seq(self) -> int | None:
        return self.call[7]

    @property
    def outcome(self) -> OutcomeClass:
        return self.result.cls

    @property
    def counted(self) -> bool:
        return self.result.counted

    def _build_fields(self) -> dict[str, Any]:
        number, platform, tool, _, admitted_as, attempts, deadline, admitted_seq, _ = self.call
        probe, fault, agent_status, refresh, platform_status = self.ending
        result = self.result
        return {
            "call_id": f"call-{number:06d}",
            "platform": platform,
            "tool": tool,
            "admitted_t": self.admitted_t,
            "admitted_as": admitted_as,
            "probe": probe,
            "attempts": attempts,
            "deadline_seconds": deadline,
            "fault": fault,
            "refresh": refresh,
            "platform_status": platform_status,
            "agent_status": agent_status,
            "outcome": result.cls.value,
            "counted": result.counted,
            "retry_after_seconds": result.retry_after,
            "admitted_seq": admitted_seq,
        }


#: How a healthy call ends, shared by every line that says so: not a probe, fault and agent
#: status "ok", no refresh, no platform status.
QUIET_ENDING: Final[CallEnding] = (False, "ok", "ok", None, None)


class CallDenied(Event):
    """`call.denied`: a call the breaker refused."""

    __slots__ = ("call_number", "platform", "reason", "retry_after_seconds")

    def __init__(
        self,
        seq: int,
        key: str,
        agent: str | None,
        wall: float,
        call_number: int,
        platform: str,
        reason: str | None,
        retry_after: float,
    ) -> None:
        Event.__init__(self, seq, CALL_DENIED, key, agent, wall)
        self.call_number = call_number
        self.platform = platform
        self.reason = reason
        self.retry_after_seconds = retry_after

    @property
    def call_id(self) -> str:
        return f"call-{self.call_number:06d}"

    def _build_fields(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "platform": self.platform,
            "reason": self.reason,
            "retry_after_seconds": self.retry_after_seconds,
        }


def iso_utc(wall: float) -> str:
    """ISO-8601 UTC to the millisecond, rounded (not truncated) so `at` agrees with `t`."""
    whole = math.floor(wall)
    stamp = datetime.fromtimestamp(whole, UTC) + timedelta(
        milliseconds=round((wall - whole) * 1000)
    )
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(event: Event, epoch: float) -> dict[str, Any]:
    """The public shape of an event (headless trace, feed, page hook): fixed keys first.
    Built once per event and epoch and shared by every reader, so it is read-only."""
    kept = event._record
    if kept is not None and kept[0] == epoch:
        return kept[1]
    t = round(event.wall - epoch, 3)
    line = {
        "seq": event.seq,
        "t": t,
        "at": iso_utc(epoch + t),
        "type": event.type,
        "key": event.key,
        "agent": event.agent,
        **event.fields,
    }
    event._record = (epoch, line)
    return line


_NOT_HISTORY = frozenset({"success", "platform_answer"})


def audit_form(event: Event) -> Event | None:
    """The audit log keeps failures, refusals and transitions; a success is not history, nor
    a relayed 1xx-3xx (neither a success nor a failure)."""
    if event.type != CALL_COMPLETED:
        return event
    if event.fields.get("outcome") in _NOT_HISTORY:
        return None
    return Event(
        event.seq, CALL_FAILED, event.key, event.agent, event.wall, event.fields, event.view
    )
