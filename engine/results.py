"""The answers a model (under `tool`) or an agent (under `agent`) gets: structured, never prose.

Built as plain dicts because a fast-fail must stay cheap; the field names are a public
interface (docs/results.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from breakerdeck.engine.core.breaker import Admission, DenyReason, Hold
from breakerdeck.engine.events import iso_utc
from breakerdeck.engine.outcomes import Outcome, OutcomeClass

ToolResult = dict[str, Any]

HALT_INSTRUCTIONS = (
    "Pause calls to this platform. Tell the user that it is failing and that calls are halted "
    "for now. Wait retry_after_seconds, then retry one call as a probe; if it succeeds, carry "
    "on as normal."
)


def _ms(seconds: float) -> int:
    return math.ceil(seconds * 1000)


def denied(
    tool: str, admission: Admission, reason: str, alternatives: tuple[str, ...]
) -> ToolResult:
    if admission.reason is DenyReason.PROBE_IN_FLIGHT:
        return {
            "status": "probe_in_flight",
            "tool": tool,
            "retry_after_ms": _ms(admission.retry_after),
        }
    if admission.reason is DenyReason.HELD:  # `reason`: the hold's words (`holds.held_words`)
        return {
            "status": "circuit_open",
            "tool": tool,
            "held": True,
            "reason": reason,
            "retry_after_ms": _ms(admission.retry_after),
            "alternatives": list(alternatives),
        }
    return circuit_open(tool, reason, admission.retry_after, alternatives)


def open_reason(key: str, count: int, last_failure: str | None) -> str:
    """The plain words a `circuit_open` result carries: how many failures, the last one (its
    own full stop kept, never doubled: an exception's message often ends in one)."""
    last = (last_failure or "unknown").removesuffix(".")
    return (
        f"{key} failed {count} times in a row; the last failure: {last}. "
        "Calls are paused until the cooldown ends."
    )


def circuit_open(
    tool: str, reason: str, retry_after: float, alternatives: tuple[str, ...]
) -> ToolResult:
    return {
        "status": "circuit_open",
        "tool": tool,
        "reason": reason,
        "retry_after_ms": _ms(retry_after),
        "alternatives": list(alternatives),
    }


def tool_error(tool: str, reason: str, attempts: int, retry_after: float | None) -> ToolResult:
    result: ToolResult = {
        "status": "tool_error",
        "tool": tool,
        "reason": reason,
        "attempts": attempts,
    }
    if retry_after is not None:
        result["retry_after_ms"] = _ms(retry_after)
    return result


def invalid_request(tool: str, fix: str) -> ToolResult:
    return {"status": "invalid_request", "tool": tool, "error": fix}


def permission_denied(tool: str, reason: str) -> ToolResult:
    return {"status": "permission_denied", "tool": tool, "reason": reason}


def rate_limited(tool: str, retry_after: float | None) -> ToolResult:
    result: ToolResult = {"status": "rate_limited", "tool": tool}
    if retry_after is not None:
        result["retry_after_ms"] = _ms(retry_after)
    return result


def pending_approval(tool: str, reason: str) -> ToolResult:
    return {"status": "pending_approval", "tool": tool, "reason": reason}


def refused(tool: str, reason: str) -> ToolResult:
    return {"status": "refused", "tool": tool, "reason": reason}


def credential_revoked(tool: str, credential: str) -> ToolResult:
    return {
        "status": "credential_revoked",
        "tool": tool,
        "credential": credential,
        "instructions": (
            "Stop calling this tool and tell the user that its credential was revoked and must "
            "be reconnected; calls stay refused until an operator marks it fixed."
        ),
    }


@dataclass(frozen=True, slots=True)
class GatewayResponse:
    """What a credential-holding gateway sends an agent under the `agent` policy."""

    status: int
    body: dict[str, Any]


_HALT_STATE = {
    DenyReason.OPEN: "breaker_open",
    DenyReason.PROBE_IN_FLIGHT: "breaker_half_open",
    DenyReason.HELD: "breaker_held",
}
_HALT_CAUSE = {
    OutcomeClass.AUTH_FAILURE: "breaker_auth_failure",
    OutcomeClass.UPSTREAM_FAILURE: "breaker_upstream_failure",
}


def agent_halted(admission: Admission) -> GatewayResponse:
    assert admission.reason is not None
    hold = admission.hold
    if admission.reason is DenyReason.HELD and hold is not None:
        return _held(hold, admission.retry_after)
    cause = _HALT_CAUSE.get(admission.cause, "breaker_upstream_failure")  # type: ignore[arg-type]
    if hold is not None:  # the probe of the half-open a hold ended in
        cause = "operator_hold"
    halt = {
        "state": _HALT_STATE[admission.reason],
        "recoverable_by": "time",
        "cause": cause,
        "retry_after_seconds": max(5, math.ceil(admission.retry_after)),
        "instructions": HALT_INSTRUCTIONS,
    }
    body = {"error": "agent_halted", "reason": str(admission.reason), "halt": halt}
    return GatewayResponse(403, body)


def _held(hold: Hold, left: float) -> GatewayResponse:
    """403 `circuit_breaker_held` (DESIGN, "Operator control"): who can lift it, until when."""
    until = iso_utc(hold.until_wall)
    halt = {
        "state": "breaker_held",
        "recoverable_by": "operator",
        "cause": "operator_hold",
        "until": until,
        "retry_after_seconds": max(5, math.ceil(left)),
        "instructions": (
            f"An operator paused calls to this platform until {until}, because: {hold.reason}. "
            "Do not retry or work around it; tell the user."
        ),
    }
    body = {"error": "agent_halted", "reason": "circuit_breaker_held", "halt": halt}
    return GatewayResponse(403, body)


def reauth_failed(platform: str, detail: str) -> GatewayResponse:
    body = {
        "error": "reauth_failed",
        "platform": platform,
        "message": f"{platform} rejected the stored credential and the token refresh {detail}; "
        "the user must reconnect this platform.",
    }
    return GatewayResponse(401, body)


def upstream_failure(platform: str, detail: str) -> GatewayResponse:
    body = {"error": "upstream_failure", "platform": platform, "message": detail}
    return GatewayResponse(502, body)


#: The `Retry-After` (and body field) of a `gateway_busy` answer: a slot is waited on for a
#: second, so a second later is when trying again makes sense.
BUSY_RETRY_SECONDS = 1


def gateway_busy(limit: str) -> GatewayResponse:
    body = {"error": "gateway_busy", "limit": limit, "retry_after_seconds": BUSY_RETRY_SECONDS}
    return GatewayResponse(503, body)


def gateway_stopping(detail: str) -> GatewayResponse:
    return GatewayResponse(503, {"error": "gateway_stopping", "message": detail})


def tool_result(
    tool: str, outcome: Outcome, data: Any, attempts: int, credential: str
) -> ToolResult:
    """The structured result of a `tool` call for any outcome, refused before the breaker or
    answered after."""
    cls = outcome.cls
    if cls is _SUCCESS:  # every healthy call's answer: made here, with no call of its own
        return {"status": "ok", "tool": tool, "data": data}
    if outcome.counted:
        return tool_error(tool, outcome.detail, attempts, outcome.retry_after)
    if cls is OutcomeClass.RATE_LIMITED:
        return rate_limited(tool, outcome.retry_after)
    if cls is OutcomeClass.PERMISSION_DENIED:
        return permission_denied(tool, outcome.detail)
    if cls is OutcomeClass.PENDING_APPROVAL:
        return pending_approval(tool, outcome.detail)
    if cls is OutcomeClass.REFUSED_PRE_CALL:
        return refused(tool, outcome.detail)
    if cls is OutcomeClass.CREDENTIAL_REVOKED:
        return credential_revoked(tool, credential)
    return invalid_request(tool, outcome.detail)


_SUCCESS = OutcomeClass.SUCCESS
