"""`Engine.guard(key, agent=…, lease=…)`: a reusable per-key guard for code that makes its own
calls (DESIGN, "tool policy"), in the article's shape:

    guard = engine.guard("search@default", agent="planner")
    try:
        with guard:                 # or: async with guard:
            answer = search(query)
    except BreakerOpen as refused:
        return refused.result       # circuit_open / probe_in_flight, as the model gets it

Entering admits the call (as normal, or as the one probe) or raises `BreakerOpen` carrying the
refusal's structured result; leaving records a success, or classifies the exception (the
function tools' classifier) and lets it propagate. One guard serves any number of threads and
tasks at once: each entry's call is kept in a context variable, not on the guard.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import TYPE_CHECKING

from breakerdeck.engine import results
from breakerdeck.engine.breaker import Admission
from breakerdeck.engine.classify import Classifier, default_classifier, network_fault
from breakerdeck.engine.outcomes import SUCCESS, Outcome
from breakerdeck.engine.results import ToolResult

if TYPE_CHECKING:
    from breakerdeck.engine.engine import Call, Engine


class BreakerOpen(Exception):
    """The breaker refused the call: `result` is what the model (or the caller) acts on."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.get("reason") or result["status"])
        self.result = result


class Guard:
    def __init__(
        self,
        engine: Engine,
        key: str,
        *,
        agent: str,
        lease: float,
        tool: str | None = None,
        deadline_seconds: float = 30.0,
        classifier: Classifier = default_classifier,
    ) -> None:
        self.engine = engine
        self.key = key
        self.agent = agent
        self.lease = lease
        self.tool = tool or key
        self.deadline_seconds = deadline_seconds
        self.classifier = classifier
        self._calls: contextvars.ContextVar[tuple[Call, ...]] = contextvars.ContextVar(
            f"guard:{key}", default=()
        )

    def __repr__(self) -> str:
        return f"Guard({self.key!r}, agent={self.agent!r})"

    # -- sync ------------------------------------------------------------------------------

    def __enter__(self) -> Call:
        call = self._ticket()
        self._admitted(call, self.engine.admit(call, self.lease))
        return call

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        call, outcome, fault, status = self._outcome(error)
        self.engine.complete(call, outcome, fault=fault, agent_status=status)

    # -- async -----------------------------------------------------------------------------

    async def __aenter__(self) -> Call:
        call = self._ticket()
        self._admitted(call, await self.engine.admit_async(call, self.lease))
        return call

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        call, outcome, fault, status = self._outcome(error)
        await self.engine.complete_async(call, outcome, fault=fault, agent_status=status)

    # -- the one body of both --------------------------------------------------------------

    def _ticket(self) -> Call:
        return self.engine.new_call(
            self.key, self.agent, self.key.partition("@")[0], self.tool, self.deadline_seconds
        )

    def _admitted(self, call: Call, admission: Admission) -> None:
        if not admission.allowed:
            raise BreakerOpen(self._refusal(admission))
        call.attempts = 1
        self._calls.set((*self._calls.get(), call))

    def _outcome(self, error: BaseException | None) -> tuple[Call, Outcome, str, str]:
        calls = self._calls.get()
        self._calls.set(calls[:-1])
        call = calls[-1]
        if error is None:
            return call, SUCCESS, "ok", "ok"
        outcome = self.classifier(None, error)
        status = "tool_error" if outcome.counted else outcome.cls.value
        return call, outcome, network_fault(error), status

    def _refusal(self, admission: Admission) -> ToolResult:
        breaker = self.engine.breaker(self.key)
        reason = results.open_reason(self.key, breaker.count, breaker.last_failure_detail)
        return results.denied(self.tool, admission, reason, ())
