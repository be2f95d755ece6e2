"""A card: one breaker as the console shows it, built from an engine view plus its recent
history, as plain frozen data the UI reads and never changes."""

from __future__ import annotations

from dataclasses import dataclass, field

from breakerdeck.console.states import BY_NAME, CLOSED, SHADOW, StateLook, look_of, mode_of
from breakerdeck.console.timeline import Mark, Point
from breakerdeck.console.words import cause_word, clock_text, mmss
from breakerdeck.engine.events import BreakerView
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State

#: Trouble first: paged, then each state's `trouble` (open, half-open, paused, closed).
RANK_PAGED = 0
RANK_CLOSED = 1 + CLOSED.trouble

_REASONS = {"circuit_breaker_open": "breaker open", "probe_in_flight": "probe in flight"}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The policy's thresholds, enough to write a counter the way the design does."""

    kind: str  # "agent" | "tool"
    auth: int = 3
    upstream: int = 5
    failure: int = 3

    def counter(self, count: int, *, approximate: bool = False) -> str:
        """`7 failures · trips at auth 3 / upstream 5`: the counter and what it trips at, each
        said (`auth 3 / upstream 5` alone read as two counts); `≈7` replayed from an audit
        log, which keeps no successes."""
        failures = f"{'≈' if approximate else ''}{count} failure{'' if count == 1 else 's'}"
        if self.kind == "agent":
            return f"{failures} · trips at auth {self.auth} / upstream {self.upstream}"
        return f"{failures} · trips at {self.failure}"

    @classmethod
    def of(cls, policy: AgentPolicy | ToolPolicy) -> Thresholds:
        if isinstance(policy, AgentPolicy):
            return cls("agent", auth=policy.auth_threshold, upstream=policy.upstream_threshold)
        return cls("tool", failure=policy.failure_threshold)


@dataclass(frozen=True, slots=True)
class Denied:
    wall: float
    platform: str
    reason: str
    agent: str | None
    #: A shadow breaker's would-be refusal (`call.would_deny`): the call went through.
    would: bool = False

    @property
    def text(self) -> str:
        said = f"{clock_text(self.wall)} {self.platform} {_REASONS.get(self.reason, self.reason)}"
        return f"{said} (would-be)" if self.would else said


@dataclass(frozen=True, slots=True)
class Failure:
    seq: int
    wall: float
    platform: str
    outcome: str
    fault: str
    agent_status: object
    agent: str | None
    counted: bool


@dataclass(frozen=True, slots=True)
class Trip:
    """One open episode: when, why, how many failures, and how it ended (None: still open)."""

    seq: int
    wall: float
    cause: str
    count: int
    reopened: int = 0
    paged: bool = False
    ended: str | None = None  # "recovered" | "reset"
    ended_wall: float | None = None
    actor: str | None = None
    reason: str | None = None

    @property
    def short(self) -> str:
        ending = (
            "open"
            if self.ended is None
            else ("recovered" if self.ended == "recovered" else f"reset by {self.actor}")
        )
        probes = ""
        if self.reopened:
            probes = f", {self.reopened} failed probe{'s' if self.reopened > 1 else ''}"
        when = "" if self.ended_wall is None else f" {clock_text(self.ended_wall)}"
        return (
            f"{clock_text(self.wall)} {cause_word(self.cause)}×{self.count}{probes} → "
            f"{ending}{when}"
        )


