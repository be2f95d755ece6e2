"""Everything the engine reports, as one record type with the design's names.

Each event gets its sequence number from the engine when it is emitted, so the audit log, the
headless trace and the live feed all agree on order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final

from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.state import State

CALL_COMPLETED: Final = "call.completed"
CALL_DENIED: Final = "call.denied"
CALL_WOULD_DENY: Final = "call.would_deny"
CALL_FAILED: Final = "call.failed"
TRIPPED: Final = "circuit_breaker.tripped"
HALF_OPEN: Final = "circuit_breaker.half_open"
REOPENED: Final = "circuit_breaker.reopened"
RECOVERED: Final = "circuit_breaker.recovered"
RESET: Final = "circuit_breaker_reset"
PAGE: Final = "circuit_breaker.page"
RESTORED: Final = "circuit_breaker.restored"
HELD: Final = "circuit_breaker.held"
RELEASED: Final = "circuit_breaker.released"
MODE: Final = "circuit_breaker.mode"
CREDENTIAL_REVOKED: Final = "credential.revoked"
CREDENTIAL_RESTORED: Final = "credential.restored"

TRANSITIONS: Final = frozenset(
    {TRIPPED, HALF_OPEN, REOPENED, RECOVERED, RESET, PAGE, RESTORED, HELD, RELEASED, MODE}
)


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
    #: While held (state `held`): who holds it, why, and until when (wall).
    held_by: str | None = None
    held_reason: str | None = None
    held_until: float | None = None
    #: `enforce`, or `shadow`: the breaker decides as it would, and refuses nothing.
    mode: str = "enforce"

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

    @property
    def relayed(self) -> bool:
        """Made by another replica's script (its fields end with `origin`): shown here, never
        audited or paged here. A record read back untyped says so by its fields; a line not
        yet built (a call's) has none."""
        fields = self._fields
        return fields is not None and "origin" in fields

    def _build_fields(self) -> dict[str, Any]:
        return {}

    def renumbered(self, seq: int) -> Event:
        """The same event under another seq (a console that keeps one engine's seqs growing
        across its restarts)."""
        return decoded(seq, self.type, self.key, self.agent, self.wall, self.fields, self.view)

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


#: A call's numbers as its line keeps them: (number, platform, tool, admitted wall, admitted
#: as, attempts, deadline seconds, admitted seq, the engine's epoch).
CallDetails = tuple[int, str, str, float | None, str | None, int, float, int | None, float]
#: How it ended: (probe, fault, agent status, refresh, platform status).
CallEnding = tuple[bool, str, int | str | None, str | None, int | None]


class CallCompleted(Event):
    """`call.completed`: a finished call, as the engine saw it. The call's numbers are copied
    into one tuple when the line is written (a probe's line may be written while its call goes
    on), how it ended into another;
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


class CallWouldDeny(CallDenied):
    """`call.would_deny`: a call a shadow breaker would have refused, let through; written when
    the call completes, right before its `call.completed`, with its outcome and the seconds
    its attempts took."""

    __slots__ = ("attempt_seconds", "outcome")

    def __init__(
        self,
        key: str,
        agent: str | None,
        call_number: int,
        platform: str,
        reason: str | None,
        retry_after: float,
        outcome: str,
        attempt_seconds: float,
    ) -> None:
        CallDenied.__init__(self, 0, key, agent, 0.0, call_number, platform, reason, retry_after)
        self.type = CALL_WOULD_DENY
        self.outcome = outcome
        self.attempt_seconds = attempt_seconds

    def _build_fields(self) -> dict[str, Any]:
        fields = CallDenied._build_fields(self)
        fields["outcome"] = self.outcome
        fields["attempt_seconds"] = self.attempt_seconds
        return fields


#: A design field whose name is a Python keyword, and the attribute that keeps it.
_ATTRIBUTE: Final = {"from": "from_"}


class Transition(Event):
    """A breaker's change of state: one class per kind, the design's fields as typed
    attributes, `fields` built from them on first read in the design's order.

    The core makes them unnumbered, as a call's line is made; the engine stamps the agent, the
    seq, the time, the view and `cause_seq` (the line that caused it, when a line did). Another
    replica's script made it when it has an `origin` (docs/replicas.md): its fields then end
    with `origin` and carry no `cause_seq`."""

    __slots__ = ("cause_seq", "origin", "shadow")

    #: The design's fields of the kind, in order, before `cause_seq` and `origin`.
    own: ClassVar[tuple[str, ...]] = ()

    def __init__(self, key: str, *, origin: str | None = None) -> None:
        self.seq = 0
        self.key = key
        self.agent: str | None = None
        self.wall = 0.0
        self._fields: dict[str, Any] | None = None
        self._record: tuple[float, dict[str, Any]] | None = None
        self.view: BreakerView | None = None
        self.cause_seq: int | None = None
        self.origin = origin
        #: A shadow breaker's transition (DESIGN: every one carries `"shadow": true`).
        self.shadow = False

    @property
    def relayed(self) -> bool:
        return self.origin is not None

    def _build_fields(self) -> dict[str, Any]:
        fields = {name: getattr(self, _ATTRIBUTE.get(name, name)) for name in self.own}
        if self.cause_seq is not None:
            fields["cause_seq"] = self.cause_seq
        if self.shadow:
            fields["shadow"] = True
        if self.origin is not None:  # last: docs/replicas.md
            fields["origin"] = self.origin
        return fields


class Tripped(Transition):
    """`circuit_breaker.tripped`: closed to open, after `count` counted failures."""

    __slots__ = ("cooldown_seconds", "count", "failure_class")
    type = TRIPPED
    own = ("failure_class", "count", "cooldown_seconds")

    def __init__(
        self,
        key: str,
        failure_class: OutcomeClass,
        count: int,
        cooldown_seconds: float,
        *,
        origin: str | None = None,
    ) -> None:
        Transition.__init__(self, key, origin=origin)
        self.failure_class = failure_class
        self.count = count
        self.cooldown_seconds = cooldown_seconds


class HalfOpened(Transition):
    """`circuit_breaker.half_open`: the cooldown ran out; the next call is the probe."""

    __slots__ = ()
    type = HALF_OPEN


class Reopened(Transition):
    """`circuit_breaker.reopened`: the probe failed; open again, for longer."""

    __slots__ = ("cooldown_seconds",)
    type = REOPENED
    own = ("cooldown_seconds",)

    def __init__(self, key: str, cooldown_seconds: float, *, origin: str | None = None) -> None:
        Transition.__init__(self, key, origin=origin)
        self.cooldown_seconds = cooldown_seconds


class Recovered(Transition):
    """`circuit_breaker.recovered`: the probe succeeded; closed."""

    __slots__ = ()
    type = RECOVERED


class Reset(Transition):
    """`circuit_breaker_reset`: an operator closed it, whatever it was."""

    __slots__ = ("actor", "reason")
    type = RESET
    own = ("actor", "reason")

    def __init__(self, key: str, actor: str, reason: str, *, origin: str | None = None) -> None:
        Transition.__init__(self, key, origin=origin)
        self.actor = actor
        self.reason = reason


class Paged(Transition):
    """`circuit_breaker.page`: the second failed probe of an open episode. A replica whose
    clock is off the shared store's says so on its page (`warning`): the page may come early
    or late."""

    __slots__ = ("warning",)
    type = PAGE

    def __init__(self, key: str, *, origin: str | None = None, warning: str | None = None) -> None:
        Transition.__init__(self, key, origin=origin)
        self.warning = warning

    def _build_fields(self) -> dict[str, Any]:
        fields = Transition._build_fields(self)
        return fields if self.warning is None else {"warning": self.warning, **fields}


class Restored(Transition):
    """`circuit_breaker.restored`: a breaker seeded from a stored verdict (or, relayed, one
    adopted from the shared store); times in the run's `t`."""

    __slots__ = (
        "cooldown_seconds",
        "count",
        "failed_probes",
        "last_failure_t",
        "last_retry_after_seconds",
        "opened_t",
        "paged",
        "rate_limited_streak",
        "state",
    )
    type = RESTORED
    own = (
        "state",
        "count",
        "last_failure_t",
        "opened_t",
        "cooldown_seconds",
        "failed_probes",
        "paged",
        "rate_limited_streak",
        "last_retry_after_seconds",
    )

    def __init__(
        self,
        key: str,
        *,
        state: State,
        count: int,
        last_failure_t: float | None,
        opened_t: float | None,
        cooldown_seconds: float,
        failed_probes: int,
        paged: bool,
        rate_limited_streak: int,
        last_retry_after_seconds: float | None,
        origin: str | None = None,
    ) -> None:
        Transition.__init__(self, key, origin=origin)
        self.state = state
        self.count = count
        self.last_failure_t = last_failure_t
        self.opened_t = opened_t
        self.cooldown_seconds = cooldown_seconds
        self.failed_probes = failed_probes
        self.paged = paged
        self.rate_limited_streak = rate_limited_streak
        self.last_retry_after_seconds = last_retry_after_seconds


class Held(Transition):
    """`circuit_breaker.held`: an operator holds the breaker open until `until` (wall); the
    trace prints it as `until_t` in the run's seconds, the audit log as a UTC time."""

    __slots__ = ("actor", "reason", "until", "until_t")
    type = HELD
    own = ("actor", "reason", "until_t")

    def __init__(
        self, key: str, actor: str, reason: str, until: float, *, origin: str | None = None
    ) -> None:
        Transition.__init__(self, key, origin=origin)
        self.actor = actor
        self.reason = reason
        self.until = until
        #: Set by the engine when it numbers the line (its epoch is the run's).
        self.until_t: float | None = None


class Released(Transition):
    """`circuit_breaker.released`: a hold ended, by an operator (`actor`) or `expiry`."""

    __slots__ = ("actor",)
    type = RELEASED
    own = ("actor",)

    def __init__(self, key: str, actor: str, *, origin: str | None = None) -> None:
        Transition.__init__(self, key, origin=origin)
        self.actor = actor


class ModeChanged(Transition):
    """`circuit_breaker.mode`: an operator switched the breaker between enforce and shadow."""

    __slots__ = ("actor", "from_", "reason", "to")
    type = MODE
    own = ("actor", "reason", "from", "to")

    def __init__(
        self, key: str, actor: str, reason: str, from_: str, to: str, *, origin: str | None = None
    ) -> None:
        Transition.__init__(self, key, origin=origin)
        self.actor = actor
        self.reason = reason
        self.from_ = from_
        self.to = to


_KINDS: Final[dict[str, type[Transition]]] = {
    TRIPPED: Tripped,
    HALF_OPEN: HalfOpened,
    REOPENED: Reopened,
    RECOVERED: Recovered,
    RESET: Reset,
    PAGE: Paged,
    RESTORED: Restored,
    RELEASED: Released,
}
#: What a stored or sent record's typed value is read back as.
_DECODE: Final[dict[str, Callable[[Any], Any]]] = {
    "failure_class": OutcomeClass,
    "state": State,
}


#: What may follow a transition's own fields in a record.
_TAILS: Final[tuple[list[str], ...]] = (
    [],
    ["cause_seq"],
    ["origin"],
    ["shadow"],
    ["cause_seq", "shadow"],
    ["origin", "shadow"],
)


def decoded(
    seq: int,
    type: str,
    key: str,
    agent: str | None,
    wall: float,
    fields: dict[str, Any],
    view: BreakerView | None = None,
) -> Event:
    """An event read back (an audit log, a trace, the feed): a transition as its kind's class
    when its fields are exactly the design's, else as it was written. Its `fields` stay the
    record's own, so nothing read is changed on the way out."""
    kind = _KINDS.get(type)
    if kind is None:
        return Event(seq, type, key, agent, wall, fields, view)
    names = list(fields)
    tail = names[len(kind.own) :]
    if names[: len(kind.own)] != list(kind.own) or tail not in _TAILS:
        return Event(seq, type, key, agent, wall, fields, view)
    event = kind.__new__(kind)
    try:
        values = {n: _DECODE[n](fields[n]) if n in _DECODE else fields[n] for n in kind.own}
    except ValueError:
        return Event(seq, type, key, agent, wall, fields, view)
    Transition.__init__(event, key, origin=fields.get("origin"))
    for name, value in values.items():
        setattr(event, name, value)
    cause = fields.get("cause_seq")
    event.cause_seq = cause if isinstance(cause, int) else None
    event.shadow = fields.get("shadow") is True
    event.seq, event.agent, event.wall, event.view = seq, agent, wall, view
    event._fields = fields
    return event


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
    a relayed 1xx-3xx (neither a success nor a failure). A hold's end is kept as a UTC time
    (`until`), not in a run's seconds."""
    if isinstance(event, Held):
        fields = {"actor": event.actor, "reason": event.reason, "until": iso_utc(event.until)}
        rest = {k: v for k, v in event.fields.items() if k not in event.own}
        return Event(
            event.seq, event.type, event.key, event.agent, event.wall, fields | rest, event.view
        )
    if event.type != CALL_COMPLETED:
        return event
    if event.fields.get("outcome") in _NOT_HISTORY:
        return None
    return Event(
        event.seq, CALL_FAILED, event.key, event.agent, event.wall, event.fields, event.view
    )
