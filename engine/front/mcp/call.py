"""One `tools/call` from the host on the one call path (`engine.callpath`): the checks before
the breaker, an attempt against the upstream, and the budget that decides the rest.

`ToolCalls` is the MCP proxy's shell: it refuses before the breaker (arguments that fail the
tool's schema, a revoked credential), makes one attempt (with the resend after an expired
session, counted as a second attempt) and words a refusal. `McpBudget` is the `tool` policy's
retry rule (`Retries`, the harness's too) with the proxy's answers: the upstream's result
relayed unchanged, or the policy's object as a `CallToolResult` with `isError: true`.
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from mcp.server.context import ServerRequestContext

from breakerdeck.engine import results
from breakerdeck.engine.calls.callpath import CallPath, Completion, Retries
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.engine import Call
from breakerdeck.engine.front.mcp import classify
from breakerdeck.engine.front.mcp.breakers import Breakers, FrontClock
from breakerdeck.engine.front.mcp.upstream import Upstream
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.results import ToolResult
from breakerdeck.engine.text import printable

#: What the host gets for a `tools/call`.
Answer = types.CallToolResult | types.InputRequiredResult
#: The agent named on cards and in the trace is at most this long.
MAX_AGENT_CHARS = 64
#: A call in flight when the drain ended (a second SIGTERM): the door's own answer.
STOPPING = "the proxy is shutting down and its drain ended before the tool answered; call again"
UNKNOWN_AGENT = "unknown"


@dataclass(frozen=True, slots=True)
class Sent:
    """One attempt (its resend after an expired session included): the verdict, and the
    upstream's result when one came."""

    verdict: classify.Verdict
    result: Answer | None = None

    @property
    def retry(self) -> bool:
        return self.verdict.retry

    @property
    def wait(self) -> float | None:
        return self.verdict.wait


class McpBudget(Retries[Sent]):
    """One `tools/call`'s budget: the shared retry rule, with what the proxy answers and
    writes. It also holds what the call's attempts send (the tool, its arguments, the host's
    request for progress)."""

    __slots__ = (
        "arguments",
        "called",
        "ctx",
        "repeatable",
        "result",
        "stopping",
        "tool",
        "upstream",
    )

    def __init__(
        self,
        breakers: Breakers,
        call: Call,
        ctx: ServerRequestContext,
        upstream: Upstream,
        tool: types.Tool,
        arguments: dict[str, Any] | None,
    ) -> None:
        settings = upstream.config
        super().__init__(breakers.engine, call, settings.attempts, settings.backoff_seconds)
        self.ctx = ctx
        self.upstream = upstream
        self.tool = tool
        #: The name the host called (`<server>__<tool>`), which every answer carries.
        self.called = call.tool
        self.arguments = arguments
        self.repeatable = classify.may_repeat(tool)
        self.result: ToolResult | None = None
        #: Set when the drain ends the call: its cancellation is the proxy's, not the host's.
        self.stopping = False

    def completion(self) -> Completion:
        """The line's outcome and status; the proxy's own answer is made here, once."""
        tried = self.tried
        assert tried is not None
        verdict = tried.verdict
        outcome = verdict.outcome
        if self.stopped:
            return outcome, verdict.fault, "circuit_open", None, None
        if verdict.relay:
            status = _relayed_status(outcome)
        else:
            credential_id = self.upstream.config.credential_id
            result = self.result = results.tool_result(
                self.called, outcome, None, self.call.attempts, credential_id
            )
            status = result["status"]
        return outcome, verdict.fault, status, None, verdict.platform_status

    def answer(self) -> Answer:
        tried = self.tried
        assert tried is not None
        if self.stopped:
            return own_result(self.circuit_open(self.called))
        if self.result is not None:
            return own_result(self.result)
        assert tried.result is not None  # a relayed verdict comes with its result
        return tried.result

    def abandoned(self) -> Completion | None:
        """A call the drain ended (a second SIGTERM) is the proxy's to answer, not the host's
        abandonment: uncounted, answered `refused` (`ToolCalls.end_all`). None: the host went
        away, completed as at every door."""
        if not self.stopping:
            return None
        stopped = Outcome(OutcomeClass.REFUSED_PRE_CALL, detail=STOPPING)
        return stopped, "cancelled", "refused", None, None


