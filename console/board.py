"""The board: the one mutable thing behind the cards. The source's reader applies event
batches and fresh views to it, and the UI asks it for cards, counts and the event log."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from breakerdeck.console.card import RANK_CLOSED, Card, Thresholds
from breakerdeck.console.filters import EVERYTHING, Filter
from breakerdeck.console.history import History
from breakerdeck.console.log_rows import CALL_KINDS, LOG_KINDS, LOG_ROWS, LogRow, log_row, probe_row
from breakerdeck.console.ordering import BY_KEY, SortKey, group_by_key, order_key
from breakerdeck.console.refusals import Refusals
from breakerdeck.console.states import BY_TROUBLE, StateLook, look_of
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.state import State

_SUMMARY_WORDS = tuple(look.word for look in BY_TROUBLE)

#: Audit rows read at start so cards show recent denials and trips at once.
SEED_EVENTS = 2000


@dataclass(frozen=True, slots=True)
class Summary:
    paged: int = 0
    #: Breakers by the word on their card, most troubled first (as the summary bar reads).
    counts: tuple[tuple[StateLook, int], ...] = ()
    paged_keys: tuple[str, ...] = ()

    def count(self, word: str) -> int:
        return next((n for look, n in self.counts if look.word == word), 0)


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
        self._history: dict[str, History] = {}
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
        #: Refused calls in the last minute (the pulse's column).
        self.refusals = Refusals()
        self.log_version = getattr(self, "log_version", 0) + 1

    # -- writing (the source reader) -------------------------------------------------------

    def load(self, views: Iterable[BreakerView], at: float | None = None) -> None:
        """A full snapshot: replaces every view (after a start or a missed batch). `at`: when
        it was taken; a timeline starts there (where no history placed it already)."""
        self._views = {view.key: view for view in views}
        if at is not None:
            for view in self._views.values():
                h = self._history.setdefault(view.key, History())
                h.point(at, look_of(view.state, view.paused).name)
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
                    name, source = self._log_name(view.key, view.agents)
                    self._log(probe_row(view, name, source, self.describe(view.key)[0]))
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
        name, source = self._log_name(event.key, agents, event.agent)
        self._log(log_row(event, name, source, cause, self.describe(event.key)[0]))

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

    def log_rows(self, kept: Filter = EVERYTHING) -> list[LogRow]:
        """The event log, newest first: the rows the cards' filter keeps."""
        return kept.keep(self.log)

    def _count(self, view: BreakerView, delta: int) -> None:
        self._counts[look_of(view.state, view.paused).word] += delta
        if delta > 0 and view.paged and view.state != State.CLOSED:
            self._paged.add(view.key)
        elif delta < 0:
            self._paged.discard(view.key)
        if delta > 0 and view.state == State.HALF_OPEN:
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
            self._history.setdefault(event.key, History()).fold(event, self._views.get(event.key))
            if event.type == ev.CALL_DENIED:
                self.refusals.add(event.wall)
            if event.type in LOG_KINDS or (event.type in CALL_KINDS and event.fields.get("probe")):
                self._log_event(event)
        if touched:
            self._changed()
        return touched

    @property
    def seen_seq(self) -> int:
        """The last seq folded in (one source; with several, the highest of them)."""
        return max(self._seen.values(), default=0)

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
        pairs = sorted((pair for kept in self._placed.values() for pair in kept), key=BY_KEY)
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
        h = self._history.get(view.key) or History()
        key, source = self.describe(view.key)
        agents = view.agents if self.thresholds.kind == "tool" and view.agents else (key,)
        platform = h.platform or _platform_of(key, self.thresholds.kind)
        if view.state != State.CLOSED:  # the platform behind the trip, not the last call's
            counted = [f.platform for f in h.failures if f.counted]
            platform = counted[0] if counted else platform
        denied, failures, trips = tuple(h.denied), tuple(h.failures), tuple(h.trips)
        name = key if key != view.key else None
        limits = self.limits_of(view.key)
        half_open = view.state == State.HALF_OPEN
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
                denied_total=h.denied_total,
                changed_wall=h.changed,
                half_open_since=_half_open_since(view, h) if half_open else None,
                last_probe=h.last_probe,
                probe_seen=h.probe_seen if half_open else None,
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
        return [card for _, card in sorted(pairs, key=BY_KEY)]

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
            counts=tuple((look, counts[look.word]) for look in BY_TROUBLE),
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
            word = look_of(view.state, view.paused).word
            if pooled(ident):
                one = (self.describe(ident)[0], word)
                if one in seen:
                    continue
                seen.add(one)
            counts[word] += 1
            if view.paged and view.state != State.CLOSED:
                paged.add(ident)
        return counts, paged

    def views(self) -> Iterable[BreakerView]:
        """Every breaker's view as last known (what the pulse counts modes over)."""
        return self._views.values()

    def __len__(self) -> int:
        return len(self._views)


def _half_open_since(view: BreakerView, h: History) -> float | None:
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
