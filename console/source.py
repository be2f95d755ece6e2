"""Where the console's breakers come from: a `Source`, and what some sources can do besides.

Every source gives breakers, events and an audit log; an in-process engine (demo mode), remote
engines over websockets (`console.remote_source`) and a recording (`console.replay`) are each
one. A remote source sets `stale_since` when its connection drops (the header then says the
numbers are stale instead of letting them freeze silently) and clears it once a fresh snapshot
is in. What only some sources can do is a capability class: the operator's writes (`Writes`),
reading a view now (`FreshViews`), a shared store's health (`SharedStores`) and several engines
in one source (`Fleet`). The app asks each question once, never touching an engine directly.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from breakerdeck.console.card import Thresholds
from breakerdeck.engine import events as ev
from breakerdeck.engine.core import holds
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.feed.bus import EventBus, Missed, Subscription
from breakerdeck.engine.feed.encoding import shared_store_health
from breakerdeck.engine.feed.protocol import SharedStoreHealth
from breakerdeck.engine.policy import AgentPolicy

#: Rows read for a breaker's trips (transitions and failures only).
TRIP_ROWS = 2000
#: Their types: what a trip's story is told from.
TRIP_TYPES = (*sorted(ev.TRANSITIONS), ev.CALL_FAILED)

#: Events fed to a fresh board so cards show recent denials and trips from the audit log.
SEED_TYPES = (*sorted(ev.TRANSITIONS), ev.CALL_DENIED, ev.CALL_WOULD_DENY, ev.CALL_FAILED)


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the operator should read (a source lost or back): shown as a toast."""

    text: str
    severity: str = "information"


class Restart:
    """The source's history starts over (a replay moved back): the console drops what it
    folded, then reads history and a snapshot afresh, as after a `Missed`."""


class Source(abc.ABC):
    """What every source gives: its breakers, their events and their audit log. What only
    some can do is a capability of its own below (`Writes`, `FreshViews`, `SharedStores`,
    `Fleet`), which the app asks for once with `isinstance`."""

    #: Shown in the header, e.g. "demo vendor-outage" or "ws://host:port".
    label: str = ""
    #: Simulated seconds per real second, when time is accelerated; None for real time.
    speed: float | None = None
    #: Wall time (source clock) since which the data is not live; None while it is.
    stale_since: float | None = None
    #: Counters that cannot be exact (an audit log replayed keeps no successes): cards say so.
    approximate_counts: bool = False
    #: The clock is a recording's (a replay): the header says "recorded time".
    recorded: bool = False

    @property
    @abc.abstractmethod
    def thresholds(self) -> Thresholds: ...

    @abc.abstractmethod
    def now(self) -> float:
        """The source's wall clock (simulated in demo mode): countdowns are computed from it."""

    @abc.abstractmethod
    def snapshot(self) -> list[BreakerView]: ...

    @abc.abstractmethod
    def recent(self, limit: int) -> list[Event]:
        """Recent history (transitions, denials, failures), oldest first, to seed the cards."""

    @abc.abstractmethod
    def updates(self) -> AsyncIterator[list[Event] | Missed | Notice | Restart]:
        """Event batches in order. A `Missed` means: take a snapshot before reading on (the
        first item is always one, so subscribing and the snapshot cannot race). A `Notice` is
        for the operator's eyes. An event that changed its breaker carries the breaker's view
        as of that event (`Event.view`): the only way a card learns of a change between
        snapshots, so every source tells the same story."""

    @abc.abstractmethod
    async def audit(self, key: str, limit: int = 200) -> list[Event]:
        """The key's audit log, newest first."""

    async def trip_history(self, key: str, limit: int = TRIP_ROWS) -> list[Event]:
        """The key's transitions and failures, newest first, reaching further back than
        `audit` (which a flood of denied calls fills): every trip's story, not only the
        current episode's."""
        return await self.audit(key, limit)

    def audit_note(self, ident: str) -> str | None:
        """A line above the detail screen's log when it is not the engine's whole log."""
        return None

    def feed_url(self, ident: str) -> str | None:
        """The feed a shell's `breakerdeck reset` reaches this breaker's engine at (None: an
        engine in this process, or a recording)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the source holds."""


