"""What the console shows, as plain data: cards built from engine views plus recent history.

The UI reads `Card`s and never changes them. A `Board` is the one mutable thing: the source's
reader applies event batches and fresh views to it, and the UI asks it for cards. History that
no view carries (denied calls, trips and how they ended, the failures before a trip) is
collected from events here, bounded per key.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from breakerdeck.console.timeline import TRANSITION_STATE, Mark, Point, state_of
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy

#: How the board orders cards: trouble first, then by name.
SortKey = tuple[Any, ...]

#: Denied calls, failures and trips kept per key for the cards.
HISTORY = 6
#: Timeline points and marks kept per key: days of a flapping breaker's episodes.
TIMELINE = 256

WORDS = {"closed": "CLOSED", "open": "OPEN", "half_open": "HALF-OPEN"}

#: Trouble first: paged, open, half-open, paused, then closed.
RANK_PAGED, RANK_OPEN, RANK_HALF_OPEN, RANK_PAUSED, RANK_CLOSED = range(5)

_REASONS = {"circuit_breaker_open": "breaker open", "probe_in_flight": "probe in flight"}


def clock_text(wall: float | None) -> str:
    """Simulated wall time as HH:MM:SS (UTC), the way every time on screen is written."""
    if wall is None:
        return "--:--:--"
    return datetime.fromtimestamp(wall, UTC).strftime("%H:%M:%S")


def mmss(seconds: float) -> str:
    whole = max(0, int(seconds + 0.999))  # round up: "00:00" only once it is due
    minutes, secs = divmod(whole, 60)
    return f"{minutes:02d}:{secs:02d}"


def cause_word(cause: str | None) -> str:
    """`auth_failure` -> `auth`: the short form used on cards."""
    if cause is None:
        return "?"
    return cause.removesuffix("_failure").removesuffix("_output")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The policy's thresholds, enough to write a counter the way the design does."""

    kind: str  # "agent" | "tool"
    auth: int = 3
    upstream: int = 5
    failure: int = 3

    def counter(self, count: int) -> str:
        if self.kind == "agent":
            return f"{count} · auth {self.auth} / upstream {self.upstream}"
        return f"{count} · opens at {self.failure}"

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

    @property
    def text(self) -> str:
        return f"{clock_text(self.wall)} {self.platform} {_REASONS.get(self.reason, self.reason)}"


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
    def state(self) -> str:
        return self.view.state

    @property
    def shared(self) -> bool:
        return len(self.view.agents) > 1

    @property
    def word(self) -> str:
        if self.view.paused:
            return "PAUSED"
        return WORDS.get(self.view.state, self.view.state.upper())

    @property
    def probe_out_since(self) -> float | None:
        """Half-open with its probe out: since when (the view's word), else None."""
        return self.view.probe_since if self.view.state == "half_open" else None

    def seconds_left(self, now: float) -> float | None:
        if self.view.state != "open" or self.view.reopens_at is None:
            return None
        return max(0.0, self.view.reopens_at - now)

    @property
    def auth_trip(self) -> bool:
        return self.view.state != "closed" and self.view.trip_cause == "auth_failure"

    def matches(self, text: str) -> bool:
        """`/` filter: every word must be in the agent, key, state, cause or platform (case
        ignored; a state word matches that state exactly, so `open` is not `half-open`)."""
        words = text.lower().split()
        haystack = (
            f"{self.agent} {self.key} {self.view.trip_cause or ''} {self.platform or ''} "
            f"{self.source or ''}"
        )
        haystack = haystack.lower()
        state = self.word.lower()
        for word in words:
            if word in (state, state.replace("-", ""), state.replace("-", "_")):
                continue
            if word == "paged" and self.view.paged and self.view.state != "closed":
                continue
            if word == "shared" and self.shared:
                continue
            if word in haystack:
                continue
            return False
        return True


def _rank(view: BreakerView) -> int:
    if view.paged and view.state != "closed":
        return RANK_PAGED
    if view.state == "open":
        return RANK_OPEN
    if view.state == "half_open":
        return RANK_HALF_OPEN
    if view.paused:
        return RANK_PAUSED
    return RANK_CLOSED


#: What a counted upstream failure's fault says, in the hint's words.
_FAULT_WORDS = {
    "refused": "refused",
    "reset": "connection reset",
    "timeout": "timeouts",
    "slow": "timeouts",
    "expired": "timeouts",
    "tls": "TLS",
    "dns": "DNS",
    "vault_down": "vault down",
}


