"""The breaker state machine: pure, sans-I/O, one object per key.

Like h11's connection object it takes values and a time and returns decisions and transitions;
it never reads a clock, sleeps or touches the network. The engine wraps it with locking,
sequence numbers and persistence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from breakerdeck.engine.errors import NotHeld
from breakerdeck.engine.events import (
    BreakerView,
    HalfOpened,
    Held,
    Paged,
    Recovered,
    Released,
    Reopened,
    Reset,
    Transition,
    Tripped,
)
from breakerdeck.engine.outcomes import ABANDONED_TIMEOUT, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State


class DenyReason(StrEnum):
    OPEN = "circuit_breaker_open"
    PROBE_IN_FLIGHT = "probe_in_flight"
    HELD = "held"


@dataclass(frozen=True, slots=True)
class Hold:
    """An operator's hold (DESIGN, "Operator control"): who, why, and until when, on the wall
    clock for words and on the breaker's clock (`until`) for the rule."""

    actor: str
    reason: str
    until_wall: float
    until: float

    def shifted(self, offset: float) -> Hold:
        """The same hold with its rule's time moved by `offset` (wall to monotonic)."""
        return Hold(self.actor, self.reason, self.until_wall, self.until_wall + offset)


#: What names a call to the core: any value equal only to itself (the engine's call numbers).
CallId = int | str


@dataclass(slots=True)
class Admission:
    allowed: bool
    as_probe: bool = False
    reason: DenyReason | None = None
    retry_after: float = 0.0
    cause: OutcomeClass | None = None
    #: The operator's hold behind this refusal: held, or the probe of the half-open it ended in.
    hold: Hold | None = None


ADMIT_NORMAL = Admission(allowed=True)
ADMIT_PROBE = Admission(allowed=True, as_probe=True)

# Module-level names: an enum member looked up through its class costs more than the rest of
# the closed path.
_CLOSED = State.CLOSED
_OPEN = State.OPEN
_HALF_OPEN = State.HALF_OPEN
_HELD = State.HELD
_SUCCESS = OutcomeClass.SUCCESS
_NONE: tuple[()] = ()
_ADMITTED_CLOSED = (ADMIT_NORMAL, _NONE)
_DENY_OPEN = DenyReason.OPEN

#: The abandoned probe in a row (each with a request on the wire) that counts as a timeout.
ABANDONED_PROBES_COUNTED = 3


@dataclass(frozen=True, slots=True)
class BreakerState:
    """Everything a breaker keeps between calls except a probe in flight, with its times on
    whatever clock the reader asked for: what a view shows and a verdict stores."""

    state: State
    count: int
    last_failure_at: float | None
    last_failure_detail: str
    opened_at: float | None
    reopens_at: float | None
    cooldown: float
    failed_probes: int
    paged: bool
    rate_limited_streak: int
    last_retry_after: float | None
    trip_cause: OutcomeClass | None
    #: The operator's hold: while held, and through the half-open it ended in.
    hold: Hold | None = None


def picture(
    key: str,
    agents: tuple[str, ...],
    b: BreakerState,
    *,
    paused: bool,
    seq: int = 0,
    probe_since: float | None = None,
    mode: str = "enforce",
) -> BreakerView:
    """A breaker's state as the view the console, the feed and `status` read (the engine's
    and a replay's alike)."""
    hold = b.hold if b.state is _HELD else None
    return BreakerView(
        key=key,
        agents=agents,
        state=b.state,
        count=b.count,
        trip_cause=b.trip_cause.value if b.trip_cause else None,
        opened_at=b.opened_at,
        reopens_at=b.reopens_at,
        cooldown=b.cooldown,
        failed_probes=b.failed_probes,
        paged=b.paged,
        paused=paused,
        last_failure_at=b.last_failure_at,
        seq=seq,
        probe_since=probe_since,
        held_by=None if hold is None else hold.actor,
        held_reason=None if hold is None else hold.reason,
        held_until=None if hold is None else hold.until_wall,
        mode=mode,
    )


def _shifted(value: float | None, offset: float) -> float | None:
    return None if value is None else value + offset