class Writes(abc.ABC):
    """A source the operator can write to: reset, mark a credential fixed, hold, release and
    switch a breaker's mode (DESIGN, "Operator control"). A replay has nothing to write to, so
    it is not one. A write the engine refuses raises, with its reason as the error's words."""

    @property
    @abc.abstractmethod
    def can_mark_fixed(self) -> bool:
        """Whether mark-credential-fixed exists here (the `tool` policy pauses credentials)."""

    def can_write(self, ident: str) -> bool:
        """Whether this breaker's writes are allowed (a remote viewer token: no)."""
        return True

    @abc.abstractmethod
    async def reset(self, key: str, actor: str, reason: str) -> None: ...

    @abc.abstractmethod
    async def mark_credential_fixed(self, key: str, actor: str) -> None: ...

    def max_hold_seconds(self, ident: str) -> float | None:
        """The longest hold this breaker's engine takes (None: only the engine knows, and
        says so when it refuses a longer one)."""
        return None

    @abc.abstractmethod
    async def hold(self, key: str, actor: str, reason: str, duration: str) -> None:
        """Hold open for `duration` (`90s`, `30m`, `2h`)."""

    @abc.abstractmethod
    async def release(self, key: str, actor: str, reason: str, *, close: bool) -> None: ...

    @abc.abstractmethod
    async def set_mode(self, key: str, mode: str, actor: str, reason: str) -> None: ...


class FreshViews(abc.ABC):
    """A source that can read a breaker's view now (an engine in this process, a replay's):
    a probe goes out without a line, and this is how the card learns of it. A remote source
    has what its events carry."""

    @abc.abstractmethod
    def fresh_views(self, ids: list[str]) -> list[BreakerView]: ...


class SharedStores(abc.ABC):
    """A source whose engines may share a store with replicas (DESIGN, "Replicas")."""

    @abc.abstractmethod
    def shared_store_lost(self) -> list[tuple[str | None, str]]:
        """The engines whose shared store is lost, so that each decides alone: (its label, or
        None when it is the only engine; why). Empty while every store answers, and for
        engines without one."""

    @abc.abstractmethod
    def shared_store_warnings(self) -> list[tuple[str | None, str]]:
        """The engines whose shared store answers though something is wrong (the engine's
        clock is off the store's): (its label, or None when it is the only engine; what)."""

    @abc.abstractmethod
    def shared_store(self, ident: str) -> SharedStoreHealth | None:
        """The shared store of this breaker's engine: "ok", "lost", or None without one."""


class Fleet(abc.ABC):
    """Which engine each breaker comes from. A breaker's id (what views, audit and the writes
    take) is its key, unless a source serves several engines: then these say which engine and
    key an id stands for. `fleet_of` answers for a source of one engine."""

    #: Engines this source reads (the header's "shared store lost on 2 of 3").
    engines: int = 1

    @abc.abstractmethod
    def describe(self, ident: str) -> tuple[str, str | None]:
        """(key, source label): the label is None when there is only one source."""

    @abc.abstractmethod
    def now_for(self, ident: str) -> float:
        """The clock this breaker's countdown runs on (a sped-up remote engine runs faster)."""

    @abc.abstractmethod
    def origin(self, ident: str) -> object:
        """Which engine this breaker's events come from: each engine numbers its own seqs."""

    @abc.abstractmethod
    def limits_of(self, ident: str) -> Thresholds | None:
        """This breaker's own thresholds when sources run different policies (else None)."""

    @abc.abstractmethod
    def stale_for(self, ident: str) -> float | None:
        """Since when this breaker's numbers are not live (None while they are)."""

    @abc.abstractmethod
    def pooled(self, ident: str) -> bool:
        """Whether this breaker is one with the same key on the other engines watched here:
        its engine is live and its shared store answers (replicas of one gateway)."""

    @abc.abstractmethod
    def siblings(self, ident: str) -> list[str]:
        """The ids of this key on every source reporting it (itself included)."""

    def source_name(self, ident: str) -> str | None:
        return self.describe(ident)[1]


