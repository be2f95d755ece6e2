"""What the feed sends, read from the engine: a snapshot of its breakers, an event as a
record, each breaker as `BreakerInfo` (docs/feed.md has the fields)."""

from __future__ import annotations

from typing import Any

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import BreakerView, Event, iso_utc, record
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.state import State


def snapshot(
    engine: Engine, source: str, *, role: p.Role | None = None
) -> tuple[int, p.SnapshotMessage]:
    """The engine's breakers and the seq they reflect, read together; `role` is the reading
    connection's (viewer or operator), so a console knows whether to offer resets."""
    seq, views = engine.snapshot()
    now = engine.clock.wall()
    policy = engine.policy
    if isinstance(policy, AgentPolicy):
        thresholds = {
            "auth_failure": policy.auth_threshold,
            "upstream_failure": policy.upstream_threshold,
        }
    else:
        thresholds = {"consecutive": policy.failure_threshold}
    health, reason = shared_store_health(engine)
    return seq, p.SnapshotMessage(
        seq=seq,
        source=source,
        policy=policy.kind,
        at=iso_utc(now),
        epoch=iso_utc(engine.epoch),
        thresholds=thresholds,
        breakers=[_breaker(view, source, now) for view in views],
        role=role,
        revision=p.PROTOCOL_REVISION,
        shared_store=health,
        shared_store_reason=reason,
    )


def shared_store_health(engine: Engine) -> tuple[p.SharedStoreHealth | None, str | None]:
    """The engine's shared store as a snapshot reports it, and why it is lost, or, while it
    answers, what is wrong all the same (this replica's clock is off the store's): (None,
    None) without one. `Engine.shared_lost` is None both without a store and while it answers, so
    whether there is one is read from the engine's store itself."""
    lost = engine.shared_lost
    if lost is not None:
        return "lost", lost
    return ("ok" if engine.sharing else None), engine.shared_warning


def feed_record(event: Event, epoch: float, source: str) -> dict[str, Any]:
    """An event as the feed sends it: the trace's line (shared, never changed) and, on an
    event that changed its breaker, the breaker as of that event (`retry_after_seconds`
    counted from the event's time)."""
    line = record(event, epoch)
    if event.view is None:
        return line
    info = _breaker(event.view, source, event.wall)
    return {**line, "view": info.model_dump(mode="json")}


def _breaker(view: BreakerView, source: str, now: float) -> p.BreakerInfo:
    retry_after = None
    if view.state is not State.CLOSED and view.reopens_at is not None:
        retry_after = round(max(0.0, view.reopens_at - now), 3)
    return p.BreakerInfo(
        key=view.key,
        agent=view.agents[0] if view.agents else None,
        agents=list(view.agents),
        shared=view.shared,
        state=view.state,
        count=view.count,
        retry_after_seconds=retry_after,
        source=source,
        trip_cause=view.trip_cause,
        paged=view.paged,
        paused=view.paused,
        opened_at=_iso(view.opened_at),
        reopens_at=_iso(view.reopens_at),
        cooldown_seconds=view.cooldown,
        failed_probes=view.failed_probes,
        last_failure_at=_iso(view.last_failure_at),
        probe_since=_iso(view.probe_since),
        mode=view.mode,
        held_by=view.held_by,
        held_reason=view.held_reason,
        held_until=_iso(view.held_until),
    )


def _iso(wall: float | None) -> str | None:
    return None if wall is None else iso_utc(wall)