class Breaker:
    """State for one key. Only counted failures move `count`; only a success resets it."""

    __slots__ = (
        "abandoned_probes",
        "cooldown",
        "count",
        "failed_probes",
        "hold",
        "key",
        "last_failure_at",
        "last_failure_detail",
        "last_retry_after",
        "min_retry_after",
        "opened_at",
        "paged",
        "policy",
        "probe_deadline",
        "probe_id",
        "rate_limited_streak",
        "state",
        "trip_cause",
    )

    def __init__(self, key: str, policy: AgentPolicy | ToolPolicy) -> None:
        self.key = key
        self.policy = policy
        self.min_retry_after = policy.min_retry_after
        self.state = _CLOSED
        self.count = 0
        self.last_failure_at: float | None = None
        self.last_failure_detail = ""
        self.opened_at: float | None = None
        self.cooldown = 0.0
        self.failed_probes = 0
        self.paged = False
        self.rate_limited_streak = 0
        self.last_retry_after: float | None = None
        self.trip_cause: OutcomeClass | None = None
        self.probe_id: CallId | None = None
        self.probe_deadline = 0.0
        #: This open episode's run of probes abandoned with a request on the wire (`judge`).
        #: Kept by this process only: a new one starts with no probe out.
        self.abandoned_probes = 0
        self.hold: Hold | None = None

    def snapshot(self, offset: float = 0.0) -> BreakerState:
        """The breaker's fields in one record, times moved by `offset` (monotonic to wall)."""
        return BreakerState(
            state=self.state,
            count=self.count,
            last_failure_at=_shifted(self.last_failure_at, offset),
            last_failure_detail=self.last_failure_detail,
            opened_at=_shifted(self.opened_at, offset),
            reopens_at=_shifted(self.reopens_at, offset),
            cooldown=self.cooldown,
            failed_probes=self.failed_probes,
            paged=self.paged,
            rate_limited_streak=self.rate_limited_streak,
            last_retry_after=self.last_retry_after,
            trip_cause=self.trip_cause,
            hold=self.hold,
        )

    @classmethod
    def from_state(
        cls, key: str, policy: AgentPolicy | ToolPolicy, saved: BreakerState, offset: float = 0.0
    ) -> Breaker:
        """A breaker holding `saved`, times moved by `offset` (wall to monotonic). No probe is
        in flight in a new process: a saved half-open breaker comes back open."""
        breaker = cls(key, policy)
        breaker.take(saved, offset)
        if breaker.state is _HALF_OPEN:
            breaker.state = _OPEN
        return breaker

    def take(
        self,
        saved: BreakerState,
        offset: float = 0.0,
        probe_id: CallId | None = None,
        probe_deadline: float = 0.0,
    ) -> None:
        """Become `saved` (times moved by `offset`), with its probe if any: what a replica does
        with a decision another process made."""
        self.state = saved.state
        self.count = saved.count
        self.last_failure_at = _shifted(saved.last_failure_at, offset)
        self.last_failure_detail = saved.last_failure_detail
        self.opened_at = _shifted(saved.opened_at, offset)
        self.cooldown = saved.cooldown
        self.failed_probes = saved.failed_probes
        self.paged = saved.paged
        self.rate_limited_streak = saved.rate_limited_streak
        self.last_retry_after = saved.last_retry_after
        self.trip_cause = saved.trip_cause
        hold = saved.hold
        self.hold = None if hold is None else hold.shifted(offset)
        self.probe_id = probe_id
        self.probe_deadline = probe_deadline + offset
        if saved.state is _CLOSED:  # the episode ended
            self.abandoned_probes = 0

    @property
    def reopens_at(self) -> float | None:
        """When an open breaker lets its next probe through (a held one: when its hold runs
        out), in monotonic seconds."""
        if self.state is _OPEN and self.opened_at is not None:
            return self.opened_at + self.cooldown
        if self.state is _HELD and self.hold is not None:
            return self.hold.until
        return None

    def admit(
        self, call_id: CallId, now: float, lease: float
    ) -> tuple[Admission, Sequence[Transition]]:
        """Let a call in as normal or as the one probe, or refuse it with the time left."""
        state = self.state
        if state is _CLOSED:
            return _ADMITTED_CLOSED
        if state is _OPEN:
            left = self.opened_at + self.cooldown - now  # type: ignore[operator]
            if left > 0:
                return self.refusal(_DENY_OPEN, left), _NONE
        transitions = self.poll(now)
        if self.state is _HELD:
            return self.held_refusal(now), transitions
        if self.probe_id is None:
            self.probe_id = call_id
            self.probe_deadline = now + lease
            return ADMIT_PROBE, transitions
        return self.refusal(DenyReason.PROBE_IN_FLIGHT, self.policy.probe_retry_after_seconds), (
            transitions
        )

    def held_refusal(self, now: float) -> Admission:
        """Every call's answer while held: the time left on the hold, and who holds it."""
        hold = self.hold
        assert hold is not None
        return Admission(False, False, DenyReason.HELD, max(hold.until - now, 0.0), None, hold)

    def cooling(self, now: float) -> Admission | None:
        """The refusal an open breaker gives inside its cooldown, or None. It only reads, so a
        caller may ask without a lock: at worst it refuses a call a moment after the cooldown
        ended, as a call that came a moment sooner would have been."""
        opened_at = self.opened_at
        if self.state is _OPEN and opened_at is not None:
            left = opened_at + self.cooldown - now
            if left > 0:
                return self.refusal(_DENY_OPEN, left)
        return None

    def refusal(self, reason: DenyReason, left: float) -> Admission:
        floor = self.min_retry_after
        return Admission(
            False, False, reason, left if left > floor else floor, self.trip_cause, self.hold
        )

    def poll(self, now: float) -> list[Transition]:
        """Move an open breaker whose cooldown has run out, or a held one whose hold has, to
        half-open."""
        due = self.reopens_at
        if due is not None and now >= due:
            if self.state is _HELD:
                return self._release("expiry")
            self.state = _HALF_OPEN
            self.probe_id = None
            return [HalfOpened(self.key)]
        return []

    # -- the operator's hold -----------------------------------------------------------------

    def hold_open(self, hold: Hold) -> list[Transition]:
        """Held open until `hold.until`: every call refused, no probe, no counter or state
        moves until it is released or runs out (a hold taken again replaces the first). A
        probe out now keeps its call, whose outcome then changes nothing."""
        self.state = _HELD
        self.hold = hold
        self.probe_id = None
        return [Held(self.key, hold.actor, hold.reason, hold.until_wall)]

    def release(self, actor: str, reason: str, *, close: bool) -> list[Transition]:
        """End a hold: in half-open (the next call is the probe), or closed (`close`: the
        operator vouches for the platform, as a reset does)."""
        if self.state is not _HELD:
            raise NotHeld(f"{self.key} is not held")
        if close:  # the reset releases the hold first, by the same actor
            return self.reset(actor, reason)
        return self._release(actor)

    def _release(self, actor: str) -> list[Transition]:
        """Held to half-open: a failed probe re-opens at the first cooldown step as the
        episode's first failed probe (`_reopen`)."""
        self.state = _HALF_OPEN
        self.probe_id = None
        self.failed_probes = 0
        self.abandoned_probes = 0
        self.paged = False
        return [Released(self.key, actor), HalfOpened(self.key)]

    def expired_probe(self, now: float) -> CallId | None:
        """The probe that has outlived its lease, if any; the engine records it as failed."""
        if self.state is _HALF_OPEN and now > self.probe_deadline:
            return self.probe_id
        return None

    def extend_probe(self, call_id: CallId, seconds: float) -> None:
        """A probe waiting out a Retry-After keeps its slot for that long too."""
        if self.probe_id == call_id:
            self.probe_deadline += seconds

    def is_probe(self, call_id: CallId) -> bool:
        return self.state is _HALF_OPEN and self.probe_id == call_id

    def judge(self, call_id: CallId, outcome: Outcome, sent: bool) -> Outcome:
        """What a call's outcome is to the breaker: itself, unless the call is the current
        probe and its caller abandoned it (`Outcome.abandoned`, neutral). The third such probe
        in a row of one open episode that had a request on the wire (`sent`) counts as a
        timeout, so a caller whose own timeout is shorter than the platform's cannot keep a
        hanging platform probed without end. A probe abandoned before it sent anything says
        nothing of the platform and leaves the run as it was; any other outcome of the probe
        ends the run."""
        if not self.is_probe(call_id):
            return outcome
        if not outcome.abandoned:
            self.abandoned_probes = 0
            return outcome
        if sent:
            self.abandoned_probes += 1
            if self.abandoned_probes >= ABANDONED_PROBES_COUNTED:
                self.abandoned_probes = 0
                return ABANDONED_TIMEOUT
        return outcome

    def record(self, call_id: CallId, outcome: Outcome, now: float) -> Sequence[Transition]:
        """Apply one completed call. Late completions are applied as the design says; while
        held, none changes anything (a success does not end a hold)."""
        if self.state is _HELD:
            return _NONE
        if outcome.cls is _SUCCESS:
            if self.state is _CLOSED:
                # Closed already holds every closed value but the run of failures.
                self.count = self.rate_limited_streak = 0
                return _NONE
            return self._succeed()
        if outcome.counted and not self.policy.may_count(outcome.cls):
            raise ValueError(f"{outcome.cls} never counts under the {self.policy.kind} policy")
        was_probe = self.is_probe(call_id)
        if not outcome.counted:
            if was_probe:
                self.probe_id = None
            return []
        self._count(outcome, now)
        if was_probe:
            return self._reopen(outcome)
        if self.state is _CLOSED and self.count >= self.policy.threshold(outcome.cls):
            return self._trip(outcome, now)
        return []

    def _succeed(self) -> list[Transition]:
        self._close()
        return [Recovered(self.key)]

    def _close(self) -> None:
        self.abandoned_probes = 0
        self.state = _CLOSED
        self.count = 0
        self.failed_probes = 0
        self.paged = False
        self.rate_limited_streak = 0
        self.probe_id = None
        self.opened_at = None
        self.cooldown = 0.0
        self.trip_cause = None
        self.hold = None

    def _count(self, outcome: Outcome, now: float) -> None:
        window = self.policy.window
        if (
            window is not None
            and self.last_failure_at is not None
            and now - self.last_failure_at > window
        ):
            self.count = 0
        self.count += 1
        self.last_failure_at = now
        self.last_failure_detail = outcome.detail
        if outcome.cls is OutcomeClass.RATE_LIMITED:
            self.rate_limited_streak += 1
            self.last_retry_after = outcome.retry_after
        else:
            self.rate_limited_streak = 0

    def _trip(self, outcome: Outcome, now: float) -> list[Transition]:
        self.state = _OPEN
        self.opened_at = now
        self.failed_probes = 0
        self.abandoned_probes = 0
        self.paged = False
        self.trip_cause = outcome.cls
        if self.rate_limited_streak >= self.policy.threshold(outcome.cls):
            self.cooldown = self._rate_limit_cooldown(outcome)
        else:
            self.cooldown = self.policy.trip_cooldown()
        return [Tripped(self.key, outcome.cls, self.count, self.cooldown)]

    def _reopen(self, outcome: Outcome) -> list[Transition]:
        self.failed_probes += 1
        self.abandoned_probes = 0
        self.state = _OPEN
        self.opened_at = self.last_failure_at
        self.probe_id = None
        if outcome.cls is OutcomeClass.RATE_LIMITED and outcome.retry_after is not None:
            self.cooldown = self._rate_limit_cooldown(outcome)
        elif self.hold is not None:  # the probe a hold ended in: the ladder starts again
            self.cooldown = self.policy.trip_cooldown()
        else:
            self.cooldown = self.policy.probe_failure_cooldown(self.failed_probes)
        self.hold = None
        transitions: list[Transition] = [Reopened(self.key, self.cooldown)]
        if self.failed_probes >= 2 and not self.paged:
            self.paged = True
            transitions.append(Paged(self.key))
        return transitions

    def _rate_limit_cooldown(self, outcome: Outcome) -> float:
        return self.policy.rate_limit_cooldown(outcome.retry_after or self.policy.trip_cooldown())

    def reset(self, actor: str, reason: str) -> list[Transition]:
        """An operator's reset: closed, counter and ladder zeroed, whatever the state was; a
        hold it ends is released first, by the same actor."""
        released: list[Transition] = [Released(self.key, actor)] if self.state is _HELD else []
        self._close()
        self.last_failure_at = None
        return [*released, Reset(self.key, actor, reason)]