def fault_words(failures: Iterable[Failure]) -> str:
    """`refused`, `timeouts`, `502s`: what the counted failures were, at most two kinds (the
    hint said "502s/timeouts" for a refused connection)."""
    words: list[str] = []
    for failure in failures:
        fault = failure.fault
        word = _FAULT_WORDS.get(fault)
        if word is None and fault.startswith("http_"):
            word = f"{fault.removeprefix('http_')}s"
        word = word or "upstream failures"
        if word not in words:
            words.append(word)
    return " and ".join(words[:2]) if words else "502s/timeouts"


def hint(card: Card, *, keys: bool = False, fixable: bool = False, fixed: bool = False) -> str:
    """The plain hint at the cause, as the design words it; `keys` adds the keys that act;
    `fixed`: the credential behind an auth trip was fixed since, so reset is what is left."""
    view = card.view
    f_key = " (f)" if keys and fixable else ""
    r_key = " (r)" if keys else ""
    if view.paused:
        where = _on(card.platform)
        return f"credential revoked{where}: reconnect it, then mark it fixed{f_key}"
    if view.state == "closed":
        if view.count:
            last = next((f for f in card.failures if f.counted), None)
            if last is None:
                return "not tripped, failures counted"
            return f"last failure {cause_word(last.outcome)} on {last.platform}"
        return "healthy"
    cause = view.trip_cause or ""
    counted = [f for f in card.failures if f.counted]
    platforms = sorted({f.platform for f in counted[: max(view.count, 1)]}) or (
        [card.platform] if card.platform else []
    )
    where = ", ".join(platforms)
    if cause == "auth_failure" and fixed:
        return f"credential fixed{_on(where)}: reset it now{r_key}"
    if cause == "auth_failure":
        return f"reauth_failed{_on(where)}: reconnect that credential{f_key}, then reset{r_key}"
    if cause == "upstream_failure":
        down = where or "the platform"
        what = fault_words(counted[: max(view.count, 1)])
        return f"{down} or the path to it is down ({what}); wait for the probe"
    if cause == "malformed_output":
        backend = where or "the backend"
        return f"{backend} answers, but its output fails the tool's schema (bad deploy?)"
    if cause == "rate_limited":
        return f"{where or 'the backend'} is rate limiting hard (long Retry-After); wait it out"
    return f"tripped on {cause}"


def _on(where: str | None) -> str:
    return f" on {where}" if where else ""


def order_key(card: Card, kind: str, worst: int = RANK_CLOSED) -> SortKey:
    """A card's place, trouble first (closed ones with counted failures before healthy ones).
    Under `tool`, cards stay grouped by agent, groups ordered by their worst card: `worst` is
    the lowest rank among the agent's cards. Keys are unique (they end in agent and id)."""
    if kind == "agent":
        return (card.rank, -card.view.count, card.agent, card.key, card.id)
    return (worst, card.agent, card.rank, -card.view.count, card.key, card.id)


def sort_cards(cards: Iterable[Card], kind: str) -> list[Card]:
    cards = list(cards)
    worst: dict[str, int] = {}
    for card in cards:
        worst[card.agent] = min(worst.get(card.agent, RANK_CLOSED), card.rank)
    pairs = [(order_key(card, kind, worst[card.agent]), card) for card in cards]
    pairs.sort(key=_FIRST)  # keys are unique: cards are never compared
    return [card for _, card in pairs]


_FIRST = itemgetter(0)

_AGGREGATE_ORDER = ("PAUSED", "OPEN", "HALF-OPEN", "CLOSED")


def group_by_key(cards: list[Card], pooled: Callable[[str], bool] | None = None) -> list[Card]:
    """Several sources: a key's cards together, where its most troubled one sorts, and its
    first card carries the line "ava: open on 3 of 5 · closed on 2".

    Replicas whose breakers are one, through a shared store that answers (`pooled`, by id),
    show the key once per state: the first such card stands for the others ("replica-1 +2"),
    so three gateway replicas of an open agent take one card, not three. A replica that lost
    its store decides alone and keeps its own card, as does any that disagrees for a moment.
    """
    groups: dict[tuple[str, str], list[Card]] = {}
    for card in cards:
        groups.setdefault((card.agent, card.key), []).append(card)
    out: list[Card] = []
    for group in groups.values():  # dicts keep insertion order: the first card's place
        if len(group) == 1:
            out.extend(group)
            continue
        shown: list[Card] = []
        also: dict[str, tuple[int, int]] = {}  # state word -> (its card's place, more)
        for card in group:
            if pooled is not None and pooled(card.id):
                place, more = also.get(card.word, (len(shown), -1))
                also[card.word] = (place, more + 1)
                if more >= 0:
                    continue
            shown.append(card)
        for place, more in also.values():
            if more:
                shown[place] = replace(shown[place], source=f"{shown[place].source} +{more}")
        shown[0] = replace(shown[0], aggregate=aggregate_line(group))
        out.extend(shown)
    return out


