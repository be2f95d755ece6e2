"""Failure classification, in one place per policy.

An HTTP exchange (or an exception instead of one) becomes an `Outcome` whose class the design
names and whose `counted` says whether that class moves a counter under the policy. Tools that
are not plain HTTP bring their own `Classifier` with the same contract.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass

#: Maps a function tool's return value or exception to an outcome.
Classifier = Callable[[Any, BaseException | None], Outcome]

FAULT_EXTENSION = "breakerdeck.fault"

#: The longest Retry-After read as given; a longer one (or an unreadably large one) is this.
RETRY_AFTER_LIMIT_SECONDS = 86_400.0


@dataclass(slots=True)
class Attempt:
    """One request's verdict: the outcome, what the wire did, and whether to try again.

    Not frozen: a frozen dataclass sets each field through `object.__setattr__`, which cost
    more than the rest of a function tool's attempt. Nothing changes one after it is made."""

    outcome: Outcome
    fault: str
    platform_status: int | None = None
    data: Any = None
    retry: bool = False
    wait: float | None = None


def parse_retry_after(value: str | None, now_wall: float) -> float | None:
    """Seconds to wait from a Retry-After header; None when absent or unreadable.

    The number comes from outside, so it is read with bounds: a date in the past is 0, and
    anything beyond a day (hundreds of digits, a date in the year 9999) is a day, longer than
    any deadline, so it is still a counted `rate_limited` whose cooldown the policy caps.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return _bounded(float(text))  # hundreds of digits read as inf, never an OverflowError
    when = _http_date(text)
    if when is None:
        return None
    return _bounded(when.timestamp() - now_wall)


def _http_date(text: str) -> datetime.datetime | None:
    """Any of HTTP's three date forms (RFC 9110 section 5.6.7): IMF-fixdate, RFC 850, asctime.

    HTTP dates are always UTC, so a form that names no zone (asctime) is read as UTC.
    """
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC)


def _bounded(seconds: float) -> float:
    return min(max(seconds, 0.0), RETRY_AFTER_LIMIT_SECONDS)


def fault_of(request: httpx.Request | None, fallback: str) -> str:
    """What the wire did: the fixture says so on the request; a real backend leaves a guess."""
    if request is not None:
        label = request.extensions.get(FAULT_EXTENSION)
        if isinstance(label, str):
            return label
    return fallback


def network_fault(error: BaseException) -> str:
    if isinstance(error, httpx.TimeoutException | asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(error, httpx.ConnectError):
        return "refused"
    if isinstance(error, httpx.ReadError | httpx.RemoteProtocolError):
        return "reset"
    return "error"


def describe_error(error: BaseException, deadline: float) -> str:
    if isinstance(error, httpx.TimeoutException | asyncio.TimeoutError | TimeoutError):
        return f"timed out after {deadline:g} s"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def tool_error_attempt(
    error: BaseException, request: httpx.Request | None, deadline: float
) -> Attempt:
    """A request that got no response: connection, TLS, DNS or timeout. Counted, retried."""
    outcome = Outcome(
        OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=describe_error(error, deadline)
    )
    return Attempt(outcome, fault_of(request, network_fault(error)), retry=True)


def tool_response_attempt(
    response: httpx.Response,
    *,
    schema: type[BaseModel] | None,
    deadline: float,
    credential_worked: bool,
    now_wall: float,
) -> Attempt:
    """Classify a response under the `tool` policy."""
    status = response.status_code
    fault = fault_of(response.request, "ok" if status < 300 else f"http_{status}")
    if 200 <= status < 300:
        return _success(response, schema, fault)
    verdict = tool_status(
        status,
        response.headers.get("retry-after"),
        deadline=deadline,
        credential_worked=credential_worked,
        now_wall=now_wall,
        words=_BACKEND,
        refused=_error_text(response) if status < 500 else "",
    )
    return Attempt(verdict.outcome, fault, status, retry=verdict.retry, wait=verdict.wait)


@dataclass(frozen=True, slots=True)
class StatusWords:
    """How a door names what answered, in the details the model reads."""

    upstream: str
    forbidden: str


_BACKEND = StatusWords(upstream="the backend", forbidden="forbidden (403)")


@dataclass(frozen=True, slots=True)
class StatusVerdict:
    outcome: Outcome
    retry: bool = False
    wait: float | None = None


def tool_status(
    status: int,
    retry_after: str | None,
    *,
    deadline: float,
    credential_worked: bool,
    now_wall: float,
    words: StatusWords,
    refused: str,
    repeatable: bool = True,
) -> StatusVerdict:
    """The `tool` policy's rules for an HTTP status that is not a 2xx, written once for every
    door that sees one (the harness's HTTP tools, the MCP proxy's HTTP upstreams): a 429's
    Retry-After against the deadline, 5xx counted, 401 by whether the credential ever worked,
    403 a permission denial, any other status a caller error (`refused` says what to fix).
    `repeatable`: whether a 5xx may be retried (an MCP call without an idempotency key only
    when its tool says it is safe)."""
    if status == 429:
        wait = parse_retry_after(retry_after, now_wall)
        if wait is not None and wait > deadline:
            detail = f"rate limited for {wait:g} s, longer than the {deadline:g} s deadline"
            return StatusVerdict(Outcome(OutcomeClass.RATE_LIMITED, True, wait, detail))
        neutral = Outcome(OutcomeClass.RATE_LIMITED, False, wait, "rate limited")
        return StatusVerdict(neutral, retry=True, wait=wait)
    if status >= 500:
        detail = f"HTTP {status} from {words.upstream}"
        return StatusVerdict(
            Outcome(OutcomeClass.UPSTREAM_FAILURE, True, None, detail), retry=repeatable
        )
    if status == 401:
        if credential_worked:
            detail = "the credential worked before and is now rejected: revoked"
            return StatusVerdict(Outcome(OutcomeClass.CREDENTIAL_REVOKED, detail=detail))
        detail = "the credential was rejected (401) and has never worked: check the credential"
        return StatusVerdict(Outcome(OutcomeClass.CALLER_ERROR, detail=detail))
    if status == 403:
        return StatusVerdict(Outcome(OutcomeClass.PERMISSION_DENIED, detail=words.forbidden))
    return StatusVerdict(Outcome(OutcomeClass.CALLER_ERROR, detail=refused))


def response_json(response: httpx.Response) -> Any:
    """The body as JSON, or ValueError: also for nesting too deep to decode, which raised
    RecursionError out of the call after admission, holding a probe slot it never returned."""
    try:
        return response.json()
    except RecursionError:
        raise ValueError("the body is JSON nested too deeply to read") from None


def _success(response: httpx.Response, schema: type[BaseModel] | None, fault: str) -> Attempt:
    try:
        body = response_json(response)
    except ValueError:
        if schema is None:
            return Attempt(SUCCESS, fault, response.status_code, data=response.text)
        return _malformed(response, "the response is not JSON")
    if schema is None:
        return Attempt(SUCCESS, fault, response.status_code, data=body)
    try:
        data = schema.model_validate(body).model_dump(mode="json")
    except ValidationError as error:
        return _malformed(
            response, f"the response fails {schema.__name__}: {error.error_count()} errors"
        )
    return Attempt(SUCCESS, fault, response.status_code, data=data)


def _malformed(response: httpx.Response, detail: str) -> Attempt:
    outcome = Outcome(OutcomeClass.MALFORMED_OUTPUT, counted=True, detail=detail)
    return Attempt(
        outcome, fault_of(response.request, "malformed"), response.status_code, retry=True
    )


def _error_text(response: httpx.Response) -> str:
    try:
        body = response_json(response)
    except ValueError:
        body = response.text[:200]
    return f"HTTP {response.status_code}: {body}"


def agent_outcome_for_response(status: int) -> Outcome:
    """Under `agent`, any answer from the platform completed the call: relayed, never counted.
    Only a 2xx is a success; a 1xx-3xx is neither a success nor a failure (DESIGN)."""
    if 200 <= status < 300:
        return SUCCESS
    if status < 400:
        return Outcome(OutcomeClass.PLATFORM_ANSWER, detail=f"platform answered {status}")
    return Outcome(OutcomeClass.UPSTREAM_ERROR, detail=f"platform answered {status}")


def default_classifier(value: Any, error: BaseException | None) -> Outcome:
    """For function tools: an exception is an upstream failure, a return value a success."""
    if error is None:
        return SUCCESS
    return Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=describe_error(error, 0))