class OneEngine(Fleet):
    """A source of one engine, asked the fleet's questions: every id is its key."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def describe(self, ident: str) -> tuple[str, str | None]:
        return ident, None

    def now_for(self, ident: str) -> float:
        return self.source.now()

    def origin(self, ident: str) -> object:
        return None

    def limits_of(self, ident: str) -> Thresholds | None:
        return None

    def stale_for(self, ident: str) -> float | None:
        return self.source.stale_since

    def pooled(self, ident: str) -> bool:
        return False

    def siblings(self, ident: str) -> list[str]:
        return [ident]


def fleet_of(source: Source) -> Fleet:
    """The source's engines as a fleet: itself when it reads several, else a fleet of one."""
    return source if isinstance(source, Fleet) else OneEngine(source)


#: In a `FaultControls.status()` word: the platform's credential is revoked (`f` fixes it).
REVOKED = "CRED REVOKED"


class FaultControls(Protocol):
    """Demo mode's fault injector, as the console drives it."""

    platforms: list[str]

    def status(self) -> dict[str, str]:
        """Platform -> what it does now, in a word or two ("ok", "DOWN (refused)", `REVOKED`)."""
        ...

    def take_down(self, platform: str) -> None: ...

    def bring_back(self, platform: str) -> None: ...

    def revoke(self, platform: str) -> None: ...

    def fix(self, platform: str) -> None: ...


class InProcessSource(Source, Writes, FreshViews, SharedStores):
    """An engine in this process: events from its bus, audit rows from its SQLite log."""

    def __init__(
        self,
        engine: Engine,
        *,
        label: str = "",
        speed: float | None = None,
        buffer: int = 10_000,
    ) -> None:
        self.engine = engine
        self.label = label
        self.speed = speed
        self.buffer = buffer  # events held for the console before it must resync
        self._bus = EventBus(engine)
        self._thresholds = Thresholds.of(engine.policy)
        self._subscriptions: list[Subscription] = []

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def can_mark_fixed(self) -> bool:
        return not isinstance(self.engine.policy, AgentPolicy)

    def now(self) -> float:
        return self.engine.clock.wall()

    def shared_store_lost(self) -> list[tuple[str | None, str]]:
        lost = self.engine.shared_lost
        return [] if lost is None else [(None, lost)]

    def shared_store_warnings(self) -> list[tuple[str | None, str]]:
        warning = self.engine.shared_warning
        return [] if warning is None or self.engine.shared_lost else [(None, warning)]

    def shared_store(self, ident: str) -> SharedStoreHealth | None:
        return shared_store_health(self.engine)[0]

    def snapshot(self) -> list[BreakerView]:
        return self.engine.views()

    def fresh_views(self, ids: list[str]) -> list[BreakerView]:
        return self.engine.views(ids)

    def recent(self, limit: int) -> list[Event]:
        if self.engine.audit is None:
            return []
        return list(reversed(self.engine.audit.query(types=SEED_TYPES, limit=limit)))

    async def updates(self) -> AsyncIterator[list[Event] | Missed]:
        subscription = self._bus.subscribe(self.buffer)
        self._subscriptions.append(subscription)
        try:
            yield Missed(0)
            while not subscription.closed:
                yield await subscription.get()
        finally:
            subscription.close()

    async def audit(self, key: str, limit: int = 200) -> list[Event]:
        if self.engine.audit is None:
            return []
        return self.engine.audit.query(key=key, limit=limit)

    async def trip_history(self, key: str, limit: int = TRIP_ROWS) -> list[Event]:
        if self.engine.audit is None:
            return []
        return self.engine.audit.query(key=key, types=TRIP_TYPES, limit=limit)

    async def reset(self, key: str, actor: str, reason: str) -> None:
        self.engine.reset(key, actor, reason)

    async def mark_credential_fixed(self, key: str, actor: str) -> None:
        self.engine.restore_credential(key, actor)

    def max_hold_seconds(self, ident: str) -> float | None:
        return self.engine.policy.max_hold_seconds

    async def hold(self, key: str, actor: str, reason: str, duration: str) -> None:
        seconds = holds.duration_seconds(duration, self.engine.policy.max_hold_seconds)
        self.engine.hold(key, actor, reason, seconds)

    async def release(self, key: str, actor: str, reason: str, *, close: bool) -> None:
        self.engine.release(key, actor, reason, close=close)

    async def set_mode(self, key: str, mode: str, actor: str, reason: str) -> None:
        self.engine.set_mode(key, mode, actor, reason)

    def close(self) -> None:
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions.clear()