def aggregate_line(group: list[Card]) -> str:
    words: dict[str, int] = {}
    for card in group:
        words[card.word] = words.get(card.word, 0) + 1
    total = len(group)
    parts = [
        f"{word.lower()} on {words[word]} of {total}" for word in _AGGREGATE_ORDER if word in words
    ]
    return f"{group[0].key}: " + " · ".join(parts)


_SUMMARY_WORDS = ("OPEN", "HALF-OPEN", "PAUSED", "CLOSED")

#: Rows the event log keeps, newest first (transitions, probes, resets, pages).
LOG_ROWS = 1000

#: An event's word in the log (distinct words: it reads without colour) and the state after.
_LOG_KINDS = {
    ev.TRIPPED: ("TRIP", "open"),
    ev.HALF_OPEN: ("HALF", "half_open"),
    ev.REOPENED: ("REOPEN", "open"),
    ev.RECOVERED: ("RECOVER", "closed"),
    ev.RESET: ("RESET", "closed"),
    ev.PAGE: ("PAGE", "open"),
    ev.RESTORED: ("RESTORE", None),
    ev.CREDENTIAL_REVOKED: ("REVOKED", "paused"),
    ev.CREDENTIAL_RESTORED: ("FIXED", None),
}


@dataclass(frozen=True, slots=True)
class LogRow:
    """One line of the event log: a transition, a probe going out or coming back, a reset
    (with who), a page, a credential revoked or marked fixed."""

    seq: int
    wall: float
    ident: str  # the source's id for the breaker
    name: str  # as its card names it: the agent, or under `tool` the key
    kind: str  # TRIP, HALF, PROBE, REOPEN, RECOVER, RESET, PAGE, RESTORE, REVOKED, FIXED
    text: str
    state: str | None  # the state it led to (what a state word in the filter matches)
    haystack: str = ""  # what the filter's other words are looked for in

    def matches(self, text: str) -> bool:
        """The cards' filter: every word in the name, key, platform, cause, actor or kind, or
        the state it led to (`open` is not `half-open`)."""
        state = _STATE_WORDS.get(self.state or "", "")
        for word in text.lower().split():
            if word in (state, state.replace("-", ""), state.replace("-", "_")):
                continue
            if word in self.haystack:
                continue
            return False
        return True


_CALL_KINDS = frozenset({ev.CALL_COMPLETED, ev.CALL_FAILED})

_STATE_WORDS = {"open": "open", "half_open": "half-open", "closed": "closed", "paused": "paused"}


def log_row(
    event: Event, name: str, source: str | None, cause: Failure | None = None
) -> LogRow | None:
    """The event log's line for an event, or None for one it does not show. `cause`: the
    counted failure a trip or a reopen came right after (its platform and fault)."""
    f = event.fields
    kind = event.type
    if kind in (ev.CALL_COMPLETED, ev.CALL_FAILED):
        if not f.get("probe") or f.get("counted") or f.get("outcome") in (None, "success"):
            return None  # a failed probe's REOPEN line says it, a good one's RECOVER
        text = f"probe back uncounted ({f.get('fault')}): the next call is the probe"
        word, state = "PROBE", None
    elif kind in _LOG_KINDS:
        word, state = _LOG_KINDS[kind]
        text = _log_text(event, cause)
    else:
        return None
    where = f" on {source}" if source else ""
    haystack = " ".join(
        str(part)
        for part in (
            name,
            event.key,
            event.agent,
            f.get("platform"),
            f.get("failure_class"),
            f.get("actor"),
            word,
            source,
        )
        if part
    ).lower()
    return LogRow(event.seq, event.wall, event.key, name, word, text + where, state, haystack)


def probe_row(view: BreakerView, name: str, source: str | None) -> LogRow:
    """The log's line for a probe the engine's view says went out (no event says it)."""
    since = view.probe_since or 0.0
    where = f" on {source}" if source else ""
    haystack = f"{name} {view.key} probe {source or ''}".lower()
    return LogRow(
        view.seq, since, view.key, name, "PROBE", f"a probe went out{where}", None, haystack
    )


