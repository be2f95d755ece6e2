"""`breakerdeck watch`: the console attached to one or more remote engines over the live feed.

`RemoteSource` implements `console.source.Source` over one `FeedClient` per URL (replicas of a
service). One reader task per URL only reads its websocket and queues what arrived (bounded:
a console that cannot keep up makes that engine resync it with a snapshot); `updates()`, which
the app's one exclusive source worker iterates, fans them in and applies them in order:

- a snapshot replaces everything known about that source and clears its staleness;
- an event that changed its breaker carries the breaker as of that event (the engine's own
  view, taken under the key's lock: protocol revision 2), which replaces that source's view of
  the key; events are passed on as batches; duplicates cannot happen (`FeedClient` drops what
  a snapshot already covers). The console keeps no breaker of its own: against a server of
  revision 1 (no views on events) cards change only at snapshots;
- a lost connection marks that source's cards stale from that moment; `FeedClient` reconnects
  with backoff and the next snapshot clears it;
- a replica's snapshot says whether its shared store answers (protocol revision 3; a loss or a
  return comes as a fresh snapshot): the header says which replica lost it, and a toast says
  so and why when it changes.

Times: every engine time is converted to this machine's clock with the offset measured at each
snapshot (engine `at` against local time), so countdowns and "stale since" from several engines
read on one clock. A sped-up simulation (`serve --speed 5`) runs its own seconds: its countdowns
are right at each snapshot and drift between them.

Ids: with one source a breaker's id is its key (the console looks exactly as in demo mode); with
several, `"<index>\\x1f<key>"`, and each card says which source it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from breakerdeck.console.card import Thresholds
from breakerdeck.console.source import Fleet, Notice, SharedStores, Source, Writes
from breakerdeck.console.words import clock_text
from breakerdeck.engine import events as ev
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.bus import Missed
from breakerdeck.engine.feed.client import (
    ConnectionLost,
    FeedClient,
    FeedError,
    fetch_snapshot,
)
from breakerdeck.engine.state import State

log = logging.getLogger(__name__)

#: Events kept per breaker for its detail screen (the full log lives on the engine).
RECEIVED_PER_KEY = 200
#: Messages read off the websockets but not yet applied; a reader waits when it is full.
QUEUE_LIMIT = 1000
_SEP = "\x1f"


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass(slots=True)
class RemoteFeed:
    """One watched engine: its client, what it reported, and whether that is still live."""

    index: int
    url: str
    client: FeedClient
    label: str
    role: str | None = None
    policy: str | None = None
    thresholds: dict[str, int] = field(default_factory=dict)
    #: Engine key -> view (whose `key` is the console's id for it).
    views: dict[str, BreakerView] = field(default_factory=dict)
    #: Local wall clock minus the engine's, measured at the last snapshot.
    offset: float = 0.0
    epoch: float = 0.0
    connected_at: float | None = None
    stale_since: float | None = None
    problem: str | None = None
    ended: bool = False  # refused token or another protocol version: no more retries
    #: Engine key -> events received since connecting, newest first (audit form).
    received: dict[str, deque[Event]] = field(default_factory=dict)
    last_seq: int = 0
    #: Engine key -> when (engine clock) the open episode the card's history knows began.
    trip_marks: dict[str, float] = field(default_factory=dict)
    #: Engine key -> opened_at (engine clock) of the breakers the last snapshot shows open.
    opened: dict[str, float] = field(default_factory=dict)
    #: Added to this engine's seqs so they keep growing if it starts over without its state.
    seq_base: int = 0
    #: Engine seconds per local second (`serve --speed 5`: 5), measured from the events'
    #: times; 1 until two measures in a row agree on another.
    rate: float = 1.0
    #: Local time of the last snapshot.
    synced_at: float = 0.0
    #: The last measure's (local time, engine time on the local clock); None: the snapshot's.
    rate_mark: tuple[float, float] | None = None
    #: The last measure's engine seconds per local second, to be confirmed by the next.
    slope: float | None = None
    #: The engine's shared store as its last snapshot said: "ok", "lost" (and why), or None.
    shared_store: p.SharedStoreHealth | None = None
    store_reason: str | None = None


class RemoteSource(Source, Writes, SharedStores, Fleet):
    """Breakers of one or more remote engines, read over their live feeds."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        tokens: Sequence[str] = (),
        token_files: Sequence[str | Path] = (),
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
        open_timeout: float = 10.0,
    ) -> None:
        if not urls:
            raise ValueError("RemoteSource needs at least one URL")
        self.feeds: list[RemoteFeed] = []
        for index, url in enumerate(urls):
            token = _pick(tokens, index, len(urls))
            token_file = _pick(token_files, index, len(urls))
            client = FeedClient(
                url,
                token,
                token_file=token_file,
                min_backoff=min_backoff,
                max_backoff=max_backoff,
                open_timeout=open_timeout,
            )
            self.feeds.append(RemoteFeed(index, url, client, label=url))
        self._thresholds = Thresholds("agent")
        self._tasks: list[asyncio.Task[None]] = []

    # -- what the console reads ------------------------------------------------------------

    @property
    def multi(self) -> bool:
        return len(self.feeds) > 1

    @property
    def label(self) -> str:  # type: ignore[override]
        roles = {feed.role for feed in self.feeds if feed.role}
        role = "/".join(sorted(roles)) if roles else "not connected"
        if not self.multi:
            return f"{self.feeds[0].label} · {role}"
        stale = sum(1 for feed in self.feeds if feed.stale_since is not None)
        where = f"{len(self.feeds)} sources" + (f", {stale} stale" if stale else "")
        return f"{where} · {role}"

    @property
    def speed(self) -> float | None:  # type: ignore[override]
        """One sped-up engine's rate, for the header's "simulated time ×10" (to two digits:
        it is measured); None for real time or several engines (the header's clock is then
        the local one)."""
        if self.multi or self.feeds[0].rate == 1.0:
            return None
        return float(f"{self.feeds[0].rate:.2g}")

    @property
    def stale_since(self) -> float | None:  # type: ignore[override]
        """The header's "STALE since": the earliest source that is out of touch, on the
        header's clock (one engine's own, else the local one)."""
        if not self.multi:
            return self.stale_for("")
        since = [feed.stale_since for feed in self.feeds if feed.stale_since is not None]
        return min(since) if since else None

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def can_mark_fixed(self) -> bool:
        return self.thresholds.kind == "tool"

    def now(self) -> float:
        if not self.multi:  # one engine (every id is its): the header's clock is its clock
            return self.now_for("")
        return time.time()

    def now_for(self, ident: str) -> float:
        """This engine's time on the local clock: countdowns against a sped-up engine run at
        its speed instead of drifting between snapshots."""
        feed, _ = self._locate(ident)
        return time.time() if feed is None else _on_engine_clock(feed, time.time())

    def snapshot(self) -> list[BreakerView]:
        return [view for feed in self.feeds for view in feed.views.values()]

    def recent(self, limit: int) -> list[Event]:
        """History arrives as events and is not re-read after a resync, with one exception: a
        breaker a snapshot shows open, whose trip this console has not seen, gets a
        `tripped` line from the snapshot's fields (once per episode), so its card says why."""
        seeded = []
        for feed in self.feeds:
            for key, view in feed.views.items():
                opened = feed.opened.get(key)
                if view.state == State.CLOSED or opened is None or view.opened_at is None:
                    continue
                if abs(feed.trip_marks.get(key, float("-inf")) - opened) < 0.01:
                    continue
                feed.trip_marks[key] = opened
                fields = {
                    "failure_class": view.trip_cause,
                    "count": view.count,
                    "cooldown_seconds": view.cooldown,
                }
                agent = view.agents[0] if view.agents else None
                seeded.append(ev.decoded(0, ev.TRIPPED, view.key, agent, view.opened_at, fields))
        return seeded

    def describe(self, ident: str) -> tuple[str, str | None]:
        if not self.multi:
            return ident, None
        feed, key = self._locate(ident)
        return key, feed.label if feed is not None else "?"

    def origin(self, ident: str) -> object:
        """The feed's index, never its label: replicas may be served under one name, and one
        counter for both dropped B's events numbered below A's last seq (B's `bob` OPEN while
        the console showed it CLOSED)."""
        feed, _ = self._locate(ident)
        return feed.index if feed is not None else None

    def limits_of(self, ident: str) -> Thresholds | None:
        """With a gateway and an MCP proxy watched together, each card counts against its own
        engine's thresholds."""
        if not self.mixed:
            return None
        feed, _ = self._locate(ident)
        return _thresholds(feed.policy, feed.thresholds) if feed is not None else None

    @property
    def mixed(self) -> bool:
        return len({feed.policy for feed in self.feeds if feed.policy}) > 1

    def stale_for(self, ident: str) -> float | None:
        """When the card's engine went out of touch, on that engine's clock, as every other
        time on its card is (a local time beside sped-up ones read as 46 minutes ago)."""
        feed, _ = self._locate(ident)
        if feed is None or feed.stale_since is None:
            return None
        return _on_engine_clock(feed, feed.stale_since)

    @property
    def engines(self) -> int:  # type: ignore[override]
        return len(self.feeds)

    def shared_store_lost(self) -> list[tuple[str | None, str]]:
        return [
            (feed.label if self.multi else None, feed.store_reason or "no reason given")
            for feed in self.feeds
            if feed.shared_store == "lost"
        ]

    def shared_store_warnings(self) -> list[tuple[str | None, str]]:
        return [
            (feed.label if self.multi else None, feed.store_reason)
            for feed in self.feeds
            if feed.shared_store == "ok" and feed.store_reason
        ]

    def shared_store(self, ident: str) -> p.SharedStoreHealth | None:
        feed, _ = self._locate(ident)
        return feed.shared_store if feed is not None else None

    def pooled(self, ident: str) -> bool:
        """Every live engine whose store answers is taken to share that store: the replicas of
        one gateway, as `watch` is meant to be pointed at (two fleets on two Redis servers
        watched together would show a key's cards in one state as one, its line still
        counting each)."""
        feed, _ = self._locate(ident)
        return feed is not None and feed.shared_store == "ok" and feed.stale_since is None

    def can_write(self, ident: str) -> bool:
        feed, _ = self._locate(ident)
        return feed is not None and feed.role == "operator"

    def siblings(self, ident: str) -> list[str]:
        _, key = self._locate(ident)
        return [feed.views[key].key for feed in self.feeds if key in feed.views]

    def source_name(self, ident: str) -> str | None:
        feed, _ = self._locate(ident)
        return feed.label if feed is not None else None

    async def audit(self, key: str, limit: int = 200) -> list[Event]:
        feed, engine_key = self._locate(key)
        if feed is None:
            return []
        return list(feed.received.get(engine_key, ()))[:limit]

    def audit_note(self, ident: str) -> str | None:
        feed, _ = self._locate(ident)
        if feed is None:
            return None
        since = clock_text(feed.connected_at) if feed.connected_at else "--:--:--"
        return (
            f"Events received from {feed.label} since this console connected ({since}), "
            "newest first; a gap while disconnected is not replayed. The full audit log "
            f"lives on the engine ({feed.url})."
        )

    def feed_url(self, ident: str) -> str | None:
        feed, _ = self._locate(ident)
        return None if feed is None else feed.url

    # -- operator writes, over the feed ------------------------------------------------------

    async def reset(self, key: str, actor: str, reason: str) -> None:
        feed, engine_key = self._require(key)
        await feed.client.reset(engine_key, reason=reason, actor=actor)

    async def mark_credential_fixed(self, key: str, actor: str) -> None:
        feed, engine_key = self._require(key)
        await feed.client.mark_fixed(
            engine_key, reason="marked fixed from the console", actor=actor
        )

    async def hold(self, key: str, actor: str, reason: str, duration: str) -> None:
        feed, engine_key = self._require(key)
        await feed.client.request("hold", engine_key, reason=reason, actor=actor, duration=duration)

    async def release(self, key: str, actor: str, reason: str, *, close: bool) -> None:
        feed, engine_key = self._require(key)
        await feed.client.request("release", engine_key, reason=reason, actor=actor, close=close)

    async def set_mode(self, key: str, mode: str, actor: str, reason: str) -> None:
        feed, engine_key = self._require(key)
        await feed.client.request("mode", engine_key, reason=reason, actor=actor, mode=mode)

    def _require(self, ident: str) -> tuple[RemoteFeed, str]:
        feed, key = self._locate(ident)
        if feed is None:
            raise FeedError(f"no source for {ident!r}")
        if feed.role != "operator":
            raise FeedError(f"{feed.label}: a viewer token cannot write; use the operator token")
        return feed, key

    # -- ids -------------------------------------------------------------------------------------

    def _ident(self, feed: RemoteFeed, key: str) -> str:
        return f"{feed.index}{_SEP}{key}" if self.multi else key

    def _locate(self, ident: str) -> tuple[RemoteFeed | None, str]:
        if not self.multi:
            return self.feeds[0], ident
        index, sep, key = ident.partition(_SEP)
        if not sep or not index.isdigit() or int(index) >= len(self.feeds):
            return None, ident
        return self.feeds[int(index)], key

    # -- starting: one-shot snapshots, so the app knows the policy before it draws ----------

    async def prime(self, timeout: float = 10.0) -> list[tuple[RemoteFeed, FeedError]]:
        """Read each engine's snapshot once (concurrently). Returns the sources that failed
        and why; a refused token or another protocol version should stop the caller."""

        async def one(feed: RemoteFeed) -> FeedError | None:
            try:
                snap = await fetch_snapshot(feed.url, feed.client.token(), timeout=timeout)
            except (FeedError, OSError) as error:
                return error if isinstance(error, FeedError) else FeedError(str(error))
            self._apply_snapshot(feed, snap)
            return None

        results = await asyncio.gather(*(one(feed) for feed in self.feeds))
        failed = []
        for feed, error in zip(self.feeds, results, strict=True):
            if error is not None:
                feed.stale_since = time.time()
                feed.problem = str(error)
                failed.append((feed, error))
        return failed

    # -- the one stream the app reads ---------------------------------------------------------

    async def updates(self) -> AsyncIterator[list[Event] | Missed | Notice]:
        queue: asyncio.Queue[tuple[RemoteFeed, object]] = asyncio.Queue(QUEUE_LIMIT)
        self._tasks = [
            asyncio.create_task(self._read(feed, queue), name=f"feed {feed.url}")
            for feed in self.feeds
            if not feed.ended
        ]
        try:
            yield Missed(0)  # draw what `prime` read
            while True:
                feed, message = await queue.get()
                for item in self._apply(feed, message):
                    yield item
        finally:
            await self._stop_readers()

    async def _read(
        self, feed: RemoteFeed, queue: asyncio.Queue[tuple[RemoteFeed, object]]
    ) -> None:
        try:
            async for message in feed.client:
                await queue.put((feed, message))
        except FeedError as error:  # refused, another protocol, an unreadable token file
            await queue.put((feed, error))

    def _apply(self, feed: RemoteFeed, message: object) -> list[list[Event] | Missed | Notice]:
        if isinstance(message, p.SnapshotMessage):
            back = feed.stale_since is not None and feed.connected_at is not None
            self._apply_snapshot(feed, message)
            out: list[list[Event] | Missed | Notice] = [Missed(0)]
            if back:
                out.append(Notice(f"{feed.label} is back: resynced from its snapshot."))
            # A lost (or returning) store is said in the header and the status line, not in a
            # toast: one Redis lost by three replicas made six toasts over the cards.
            return out
        if isinstance(message, p.EventMessage | p.EventsMessage):
            records = [message.event] if isinstance(message, p.EventMessage) else message.events
            return [[self._fold(feed, record) for record in records]]
        if isinstance(message, ConnectionLost):
            first = feed.stale_since is None
            if first:
                feed.stale_since = message.since
            feed.problem = message.error
            if first:
                text = f"Lost {feed.label}: {message.error}. Its cards are stale; reconnecting."
                return [Missed(0), Notice(text, "warning")]
            return []
        if isinstance(message, FeedError):
            feed.ended = True
            feed.stale_since = feed.stale_since or time.time()
            feed.problem = str(message)
            text = f"{feed.label}: {message}. Not retrying."
            return [Missed(0), Notice(text, "error")]
        return []  # acks and errors are answered to the request that sent them

    def _apply_snapshot(self, feed: RemoteFeed, snap: p.SnapshotMessage) -> None:
        received = time.time()
        feed.offset = received - parse_iso(snap.at)
        feed.synced_at = received
        feed.rate_mark = None
        feed.epoch = parse_iso(snap.epoch)
        feed.label = snap.source or feed.url
        feed.role = snap.role
        feed.policy = snap.policy
        feed.thresholds = dict(snap.thresholds)
        feed.shared_store = snap.shared_store
        feed.store_reason = snap.shared_store_reason
        if snap.seq < feed.last_seq - feed.seq_base:  # the engine started over
            feed.seq_base = feed.last_seq
        feed.last_seq = feed.seq_base + snap.seq
        feed.views = {info.key: self._view(feed, info, feed.last_seq) for info in snap.breakers}
        feed.opened = {
            info.key: parse_iso(info.opened_at)
            for info in snap.breakers
            if info.opened_at is not None and info.state != State.CLOSED
        }
        feed.connected_at = feed.connected_at or received
        feed.stale_since = None
        feed.problem = None
        feed.ended = False
        # Mixed policies: cards are grouped by agent (the `tool` way, which keeps an `agent`
        # card alone in its group) and each counts against its own engine's thresholds.
        kinds = {f.policy for f in self.feeds if f.policy}
        if len(kinds) > 1:
            self._thresholds = Thresholds("tool")
        else:
            self._thresholds = _thresholds(snap.policy, snap.thresholds)

    def _local(self, feed: RemoteFeed, iso: str | None) -> float | None:
        return None if iso is None else parse_iso(iso) + feed.offset

    def _view(self, feed: RemoteFeed, info: p.BreakerInfo, seq: int) -> BreakerView:
        return BreakerView(
            key=self._ident(feed, info.key),
            agents=tuple(info.agents) or ((info.agent,) if info.agent else ()),
            state=info.state,
            count=info.count,
            trip_cause=info.trip_cause,
            opened_at=self._local(feed, info.opened_at),
            reopens_at=self._local(feed, info.reopens_at),
            cooldown=info.cooldown_seconds,
            failed_probes=info.failed_probes,
            paged=info.paged,
            paused=info.paused,
            last_failure_at=self._local(feed, info.last_failure_at),
            seq=seq,
            probe_since=self._local(feed, info.probe_since),
            held_by=info.held_by,
            held_reason=info.held_reason,
            held_until=self._local(feed, info.held_until),
            mode=info.mode,
        )

    def _fold(self, feed: RemoteFeed, record: p.EventRecord) -> Event:
        """One event: its view (if it carries one) into the source's views, the event into its
        received list, and out."""
        ident = self._ident(feed, record.key)
        wall = feed.epoch + record.t + feed.offset
        _measure_rate(feed, wall)
        seq = feed.seq_base + record.seq
        view = None if record.view is None else self._view(feed, record.view, seq)
        event = ev.decoded(seq, record.type, ident, record.agent, wall, record.fields, view)
        if record.type == ev.TRIPPED:
            feed.trip_marks[record.key] = feed.epoch + record.t
        kept = ev.audit_form(event)
        if kept is not None:
            history = feed.received.setdefault(record.key, deque(maxlen=RECEIVED_PER_KEY))
            history.appendleft(kept)
        if view is not None:
            feed.views[record.key] = view
        feed.last_seq = seq
        return event

    async def _stop_readers(self) -> None:
        tasks, self._tasks = self._tasks, []
        for feed in self.feeds:
            await feed.client.close()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()


