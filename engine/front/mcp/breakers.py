"""What the MCP proxy keeps of the engine that is its own: servers' keys and states, metrics.

A `tools/call` goes the one call path (`engine.callpath`, through `mcp.call`); `Breakers` names
a server's breaker, says what `tools/list` shows of it and counts completions for the metrics.
This module also holds the clock seam: the proxy reads deadlines, cooldowns and leases from one
`FrontClock` (`monotonic`, `wall`, and `real` to turn a span on that clock into real seconds
for the event loop's timers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.errors import UnknownKey
from breakerdeck.engine.events import BreakerView, Event
from breakerdeck.engine.front.metrics import Counts
from breakerdeck.engine.outcomes import Outcome
from breakerdeck.engine.state import State

#: Transitions that change what `tools/list` says about a server's tools.
ANNOUNCED = frozenset(
    {
        "circuit_breaker.tripped",
        "circuit_breaker.half_open",
        "circuit_breaker.reopened",
        "circuit_breaker.recovered",
        "circuit_breaker_reset",
        "circuit_breaker.restored",
        "credential.revoked",
        "credential.restored",
        "circuit_breaker.held",
        "circuit_breaker.released",
        "circuit_breaker.mode",
    }
)


class FrontClock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def real(self, seconds: float) -> float: ...


@dataclass
class ManualFrontClock(ManualClock):
    """A manual clock for cooldowns and leases whose deadlines run in real seconds: tests move
    time past a cooldown by hand while an attempt's short deadline still expires on its own."""

    def real(self, seconds: float) -> float:
        return seconds


@dataclass(frozen=True, slots=True)
class ServerState:
    """What the proxy tells the model about a server's breaker in `tools/list`."""

    state: State
    paused: bool
    until_wall: float | None
    reason: str

    @property
    def available(self) -> bool:
        return self.state == State.CLOSED and not self.paused


class Breakers:
    """The engine under the `tool` policy, as the proxy names and shows it: a server's key,
    what `tools/list` says of it, and the metrics' per-key counts. Calls themselves go the one
    call path (`mcp.call.ToolCalls`)."""

    def __init__(self, engine: Engine, clock: FrontClock, counts: Counts | None = None) -> None:
        self.engine = engine
        self.clock = clock
        #: The metrics' per-key integers: a completion and its duration are added here.
        self.counts = counts

    def key(self, server: str, credential_id: str) -> str:
        return f"{server}@{credential_id}"

    def count(self, call: Call, outcome: Outcome) -> None:
        """A completed call, in the metrics."""
        counts = self.counts
        if counts is None:
            return
        counts.calls[(call.key, outcome.cls.value, outcome.counted)] += 1
        if call.admitted_wall is not None:
            counts.observe(call.key, max(0.0, self.clock.wall() - call.admitted_wall))

    def open_reason(self, key: str) -> str:
        return self.engine.open_reason(key)

    def view(self, key: str) -> BreakerView | None:
        """The key's breaker as the model may see it, or None when there is nothing to show:
        before any call has reached its server, and in shadow unless held (DESIGN: nothing a
        caller or model reads shows a shadow breaker's state, which refuses nothing)."""
        try:
            view = self.engine.view(key)
        except UnknownKey:
            return None
        if view.mode == "shadow" and view.state != State.HELD:
            return None
        return view

    def state(self, key: str) -> ServerState:
        view = self.view(key)
        if view is None:
            return ServerState(State.CLOSED, False, None, "")
        if view.state == State.HELD:  # refuses in either mode, its credential's pause aside
            return ServerState(view.state, False, view.held_until, self.open_reason(key))
        if view.paused:
            return ServerState(view.state, True, None, "its credential was revoked")
        reason = ""
        if view.state != State.CLOSED:
            reason = self.open_reason(key)
        return ServerState(view.state, False, view.reopens_at, reason)

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        return self.engine.subscribe(listener)

    def restore_credential(self, key: str, actor: str) -> Event:
        return self.engine.restore_credential(key, actor)