def _log_text(event: Event, cause: Failure | None) -> str:
    """The audit table's words, and for a trip or a failed probe what the failure was."""
    f = event.fields
    where = f" ({cause.platform} {cause.fault})" if cause is not None else ""
    if event.type == ev.TRIPPED:
        cooldown = f.get("cooldown_seconds") or 0
        counted = f"{cause_word(f.get('failure_class'))}×{f.get('count')}"
        return f"{counted}{where}, open {cooldown:g}s"
    if event.type == ev.REOPENED:
        return f"probe failed{where}, open {f.get('cooldown_seconds') or 0:g}s"
    if event.type == ev.CREDENTIAL_REVOKED:
        return "credential revoked: calls on it are refused"
    return describe(event)


_SHOWN_FIELDS = (
    "platform",
    "outcome",
    "fault",
    "agent_status",
    "refresh",
    "reason",
    "failure_class",
    "count",
    "cooldown_seconds",
    "retry_after_seconds",
    "actor",
    "state",
)


def describe(event: Event) -> str:
    """An event's own fields in a few words: the audit table's details, the event log's."""
    f = event.fields
    if event.type in (ev.CALL_FAILED, ev.CALL_COMPLETED):
        parts = [f.get("platform"), f.get("outcome"), f"fault {f.get('fault')}"]
        if f.get("agent_status") not in (None, f.get("outcome")):
            parts.append(f"→ {f['agent_status']}")
        if f.get("refresh"):
            parts.append(f"refresh {f['refresh']}")
        if f.get("probe"):
            parts.append("probe")
        if not f.get("counted"):
            parts.append("not counted")
        return " ".join(str(p) for p in parts if p)
    if event.type == ev.CALL_DENIED:
        retry = round(f.get("retry_after_seconds") or 0)
        return f"{f.get('platform')} {f.get('reason')} retry in {retry}s"
    if event.type == ev.TRIPPED:
        return f"{f.get('failure_class')} ×{f.get('count')}, open {f.get('cooldown_seconds'):g}s"
    if event.type == ev.REOPENED:
        return f"probe failed, open {f.get('cooldown_seconds'):g}s"
    if event.type == ev.PAGE:
        return "open through two cooldowns: on-call paged"
    if event.type == ev.HALF_OPEN:
        return "cooldown over: the next call is the probe"
    if event.type == ev.RECOVERED:
        return "a call succeeded: closed"
    if event.type == ev.RESET:
        return f"by {f.get('actor')}: {f.get('reason')}"
    if event.type == ev.CREDENTIAL_RESTORED:
        return f"marked fixed by {f.get('actor')}"
    shown = [f"{k}={f[k]}" for k in _SHOWN_FIELDS if k in f and f[k] is not None]
    return " ".join(shown)




@dataclass(frozen=True, slots=True)
class Summary:
    paged: int = 0
    open: int = 0
    half_open: int = 0
    paused: int = 0
    closed: int = 0
    paged_keys: tuple[str, ...] = ()


@dataclass(slots=True)
class _History:
    denied: deque[Denied] = field(default_factory=lambda: deque(maxlen=HISTORY))
    failures: deque[Failure] = field(default_factory=lambda: deque(maxlen=2 * HISTORY))
    trips: deque[Trip] = field(default_factory=lambda: deque(maxlen=HISTORY))
    platform: str | None = None
    trip_total: int = 0
    changed: float | None = None
    half_open: float | None = None
    last_probe: tuple[str, float] | None = None
    probe_seen: float | None = None
    timeline: tuple[Point, ...] = ()
    marks: tuple[Mark, ...] = ()

    def point(self, wall: float, state: str) -> None:
        """The state from `wall` on, if it differs from the last one known."""
        if not self.timeline or self.timeline[-1][1] != state:
            self.timeline = (*self.timeline[-(TIMELINE - 1) :], (wall, state))

    def mark(self, wall: float, kind: str) -> None:
        self.marks = (*self.marks[-(TIMELINE - 1) :], (wall, kind))