#: Local seconds a measure of an engine's speed spans, at least.
RATE_AFTER = 2.0
#: Rates this close to 1 are read as real time (network jitter is not a speed), and two
#: measures this close (relative) agree.
RATE_SLACK = 0.1


def _measure_rate(feed: RemoteFeed, wall: float) -> None:
    """An event's engine time (on the local clock, by the snapshot's offset) against when it
    arrived, since the last measure: how fast the engine's clock runs. Events arrive as they
    happen, so the newest one is a fair sample of the engine's clock.

    A sped-up clock runs at one speed, so one measure after another says the same; a manual
    clock (a test's, or an example's story) stands still and then jumps, which one measure
    alone would read as a speed (a 30 s jump five seconds in: ×7, with the header's clock
    running ahead for good). So a speed is taken only when two measures in a row agree."""
    local = time.time()
    since_local, since_wall = feed.rate_mark or (feed.synced_at, feed.synced_at)
    elapsed = local - since_local
    if elapsed < RATE_AFTER:
        return
    slope = (wall - since_wall) / elapsed
    previous, feed.slope, feed.rate_mark = feed.slope, slope, (local, wall)
    if previous is None or not math.isfinite(slope) or slope <= 0:
        return
    if abs(slope - previous) > RATE_SLACK * max(slope, previous):
        return
    feed.rate = 1.0 if abs(slope - 1.0) < RATE_SLACK else min(max(slope, 0.1), 1000.0)


def _thresholds(policy: str | None, numbers: dict[str, int]) -> Thresholds:
    if policy == "tool":
        return Thresholds("tool", failure=numbers.get("consecutive", 3))
    return Thresholds(
        "agent", auth=numbers.get("auth_failure", 3), upstream=numbers.get("upstream_failure", 5)
    )


T = TypeVar("T")


def _pick(values: Sequence[T], index: int, total: int) -> T | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) != total:
        raise ValueError(f"give one token file, or one per URL ({total}); got {len(values)}")
    return values[index]


__all__ = ["RemoteFeed", "RemoteSource"]


def _on_engine_clock(feed: RemoteFeed, local: float) -> float:
    """A local time on a sped-up engine's clock, from its last snapshot at its measured rate."""
    if feed.rate == 1.0:
        return local
    return feed.synced_at + feed.rate * (local - feed.synced_at)