class ToolCalls(CallPath[McpBudget, Sent, Answer]):
    """The proxy's `tools/call`s, on the one call path."""

    def __init__(self, breakers: Breakers, clock: FrontClock) -> None:
        self.engine = breakers.engine
        self.breakers = breakers
        self.clock = clock
        self._validators: dict[tuple[str, str], Any] = {}
        self._attempt_ids = itertools.count(1)
        #: The calls on the path now, each with the scope that ends it at the drain's end.
        self._running: dict[anyio.CancelScope, McpBudget] = {}

    async def call(
        self,
        ctx: ServerRequestContext,
        upstream: Upstream,
        tool: types.Tool,
        called: str,
        arguments: dict[str, Any] | None,
    ) -> Answer:
        settings = upstream.config
        key = self.breakers.key(upstream.name, settings.credential_id)
        call = self.engine.enter(
            key=key,
            agent=agent_of(ctx),
            platform=upstream.name,
            tool=called,
            deadline_seconds=settings.deadline_seconds,
        )
        refusal = self._precheck(upstream, tool, called, arguments, call)
        if refusal is not None:
            outcome, result = refusal
            return self._refused(call, outcome, result["status"], own_result(result))
        budget = McpBudget(self.breakers, call, ctx, upstream, tool, arguments)
        with anyio.CancelScope() as scope:
            self._running[scope] = budget
            try:
                return await self._run(budget, settings.lease, settings.probe_wait_seconds)
            finally:
                del self._running[scope]
        # Only the drain's end cancels this scope: the call is completed (`cancelled`).
        return own_result(results.refused(called, STOPPING))

    def end_all(self) -> None:
        """The drain ended (a second SIGTERM): every call in flight stops where it is, is
        completed neutral with its line and audit row, and answers `refused`."""
        for scope, budget in self._running.items():
            budget.stopping = True
            scope.cancel()

    def _precheck(
        self,
        upstream: Upstream,
        tool: types.Tool,
        called: str,
        arguments: dict[str, Any] | None,
        call: Call,
    ) -> tuple[Outcome, ToolResult] | None:
        """Refusals before the breaker: arguments that are not an object or fail the schema, a
        revoked credential."""
        if arguments is not None and not isinstance(arguments, dict):
            detail = f"arguments rejected: must be an object, not {type(arguments).__name__}"
            return Outcome(OutcomeClass.CALLER_ERROR, detail=detail), results.invalid_request(
                called, detail
            )
        validator = self._validator(upstream.name, tool)
        if validator is not None:
            errors = sorted(validator.iter_errors(arguments or {}), key=lambda e: e.path)
            if errors:
                fix = "; ".join(_schema_error(e) for e in errors[:5])
                detail = f"arguments rejected: {fix}"
                outcome = Outcome(OutcomeClass.CALLER_ERROR, detail=detail)
                return outcome, results.invalid_request(called, detail)
        if call.credential_revoked:
            outcome = Outcome(OutcomeClass.CREDENTIAL_REVOKED, detail="credential revoked")
            return outcome, results.credential_revoked(called, upstream.config.credential_id)
        return None

    def _validator(self, server: str, tool: types.Tool) -> Any:
        """The tool's input schema, compiled once; None when the upstream's schema is unusable."""
        key = (server, tool.name)
        if key not in self._validators:
            try:
                cls = jsonschema.validators.validator_for(tool.input_schema)
                cls.check_schema(tool.input_schema)
                self._validators[key] = cls(tool.input_schema)
            except (jsonschema.SchemaError, TypeError):
                self._validators[key] = None
        return self._validators[key]

    def _denied(self, budget: McpBudget, admission: Admission) -> Answer:
        reason = self.engine.open_reason(budget.call.key)
        return own_result(results.denied(budget.called, admission, reason, ()))

    def _real(self, seconds: float) -> float:
        return self.clock.real(seconds)

    def _completed(self, call: Call, outcome: Outcome) -> None:
        super()._completed(call, outcome)
        self.breakers.count(call, outcome)

    def _refused(self, call: Call, outcome: Outcome, status: int | str, answer: Answer) -> Answer:
        """Counted as every call with a line is, the gateway's caller errors too."""
        self.breakers.count(call, outcome)
        return super()._refused(call, outcome, status, answer)

    async def _attempt(self, budget: McpBudget) -> Sent:
        """One attempt; an expired session is started again and the call resent at once, as a
        second attempt of the same round (DESIGN: re-initialise once and resend)."""
        budget.call.attempts += 1
        tried = await self._send(budget)
        if tried.verdict.resend:
            budget.call.attempts += 1
            budget.upstream.drop()
            tried = await self._send(budget)
        return tried

    async def _send(self, budget: McpBudget) -> Sent:
        upstream, deadline = budget.upstream, budget.upstream.config.deadline_seconds
        attempt_id = f"attempt-{next(self._attempt_ids)}"
        try:
            result = await upstream.call(
                budget.tool.name,
                budget.arguments,
                deadline_real=self.clock.real(deadline),
                relay=functools.partial(self._progress, budget),
                attempt_id=attempt_id,
            )
        except Exception as error:
            verdict = classify.of_error(
                error,
                repeatable=budget.repeatable,
                deadline=deadline,
                wire=upstream.wire.pop(attempt_id, None),
                credential_worked=self.engine.credential_worked(budget.call.key),
                now_wall=self.clock.wall(),
            )
            return Sent(verdict)
        upstream.wire.pop(attempt_id, None)
        verdict = classify.of_result(
            result, repeatable=budget.repeatable, count_is_error=upstream.count_is_error
        )
        return Sent(verdict, result)

    async def _progress(
        self, budget: McpBudget, done: float, total: float | None, message: str | None
    ) -> None:
        """Relay the upstream's progress to the host; each one extends a probe's lease."""
        self.engine.extend_probe(budget.call, budget.upstream.config.deadline_seconds)
        await budget.ctx.session.report_progress(done, total, message)


def _relayed_status(outcome: Outcome) -> str:
    """The status a relayed result is written with in the call's line."""
    if outcome.is_success:
        return "ok"
    return "tool_error" if outcome.counted else "is_error"


def own_result(result: ToolResult) -> types.CallToolResult:
    """The proxy's own answer: the policy's object as structured content and as JSON text."""
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=result,
        is_error=True,
    )


def agent_of(ctx: ServerRequestContext) -> str:
    """The handshake's `clientInfo.name`, else the request's `_meta` client info, else unknown."""
    params = ctx.session.client_params
    name: Any = params.client_info.name if params is not None else None
    if not name and ctx.meta is not None:
        info = dict(ctx.meta).get(types.CLIENT_INFO_META_KEY)
        name = info.get("name") if isinstance(info, dict) else None
    if not isinstance(name, str) or not name.strip():
        return UNKNOWN_AGENT
    return printable(name.strip())[:MAX_AGENT_CHARS]


def _schema_error(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path) or "arguments"
    return f"{where}: {printable(error.message)[:200]}"