@dataclass(frozen=True, slots=True)
class Card:
    """One breaker as shown under one agent (under `tool`, a shared breaker has several).

    `view.key` is the source's id for the breaker (`id`); it is the breaker's key, except when
    several remote engines are watched: then `name` is the key and `source` the engine's label.
    `aggregate` ("ava: open on 3 of 5") is set on the first card of a key several sources report.
    A card that stands for replicas sharing the breaker says how many more in `source`
    ("replica-1 +2"; see `group_by_key`).
    """

    agent: str
    view: BreakerView
    denied: tuple[Denied, ...] = ()
    failures: tuple[Failure, ...] = ()
    trips: tuple[Trip, ...] = ()
    platform: str | None = None
    name: str | None = None
    source: str | None = None
    aggregate: str | None = None
    #: Trips this console knows of for the key (`trips` keeps only the newest few).
    trip_total: int = 0
    #: Calls refused since the last trip, as this console saw them (`denied` keeps the last
    #: few: the table's column read `6+` for 70).
    denied_total: int = 0
    #: When the breaker last changed state; since when it is half-open (None unless it is);
    #: the last probe's result and when: ("ok" | "failed", wall).
    changed_wall: float | None = None
    half_open_since: float | None = None
    last_probe: tuple[str, float] | None = None
    #: Half-open, no view saying its probe is out, but a call was refused `probe_in_flight`
    #: since it went half-open: a probe was out by then (a remote engine's admission of its
    #: probe writes no event, so its view says so only when a line follows).
    probe_seen: float | None = None
    #: The breaker's state over time as its views said it, and its probes, resets and pages
    #: (`console.timeline`); oldest first.
    timeline: tuple[Point, ...] = ()
    marks: tuple[Mark, ...] = ()
    #: This card's own thresholds when sources run different policies (None: the board's).
    limits: Thresholds | None = None
    #: Trouble first (`RANK_*`): computed once, as sorting, layout and drawing all read it.
    rank: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank", _rank(self.view))

    @property
    def ident(self) -> tuple[str, str]:
        return (self.agent, self.view.key)

    @property
    def id(self) -> str:
        """What the source knows this breaker by (reset, audit, views)."""
        return self.view.key

    @property
    def key(self) -> str:
        """The breaker's key, as its engine writes it."""
        return self.name or self.view.key

    @property
    def state(self) -> State:
        return self.view.state

    @property
    def shared(self) -> bool:
        return len(self.view.agents) > 1

    @property
    def look(self) -> StateLook:
        """Its state as the console shows it: word, colour, glyph (`console.states`)."""
        return look_of(self.view.state, self.view.paused)

    @property
    def word(self) -> str:
        return self.look.word

    @property
    def probe_out_since(self) -> float | None:
        """Half-open with its probe out: since when (the view's word), else None."""
        return self.view.probe_since if self.view.state == State.HALF_OPEN else None

    def seconds_left(self, now: float) -> float | None:
        if self.view.state != State.OPEN or self.view.reopens_at is None:
            return None
        return max(0.0, self.view.reopens_at - now)

    def hold_left(self, now: float) -> float | None:
        """Held: the seconds until the hold runs out; None when not held."""
        if self.view.state != State.HELD or self.view.held_until is None:
            return None
        return max(0.0, self.view.held_until - now)

    def held_words(self, now: float) -> str:
        """`held by oncall:dana until 12:05:00 (04:12 left): vendor window`, as typed: the
        screens escape it."""
        view = self.view
        left = self.hold_left(now)
        until = f" until {clock_text(view.held_until)}" if view.held_until is not None else ""
        remaining = f" ({mmss(left)} left)" if left is not None else ""
        return f"held by {view.held_by or '?'}{until}{remaining}: {view.held_reason or '-'}"

    @property
    def shadow(self) -> bool:
        """The breaker decides in shadow: it refuses nothing, its refusals would-be ones."""
        return mode_of(self.view) == SHADOW

    def state_words(self, *also: str) -> str:
        """Its state in words, `also` after the word (the table's PAGED, a hold's time left),
        and SHADOW beside the state a shadow breaker would be in (words, so it reads without
        colour): cards, details, the table view and an export say it so."""
        word = " ".join((self.word, *also))
        return f"{word} · SHADOW" if self.shadow else word

    @property
    def shown_cause(self) -> str | None:
        """Its trip's cause as the table and an export say it (`upstream`); None when closed,
        or held with no trip under way (a hold is no trip: who holds it and why say it)."""
        view = self.view
        if view.state == State.CLOSED or (view.state == State.HELD and view.trip_cause is None):
            return None
        return cause_word(view.trip_cause)

    @property
    def auth_trip(self) -> bool:
        return self.view.state != State.CLOSED and self.view.trip_cause == "auth_failure"

    # What a filter reads (`console.filters`): `/`, saved views, the table.

    @property
    def filter_state(self) -> str:
        return self.look.css

    def filter_field(self, name: str) -> str | None:
        return {"agent": self.agent, "key": self.key, "platform": self.platform}.get(name)

    @property
    def filter_text(self) -> str:
        return (
            f"{self.agent} {self.key} {self.view.trip_cause or ''} {self.platform or ''} "
            f"{self.source or ''}"
        ).lower()

    @property
    def filter_flags(self) -> frozenset[str]:
        paged = self.view.paged and self.view.state != State.CLOSED
        return frozenset(("paged",) * paged + ("shared",) * self.shared)


def _rank(view: BreakerView) -> int:
    """Paged first; then the worse of its breaker's state and its word (an open breaker on a
    revoked credential reads PAUSED and sorts as open)."""
    if view.paged and view.state != State.CLOSED:
        return RANK_PAGED
    own = BY_NAME.get(view.state, CLOSED)
    return 1 + min(own.trouble, look_of(view.state, view.paused).trouble)
