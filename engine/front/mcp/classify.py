"""What one `tools/call` attempt against an upstream MCP server was (DESIGN's table).

Pure functions: an attempt ends with a result, an exception, or an HTTP status read from the
wire, and becomes a `Verdict`: the `tool` policy's outcome, whether the host gets the
upstream's result unchanged, and whether another attempt is allowed. A retry is allowed only
where the upstream certainly did not receive the call (no process, no connection, a 429, an
expired session) or the tool says a second run is harmless (`idempotentHint`, `readOnlyHint`):
MCP has no idempotency key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from breakerdeck.engine.core.classify import StatusWords, tool_status
from breakerdeck.engine.front.mcp.stdio import RESULT_TOO_LARGE
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.text import printable

#: JSON-RPC errors that say the caller must fix the request: never counted.
CALLER_CODES = frozenset({types.INVALID_PARAMS, types.METHOD_NOT_FOUND, types.INVALID_REQUEST})


@dataclass(frozen=True, slots=True)
class Verdict:
    """One attempt, classified. `relay`: the host gets the upstream's result as it came."""

    outcome: Outcome
    fault: str
    relay: bool = False
    retry: bool = False
    wait: float | None = None
    platform_status: int | None = None
    #: The upstream's session expired (HTTP 404): start a new one and send again, uncounted.
    resend: bool = False


@dataclass(frozen=True, slots=True)
class WireStatus:
    """An HTTP answer to one attempt's POST, as the wire had it (not the SDK's error mapping)."""

    status: int
    retry_after: str | None = None
    had_session: bool = False


class StartFailed(Exception):
    """The upstream could not be reached at all: nothing was sent, so a retry is always safe.
    `exited`: a stdio server's process started and ended before its handshake was done."""

    def __init__(self, message: str, *, exited: bool = False) -> None:
        super().__init__(message)
        self.exited = exited


class AttemptTimedOut(Exception):
    """No answer within the attempt's deadline (extended by progress)."""


class ResultTooLarge(Exception):
    pass


def may_repeat(tool: types.Tool | None) -> bool:
    """A second run of this tool is harmless, as its own annotations say."""
    hints = tool.annotations if tool is not None else None
    return bool(hints and (hints.idempotent_hint or hints.read_only_hint))


def counted(cls: OutcomeClass, detail: str, retry_after: float | None = None) -> Outcome:
    return Outcome(cls, counted=True, retry_after=retry_after, detail=detail)


def of_result(
    result: types.CallToolResult | types.InputRequiredResult,
    *,
    repeatable: bool,
    count_is_error: Sequence[re.Pattern[str]],
) -> Verdict:
    """A result that arrived: success, the tool's own no, or its vendor's outage."""
    if isinstance(result, types.InputRequiredResult):
        neutral = Outcome(OutcomeClass.PENDING_APPROVAL, detail="the tool asks for input")
        return Verdict(neutral, "input_required", relay=True)
    if not result.is_error:
        return Verdict(SUCCESS, "ok", relay=True)
    text = result_text(result)
    if any(pattern.search(text) for pattern in count_is_error):
        detail = f"the tool reported its own vendor failing: {printable(text[:200])}"
        outcome = counted(OutcomeClass.UPSTREAM_FAILURE, detail)
        return Verdict(outcome, "is_error", relay=True, retry=repeatable)
    said_no = Outcome(
        OutcomeClass.UPSTREAM_ERROR, detail=f"the tool answered isError: {printable(text[:200])}"
    )
    return Verdict(said_no, "is_error", relay=True)


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def of_error(
    error: BaseException,
    *,
    repeatable: bool,
    deadline: float,
    wire: WireStatus | None,
    credential_worked: bool,
    now_wall: float,
) -> Verdict:
    """An attempt that raised; an HTTP status seen on the wire decides before the SDK's code."""
    if wire is not None and wire.status >= 400:
        return of_status(wire, repeatable, deadline, credential_worked, now_wall)
    if isinstance(error, StartFailed):
        if error.exited:
            detail = f"the server exited before it answered: {printable(str(error))}"
            return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "exited", retry=True)
        detail = f"the server could not be reached: {printable(str(error))}"
        return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "refused", retry=True)
    if isinstance(error, AttemptTimedOut):
        detail = f"no answer within {deadline:g} s"
        return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "timeout", retry=repeatable)
    if isinstance(error, ResultTooLarge | ValidationError):
        detail = f"the result is not a valid CallToolResult: {_short(error)}"
        return Verdict(
            counted(OutcomeClass.MALFORMED_OUTPUT, detail), "malformed", retry=repeatable
        )
    if isinstance(error, RuntimeError) and "structured content" in str(error):
        detail = f"the result fails the tool's outputSchema: {_short(error)}"
        return Verdict(
            counted(OutcomeClass.MALFORMED_OUTPUT, detail), "malformed", retry=repeatable
        )
    if isinstance(error, MCPError):
        return _of_code(error, repeatable, deadline)
    detail = f"the connection failed: {_short(error)}"
    return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "reset", retry=repeatable)


def _of_code(error: MCPError, repeatable: bool, deadline: float) -> Verdict:
    code = error.code
    if code == RESULT_TOO_LARGE:
        detail = f"the result is not a valid CallToolResult: {_short(error)}"
        return Verdict(
            counted(OutcomeClass.MALFORMED_OUTPUT, detail), "malformed", retry=repeatable
        )
    if code == types.CONNECTION_CLOSED:
        detail = "the server closed the connection or exited mid-call"
        return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "closed", retry=repeatable)
    if code == types.REQUEST_TIMEOUT:
        detail = f"no answer within {deadline:g} s"
        return Verdict(counted(OutcomeClass.UPSTREAM_FAILURE, detail), "timeout", retry=repeatable)
    if code == types.INTERNAL_ERROR:
        detail = f"the server failed (JSON-RPC {code}): {_short(error)}"
        return Verdict(
            counted(OutcomeClass.UPSTREAM_FAILURE, detail), "internal_error", retry=repeatable
        )
    fix = f"the server refused the request (JSON-RPC {code}): {_short(error)}"
    return Verdict(Outcome(OutcomeClass.CALLER_ERROR, detail=fix), f"jsonrpc_{code}")


_SERVER = StatusWords(upstream="the server", forbidden="the server refused access (403)")


def of_status(
    wire: WireStatus, repeatable: bool, deadline: float, credential_worked: bool, now_wall: float
) -> Verdict:
    """An HTTP error status on the attempt's POST, by the `tool` policy's rules (the one
    `tool_status`), after the one rule of MCP's own: a 404 on an expired session."""
    status = wire.status
    if status == 404 and wire.had_session:
        expired = Outcome(OutcomeClass.CALLER_ERROR, detail="the server's session expired (404)")
        return Verdict(expired, "session_expired", resend=True, platform_status=404)
    verdict = tool_status(
        status,
        wire.retry_after,
        deadline=deadline,
        credential_worked=credential_worked,
        now_wall=now_wall,
        words=_SERVER,
        refused=f"the server refused the request (HTTP {status})",
        repeatable=repeatable,
    )
    return Verdict(
        verdict.outcome,
        f"http_{status}",
        retry=verdict.retry,
        wait=verdict.wait,
        platform_status=status,
    )


def _short(error: BaseException) -> str:
    """An error's first line, escaped: an upstream's message reaches the model's `reason`,
    the `Unavailable` line and log lines (DESIGN: text from outside is never shown raw)."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return printable(text[:300])