class Board:
    """Views and history by key; cards on demand. Only the source reader writes to it."""

    def __init__(
        self,
        thresholds: Thresholds,
        describe: Callable[[str], tuple[str, str | None]] | None = None,
        *,
        origin: Callable[[str], object] | None = None,
        limits_of: Callable[[str], Thresholds | None] | None = None,
        pooled: Callable[[str], bool] | None = None,
    ) -> None:
        self.thresholds = thresholds
        #: id -> (key, source label): None for one source, whose ids are the keys.
        self.describe = describe or _plain
        #: id -> the engine it came from, whose seqs are its own. Not the label: two replicas
        #: served under one name would share a counter and drop each other's events.
        self.origin = origin or (lambda ident: None)
        #: id -> its engine's thresholds when sources run different policies.
        self.limits_of = limits_of or (lambda ident: None)
        #: id -> whether its engine shares the breaker with the others through an answering
        #: store (gateway replicas): a key's such cards in one state are shown as one.
        self.pooled = pooled
        self.clear()

    def clear(self) -> None:
        """Forget every view and all history (a replay moved back: it is read again)."""
        self._views: dict[str, BreakerView] = {}
        self._history: dict[str, _History] = {}
        #: The last seq folded in, per source (seqs are each engine's own).
        self._seen: dict[object, int] = {}
        self.version = getattr(self, "version", 0) + 1  # a cleared board reads as changed
        # The order is kept between changes: a repaint under a flood re-places only the ids
        # that changed (bisect out, bisect in) instead of sorting every card again.
        self._placed: dict[str, list[tuple[SortKey, Card]]] = {}  # id -> its cards, their keys
        self._keys: list[SortKey] = []  # every placed key, sorted
        self._ordered: list[Card] = []  # the card of each key, in the same order
        self._dirty: set[str] = set()
        self._everything_dirty = True
        self._sourced = False  # cards say which source: a key's cards are grouped
        # Under `tool`, per agent: how many of its cards hold each rank (its worst is its
        # group's place) and the ids of its cards (re-placed when that worst changes).
        self._ranks: dict[str, list[int]] = {}
        self._ids_of: dict[str, set[str]] = {}
        self._cards: list[Card] | None = None
        # The header's counts, kept as views come and go rather than recounted.
        self._counts = dict.fromkeys(_SUMMARY_WORDS, 0)
        self._paged: set[str] = set()
        self._half_open: set[str] = set()
        self._summary: tuple[int, Summary] | None = None
        #: The event log, newest first.
        self.log: deque[LogRow] = deque(maxlen=LOG_ROWS)
        self.log_version = getattr(self, "log_version", 0) + 1

    # -- writing (the source reader) -------------------------------------------------------

    def load(self, views: Iterable[BreakerView], at: float | None = None) -> None:
        """A full snapshot: replaces every view (after a start or a missed batch). `at`: when
        it was taken; a timeline starts there (where no history placed it already)."""
        self._views = {view.key: view for view in views}
        if at is not None:
            for view in self._views.values():
                h = self._history.setdefault(view.key, _History())
                h.point(at, state_of(view.state, view.paused))
        self._counts = dict.fromkeys(_SUMMARY_WORDS, 0)
        self._paged.clear()
        self._half_open.clear()
        for view in self._views.values():
            self._count(view, 1)
        self._everything_dirty = True
        self._changed()

    def update(self, views: Iterable[BreakerView]) -> None:
        """Views carried by events: one older than the view held (an event a snapshot already
        covered) is dropped, so a card never steps back."""
        for view in views:
            old = self._views.get(view.key)
            if old is not None and view.seq and view.seq < old.seq:
                continue
            if old is not None:
                self._count(old, -1)
                if view.probe_since is not None and view.probe_since != old.probe_since:
                    self._log(probe_row(view, *self._log_name(view.key, view.agents)))
            self._count(view, 1)
            self._views[view.key] = view
            self._dirty.add(view.key)
        self._changed()

    def _log_event(self, event: Event) -> None:
        view = event.view or self._views.get(event.key)
        agents = view.agents if view is not None else ()
        failures = self._history[event.key].failures
        cause_seq = event.fields.get("cause_seq")
        cause = failures[0] if failures and failures[0].seq == cause_seq else None
        self._log(log_row(event, *self._log_name(event.key, agents, event.agent), cause))

    def _log(self, row: LogRow | None) -> None:
        if row is not None:
            self.log.appendleft(row)
            self.log_version += 1

    def _log_name(
        self, ident: str, agents: Iterable[str] = (), agent: str | None = None
    ) -> tuple[str, str | None]:
        """How the log names a breaker (its card's name) and its source."""
        key, source = self.describe(ident)
        if self.thresholds.kind == "agent":
            return key, source
        who = agent or next(iter(agents), None)
        return (f"{who} · {key}" if who else key), source

    def log_rows(self, text: str = "") -> list[LogRow]:
        """The event log, newest first; with `text`, the rows the cards' filter keeps."""
        rows = list(self.log)
        return [row for row in rows if row.matches(text)] if text else rows

    def _count(self, view: BreakerView, delta: int) -> None:
        self._counts["PAUSED" if view.paused else WORDS.get(view.state, "CLOSED")] += delta
        if delta > 0 and view.paged and view.state != "closed":
            self._paged.add(view.key)
        elif delta < 0:
            self._paged.discard(view.key)
        if delta > 0 and view.state == "half_open":
            self._half_open.add(view.key)
        elif delta < 0:
            self._half_open.discard(view.key)

    def half_open(self) -> list[str]:
        """The ids of half-open breakers: whether their probe is out changes without a line."""
        return sorted(self._half_open)

    def probes_changed(self, views: Iterable[BreakerView]) -> list[BreakerView]:
        """Of views read afresh, those whose probe went out or came back since the view held."""
        held = self._views
        return [
            view
            for view in views
            if view.key in held and held[view.key].probe_since != view.probe_since
        ]

    def apply(self, events: Iterable[Event]) -> set[str]:
        """Fold events into the history; returns the keys they touched (whose views to refresh)."""
        touched: set[str] = set()
        seen = self._seen
        for event in events:
            source = self.origin(event.key)
            last = seen.get(source, 0)
            if event.seq and event.seq <= last:
                continue
            seen[source] = max(last, event.seq)
            touched.add(event.key)
            self._dirty.add(event.key)
            self._fold(event)
            if event.type in _LOG_KINDS or (
                event.type in _CALL_KINDS and event.fields.get("probe")
            ):
                self._log_event(event)
        if touched:
            self._changed()
        return touched

    def _fold(self, event: Event) -> None:
        h = self._history.setdefault(event.key, _History())
        f = event.fields
        kind = event.type
        if event.view is not None:
            h.point(event.wall, state_of(event.view.state, event.view.paused))
        if kind in (ev.CALL_COMPLETED, ev.CALL_FAILED):
            h.platform = f.get("platform") or h.platform
            if f.get("probe"):
                h.probe_seen = None  # the probe is back (an uncounted one leaves it half-open)
            if f.get("outcome") not in (None, "success"):
                h.failures.appendleft(
                    Failure(
                        event.seq,
                        event.wall,
                        f.get("platform") or "?",
                        f.get("outcome") or "?",
                        f.get("fault") or "?",
                        f.get("agent_status"),
                        event.agent,
                        bool(f.get("counted")),
                    )
                )
        elif kind == ev.CALL_DENIED:
            h.platform = f.get("platform") or h.platform
            if f.get("reason") == "probe_in_flight" and h.half_open is not None:
                h.probe_seen = h.probe_seen or event.wall
            h.denied.appendleft(
                Denied(event.wall, f.get("platform") or "?", f.get("reason") or "?", event.agent)
            )
        else:
            self._fold_transition(h, event)

    def _fold_transition(self, h: _History, event: Event) -> None:
        f = event.fields
        kind = event.type
        if kind in ev.TRANSITIONS and kind != ev.PAGE:
            h.changed = event.wall
        if event.view is None and kind in TRANSITION_STATE:  # read back from the audit log
            h.point(event.wall, TRANSITION_STATE[kind])
        if kind == ev.REOPENED:
            h.mark(event.wall, "probe_failed")
        elif kind == ev.RECOVERED and h.half_open is not None:
            h.mark(event.wall, "probe_ok")
        elif kind == ev.RESET:
            h.mark(event.wall, "reset")
        elif kind == ev.PAGE:
            h.mark(event.wall, "page")
        if kind == ev.HALF_OPEN:
            h.half_open = event.wall
        elif kind in (ev.REOPENED, ev.RECOVERED):
            result = "failed" if kind == ev.REOPENED else "ok"
            if h.half_open is not None or kind == ev.REOPENED:
                h.last_probe = (result, event.wall)
            h.half_open = None
        elif kind in (ev.RESET, ev.TRIPPED):
            h.half_open = None
            h.last_probe = None
        if kind in ev.TRANSITIONS and kind != ev.PAGE:
            h.probe_seen = None  # a new episode, or the probe's outcome
        if kind == ev.TRIPPED:
            h.trip_total += 1
            h.trips.appendleft(
                Trip(event.seq, event.wall, f.get("failure_class") or "?", f.get("count") or 0)
            )
        elif kind == ev.RESTORED and f.get("state") in ("open", "half_open"):
            view = self._views.get(event.key)
            cause = view.trip_cause if view and view.trip_cause else "restored"
            h.trip_total += 1
            h.trips.appendleft(Trip(event.seq, event.wall, cause, f.get("count") or 0))
        elif kind in (ev.REOPENED, ev.PAGE, ev.RECOVERED, ev.RESET):
            if not h.trips or h.trips[0].ended is not None:
                return
            trip = h.trips[0]
            if kind == ev.REOPENED:
                trip = replace(trip, reopened=trip.reopened + 1)
            elif kind == ev.PAGE:
                trip = replace(trip, paged=True)
            elif kind == ev.RECOVERED:
                trip = replace(trip, ended="recovered", ended_wall=event.wall)
            else:
                trip = replace(
                    trip,
                    ended="reset",
                    ended_wall=event.wall,
                    actor=f.get("actor"),
                    reason=f.get("reason"),
                )
            h.trips[0] = trip

    @property
    def seen_seq(self) -> int:
        """The last seq folded in (one source; with several, the highest of them)."""
        return max(self._seen.values(), default=0)

    def forget(self, source: object) -> None:
        """That source's engine started over (its seqs went back): take its events afresh."""
        self._seen.pop(source, None)

    def _changed(self) -> None:
        self._cards = None
        self.version += 1

    # -- reading (the UI) ------------------------------------------------------------------

    def cards(self) -> list[Card]:
        """Every card, sorted trouble first (a new list only after a change)."""
        if self._cards is None:
            self._place()
            cards = list(self._ordered)
            self._cards = group_by_key(cards, self.pooled) if self._sourced else cards
        return self._cards

    def _place(self) -> None:
        """Bring the order up to date with what changed since it was last read."""
        dirty = self._dirty
        dirty.intersection_update(self._views)  # events may name a key no view came for yet
        if self._everything_dirty or len(dirty) * 8 > len(self._views):
            self._place_all()
        elif self.thresholds.kind == "tool":
            self._place_tool(dirty)
        else:
            for ident in dirty:
                self._replace(ident, self._pairs(self._build(self._views[ident])))
        dirty.clear()
        self._everything_dirty = False

    def _place_all(self) -> None:
        placed = {} if self._everything_dirty else self._placed
        built: dict[str, list[Card]] = {}
        for ident, view in self._views.items():
            kept = None if ident in self._dirty else placed.get(ident)
            built[ident] = [card for _, card in kept] if kept else self._build(view)
        self._ranks.clear()
        self._ids_of.clear()
        if self.thresholds.kind == "tool":
            for ident, cards in built.items():
                self._hold(ident, cards, 1)
        self._placed = {ident: self._pairs(cards) for ident, cards in built.items()}
        pairs = sorted((pair for kept in self._placed.values() for pair in kept), key=_FIRST)
        self._keys = [key for key, _ in pairs]
        self._ordered = [card for _, card in pairs]
        self._sourced = any(card.source is not None for card in self._ordered)

    def _place_tool(self, dirty: set[str]) -> None:
        """Under `tool` a card's place also depends on its agent's worst card: when that
        changes, the agent's whole group moves."""
        worst_before: dict[str, int] = {}
        fresh: dict[str, list[Card]] = {}
        for ident in dirty:
            fresh[ident] = self._build(self._views[ident])
            for card in (*fresh[ident], *(card for _, card in self._placed.get(ident, ()))):
                if card.agent not in worst_before:
                    worst_before[card.agent] = self._worst(card.agent)
        for ident, cards in fresh.items():
            self._hold(ident, [card for _, card in self._placed.get(ident, ())], -1)
            self._hold(ident, cards, 1)
        moved = set(fresh)
        for agent, before in worst_before.items():
            if self._worst(agent) != before:
                moved |= self._ids_of.get(agent, set())
        for ident in moved:
            cards = fresh.get(ident) or [card for _, card in self._placed[ident]]
            self._replace(ident, self._pairs(cards))

    def _hold(self, ident: str, cards: list[Card], delta: int) -> None:
        for card in cards:
            self._ranks.setdefault(card.agent, [0] * (RANK_CLOSED + 1))[card.rank] += delta
            ids = self._ids_of.setdefault(card.agent, set())
            if delta > 0:
                ids.add(ident)
            else:
                ids.discard(ident)

    def _worst(self, agent: str) -> int:
        counts = self._ranks.get(agent, ())
        return next((rank for rank, n in enumerate(counts) if n), RANK_CLOSED)

    def _pairs(self, cards: list[Card]) -> list[tuple[SortKey, Card]]:
        kind = self.thresholds.kind
        if kind == "tool":
            return [(order_key(card, kind, self._worst(card.agent)), card) for card in cards]
        return [(order_key(card, kind), card) for card in cards]

    def _replace(self, ident: str, pairs: list[tuple[SortKey, Card]]) -> None:
        """Re-place one id's cards: in place when their keys did not change (most events)."""
        keys, ordered = self._keys, self._ordered
        old = self._placed.get(ident, [])
        self._placed[ident] = pairs
        if [key for key, _ in old] == [key for key, _ in pairs]:
            for key, card in pairs:
                ordered[bisect_left(keys, key)] = card
            return
        for key, _ in old:
            at = bisect_left(keys, key)
            del keys[at], ordered[at]
        for key, card in pairs:
            at = bisect_right(keys, key)
            keys.insert(at, key)
            ordered.insert(at, card)
            self._sourced = self._sourced or card.source is not None

    def _build(self, view: BreakerView) -> list[Card]:
        h = self._history.get(view.key) or _History()
        key, source = self.describe(view.key)
        agents = view.agents if self.thresholds.kind == "tool" and view.agents else (key,)
        platform = h.platform or _platform_of(key, self.thresholds.kind)
        if view.state != "closed":  # the platform behind the trip, not the last call's
            counted = [f.platform for f in h.failures if f.counted]
            platform = counted[0] if counted else platform
        denied, failures, trips = tuple(h.denied), tuple(h.failures), tuple(h.trips)
        name = key if key != view.key else None
        limits = self.limits_of(view.key)
        return [
            Card(
                agent,
                view,
                denied,
                failures,
                trips,
                platform,
                name,
                source,
                trip_total=h.trip_total,
                changed_wall=h.changed,
                half_open_since=_half_open_since(view, h) if view.state == "half_open" else None,
                last_probe=h.last_probe,
                probe_seen=h.probe_seen if view.state == "half_open" else None,
                timeline=h.timeline,
                marks=h.marks,
                limits=limits,
            )
            for agent in agents
        ]

    def card(self, ident: tuple[str, str]) -> Card | None:
        """The card for (agent, id) as it is now (without its key's aggregate line)."""
        return next((c for c in self.cards_of([ident[1]]) if c.agent == ident[0]), None)

    def cards_of(self, ids: Iterable[str]) -> list[Card]:
        """The cards of these ids, in the board's order."""
        self.cards()
        pairs = [pair for ident in ids for pair in self._placed.get(ident, ())]
        return [card for _, card in sorted(pairs, key=_FIRST)]

    def summary(self) -> Summary:
        """Counts by the word on the card; paged ones are also counted under their state."""
        if self._summary is not None and self._summary[0] == self.version:
            return self._summary[1]
        counts, paged = self._counts, self._paged
        if self.pooled is not None:
            self.cards()  # placing the cards tells whether they come from several sources
            if self._sourced:
                counts, paged = self._pooled_counts(self.pooled)
        summary = Summary(
            paged=len(paged),
            open=counts["OPEN"],
            half_open=counts["HALF-OPEN"],
            paused=counts["PAUSED"],
            closed=counts["CLOSED"],
            # Keys as the cards name them (an id of a watched source carries its source).
            paged_keys=tuple(sorted({self.describe(ident)[0] for ident in paged})),
        )
        self._summary = (self.version, summary)
        return summary

    def _pooled_counts(self, pooled: Callable[[str], bool]) -> tuple[dict[str, int], set[str]]:
        """The counts as the cards show them: replicas sharing a breaker count it once per
        state (three replicas of one open agent: OPEN 1, as its one card), others once each.
        Counted afresh, once per change: only a console watching several engines pays it."""
        counts = dict.fromkeys(_SUMMARY_WORDS, 0)
        paged: set[str] = set()
        seen: set[tuple[str, str]] = set()
        for ident, view in self._views.items():
            word = "PAUSED" if view.paused else WORDS.get(view.state, "CLOSED")
            if pooled(ident):
                one = (self.describe(ident)[0], word)
                if one in seen:
                    continue
                seen.add(one)
            counts[word] += 1
            if view.paged and view.state != "closed":
                paged.add(ident)
        return counts, paged

    def __len__(self) -> int:
        return len(self._views)


def _half_open_since(view: BreakerView, h: _History) -> float | None:
    """When the breaker went half-open: its `half_open` line, else (a snapshot of one whose
    line this console never saw) when its cooldown ran out."""
    if h.half_open is not None:
        return h.half_open
    if view.opened_at is not None:
        return view.opened_at + view.cooldown
    return None


def _plain(ident: str) -> tuple[str, str | None]:
    return ident, None


def _platform_of(key: str, kind: str) -> str | None:
    if kind == "tool" and "@" in key:
        return key.split("@", 1)[0]
    return None
