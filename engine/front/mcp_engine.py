"""The MCP proxy's one door into the engine: admission, completion, refusals and views.

Everything the proxy asks of `Engine` goes through `Breakers`, so a change in the engine's
call API touches this module only. It also holds the clock seam: the proxy reads deadlines,
cooldowns and leases from one `FrontClock` (`monotonic`, `wall`, and `real` to turn a span on
that clock into real seconds for the event loop's timers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from breakerdeck.engine import results
from breakerdeck.engine.breaker import DenyReason
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.errors import UnknownKey
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.metrics import Counts
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.probewait import ProbeWaits
from breakerdeck.engine.results import ToolResult

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

    state: str
    paused: bool
    until_wall: float | None
    reason: str

    @property
    def available(self) -> bool:
        return self.state == "closed" and not self.paused


class Breakers:
    """The engine under the `tool` policy, as the proxy uses it."""

    def __init__(self, engine: Engine, clock: FrontClock, counts: Counts | None = None) -> None:
        self.engine = engine
        self.clock = clock
        #: The metrics' per-key integers: a completion and its duration are added here.
        self.counts = counts
        self._waits = ProbeWaits(engine)

    def key(self, server: str, credential_id: str) -> str:
        return f"{server}@{credential_id}"

    def ticket(self, key: str, agent: str, server: str, tool: str, deadline: float) -> Call:
        return self.engine.new_call(
            key=key, agent=agent, platform=server, tool=tool, deadline_seconds=deadline
        )

    def paused(self, key: str) -> bool:
        return self.engine.credential_paused(key)

    def credential_worked(self, key: str) -> bool:
        return self.engine.credential_worked(key)

    async def admit(
        self, call: Call, lease: float, tool: str, wait_seconds: float = 0.0
    ) -> ToolResult | None:
        """None when the call may go out; otherwise the refusal the model gets. With a probe
        wait (`probe_wait_seconds`), a call that finds the probe out first waits (at most that
        long on the engine's clock) for its outcome."""
        admission = await self._waits.admit(call, lease, self.clock.real(wait_seconds))
        if admission.allowed:
            return None
        if admission.reason is DenyReason.PROBE_IN_FLIGHT:
            return results.denied(tool, admission, "", ())
        return results.circuit_open(tool, self.open_reason(call.key), admission.retry_after, ())

    def refuse(self, call: Call, outcome: Outcome, result: ToolResult) -> None:
        """A refusal before the breaker: a line, never counted, no probe slot."""
        self.engine.refuse(call, outcome, agent_status=result["status"])

    def may_retry(self, call: Call) -> bool:
        return self.engine.may_retry(call)

    def extend_probe(self, call: Call, seconds: float) -> None:
        self.engine.extend_probe(call, seconds)

    async def complete(
        self, call: Call, outcome: Outcome, fault: str, status: str, platform_status: int | None
    ) -> None:
        await self.engine.complete_async(
            call, outcome, fault=fault, agent_status=status, platform_status=platform_status
        )
        self._count(call, outcome)
        self._wake(call)

    def complete_now(self, call: Call, outcome: Outcome, fault: str, status: str) -> None:
        """For a call the host cancelled: no await is possible once cancelled."""
        self.engine.complete(call, outcome, fault=fault, agent_status=status)
        self._count(call, outcome)
        self._wake(call)

    def _count(self, call: Call, outcome: Outcome) -> None:
        counts = self.counts
        if counts is None:
            return
        counts.calls[(call.key, outcome.cls.value, outcome.counted)] += 1
        if call.admitted_wall is not None:
            counts.observe(call.key, max(0.0, self.clock.wall() - call.admitted_wall))

    def _wake(self, call: Call) -> None:
        if call.admitted_as == "probe":
            self._waits.wake(call.key)

    def stopped_by_recheck(self, call: Call, tool: str, outcome: Outcome, fault: str) -> ToolResult:
        """The breaker opened while this call waited to retry: record what it saw, stop."""
        self.engine.complete(call, outcome, fault=fault, agent_status="circuit_open")
        view = self.engine.view(call.key)
        if view.reopens_at is None:
            left = self.engine.policy.probe_retry_after_seconds
        else:
            left = view.reopens_at - self.engine.clock.wall()
        return results.circuit_open(tool, self.open_reason(call.key), max(left, 0.0), ())

    def open_reason(self, key: str) -> str:
        breaker = self.engine.breaker(key)
        return results.open_reason(key, breaker.count, breaker.last_failure_detail)

    def state(self, key: str) -> ServerState:
        try:
            view = self.engine.view(key)
        except UnknownKey:  # no call has reached this server yet
            return ServerState("closed", False, None, "")
        if view.paused:
            return ServerState(view.state, True, None, "its credential was revoked")
        reason = ""
        if view.state != "closed":
            reason = self.open_reason(key)
        return ServerState(view.state, False, view.reopens_at, reason)

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        return self.engine.subscribe(listener)

    def restore_credential(self, key: str, actor: str) -> Event:
        return self.engine.restore_credential(key, actor)


def cancelled_outcome() -> Outcome:
    """The host cancelled: neutral, frees a probe slot, counts nothing."""
    return Outcome(OutcomeClass.CALLER_ERROR, detail="the host cancelled the call")


def result_for(tool: str, outcome: Outcome, attempts: int, credential_id: str) -> ToolResult:
    """The `tool` policy's object for an outcome the proxy answers itself."""
    cls = outcome.cls
    if outcome.counted:
        return results.tool_error(tool, outcome.detail, attempts, outcome.retry_after)
    if cls is OutcomeClass.RATE_LIMITED:
        return results.rate_limited(tool, outcome.retry_after)
    if cls is OutcomeClass.PERMISSION_DENIED:
        return results.permission_denied(tool, outcome.detail)
    if cls is OutcomeClass.CREDENTIAL_REVOKED:
        return results.credential_revoked(tool, credential_id)
    if cls is OutcomeClass.REFUSED_PRE_CALL:
        return results.refused(tool, outcome.detail)
    return results.invalid_request(tool, outcome.detail)
