"""Failure classification, in one place per policy.

An HTTP exchange (or an exception instead of one) becomes an `Outcome` whose class the design
names and whose `counted` says whether that class moves a counter under the policy. Tools that
are not plain HTTP bring their own `Classifier` with the same contract.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import errno
import math
import re
import socket
import ssl
import time
from collections.abc import Callable, Mapping
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
    #: A function tool's own error (not the backend's): raised again once the call is
    #: completed, uncounted, so the framework or the caller handles it as without us.
    raised: BaseException | None = None


#: The attempt of every plain success (a function tool's value taken as it is, `Tool.plain`),
#: shared: the value is kept by the call's budget (`RetryBudget.data`), not on an attempt made
#: for each call (that constructor was one call in seventeen of `Harness.guard`'s). Its own
#: `data` is always None.
PLAIN_SUCCESS = Attempt(SUCCESS, "ok")


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


def rate_limit_wait(headers: Mapping[str, str], now_wall: float) -> float | None:
    """Seconds a 429 says to wait, read as real APIs send it, in this order: `retry-after-ms`,
    `Retry-After` (seconds or an HTTP date), then the largest of `x-ratelimit-reset-requests`
    and `-tokens` (OpenAI's durations, `6m0s`) and of `anthropic-ratelimit-*-reset`
    (Anthropic's RFC 3339 timestamps). None when none of them is there or readable.

    The first family present decides: a server that sends `retry-after-ms` means it, and the
    reset headers describe windows, of which the call must outwait the longest."""
    lowered = {name.lower(): value for name, value in headers.items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return _bounded(milliseconds / 1000)
    wait = parse_retry_after(lowered.get("retry-after"), now_wall)
    if wait is not None:
        return wait
    resets = [
        _duration(lowered.get(name))
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
    ]
    resets += [
        _timestamp(value, now_wall)
        for name, value in lowered.items()
        if name.startswith("anthropic-ratelimit-") and name.endswith("-reset")
    ]
    known = [seconds for seconds in resets if seconds is not None]
    return _bounded(max(known)) if known else None


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return None if math.isnan(number) else number


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(value: str | None) -> float | None:
    """A Go-style duration (`6m0s`, `1.5s`, `20ms`), as OpenAI's reset headers send it."""
    if value is None:
        return None
    text = value.strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _timestamp(value: str, now_wall: float) -> float | None:
    """An RFC 3339 timestamp (Anthropic's resets) as seconds from now."""
    try:
        when = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp() - now_wall


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
    verdict = status_verdict(
        status,
        rate_limit_wait(response.headers, now_wall) if status == 429 else None,
        deadline=deadline,
        credential_worked=credential_worked,
        words=BACKEND_WORDS,
        refused=_error_text(response) if status < 500 else "",
    )
    return Attempt(verdict.outcome, fault, status, retry=verdict.retry, wait=verdict.wait)


@dataclass(frozen=True, slots=True)
class StatusWords:
    """How a door names what answered, in the details the model reads."""

    upstream: str
    forbidden: str


BACKEND_WORDS = StatusWords(upstream="the backend", forbidden="forbidden (403)")


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
    """`status_verdict` for a door that has the Retry-After header's text alone (the MCP
    proxy's HTTP upstreams)."""
    return status_verdict(
        status,
        parse_retry_after(retry_after, now_wall) if status == 429 else None,
        deadline=deadline,
        credential_worked=credential_worked,
        words=words,
        refused=refused,
        repeatable=repeatable,
    )


def status_verdict(
    status: int,
    wait: float | None,
    *,
    deadline: float,
    credential_worked: bool,
    words: StatusWords,
    refused: str,
    repeatable: bool = True,
) -> StatusVerdict:
    """The `tool` policy's rules for an HTTP status that is not a 2xx, written once for every
    door that sees one (the harness's HTTP and function tools, the adapters, the MCP proxy's
    HTTP upstreams): a 429's wait (`rate_limit_wait`) against the deadline, 5xx counted, 401 by
    whether the credential ever worked, 403 a permission denial, any other status a caller
    error (`refused` says what to fix). `repeatable`: whether a 5xx may be retried (an MCP
    call without an idempotency key only when its tool says it is safe)."""
    if status == 429:
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


# -- what a function tool raised or returned -------------------------------------------------
#
# One classification for the harness's function tools and every framework adapter
# (`breakerdeck.adapters`). Libraries the engine does not depend on (aiohttp, `requests`, the
# `openai` and `anthropic` SDKs) are recognised by their exception classes' names, never
# imported.

#: Exceptions that say the arguments were wrong: the caller's to fix, never counted.
ARGUMENT_ERRORS: tuple[type[BaseException], ...] = (ValidationError,)

_CONNECTION_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ETIMEDOUT,
        errno.EPIPE,
    }
)
_TRANSPORT = (
    TimeoutError,
    ConnectionError,
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)
#: (top-level module, class name) of the transport errors of libraries not imported here.
_TRANSPORT_NAMES = frozenset(
    {
        ("openai", "APIConnectionError"),
        ("anthropic", "APIConnectionError"),
        ("requests", "ConnectionError"),
        ("requests", "Timeout"),
        ("aiohttp", "ClientConnectionError"),
        ("aiohttp", "ServerTimeoutError"),
    }
)
#: ... and of their errors that carry an HTTP status.
_STATUS_NAMES = frozenset(
    {
        ("openai", "APIStatusError"),
        ("anthropic", "APIStatusError"),
        ("requests", "HTTPError"),
        ("aiohttp", "ClientResponseError"),
    }
)


def function_attempt(
    value: Any,
    error: BaseException | None,
    *,
    schema: type[BaseModel] | None,
    deadline: float,
    credential_worked: Callable[[], bool],
    now_wall: Callable[[], float],
    arguments: tuple[type[BaseException], ...] = (),
) -> Attempt:
    """A function tool's return value or exception under the `tool` policy.

    Counted (and worth a retry): transport errors, timeouts, a 5xx carried by the exception,
    a result failing `schema`. By `status_verdict`'s rules: 401, 403, 429 and other 4xx.
    Never counted: argument validation errors (`ARGUMENT_ERRORS` and the framework's own,
    `arguments`) and permission errors. Anything else is the tool's own error: uncounted, and
    `raised` so the door raises it again once the call is completed. `credential_worked` and
    `now_wall` are asked only when a 401 or a dated 429 needs them."""
    if error is None:
        return result_attempt(value, schema)
    verdict = error_verdict(
        error,
        deadline=deadline,
        credential_worked=credential_worked,
        now_wall=now_wall,
        arguments=arguments,
    )
    if verdict is None:
        return Attempt(own_error(error), "error", raised=error)
    status = _status_of(error)
    fault = network_fault(error) if status is None else f"http_{status[0]}"
    outcome = verdict.outcome
    return Attempt(outcome, fault, None, None, verdict.retry, verdict.wait)


def result_attempt(value: Any, schema: type[BaseModel] | None) -> Attempt:
    """A value the tool returned: a success, unless it fails the tool's schema (counted)."""
    if schema is not None:
        try:
            if isinstance(value, str | bytes):
                schema.model_validate_json(value)
            else:
                schema.model_validate(value)
        except ValidationError as failed:
            detail = f"the result fails {schema.__name__}: {failed.error_count()} errors"
            outcome = Outcome(OutcomeClass.MALFORMED_OUTPUT, counted=True, detail=detail)
            return Attempt(outcome, "malformed", retry=True)
    return Attempt(SUCCESS, "ok", data=value)


def error_verdict(
    error: BaseException,
    *,
    deadline: float,
    credential_worked: Callable[[], bool],
    now_wall: Callable[[], float],
    arguments: tuple[type[BaseException], ...] = (),
) -> StatusVerdict | None:
    """The policy's verdict on an exception, or None: the tool's own error."""
    if isinstance(error, PermissionError):
        return StatusVerdict(Outcome(OutcomeClass.PERMISSION_DENIED, detail=said(error)))
    if isinstance(error, ARGUMENT_ERRORS + arguments):
        detail = f"arguments rejected: {said(error)}"
        return StatusVerdict(Outcome(OutcomeClass.CALLER_ERROR, detail=detail))
    status = _status_of(error)
    if status is not None:
        code, headers = status
        return status_verdict(
            code,
            rate_limit_wait(headers, now_wall()) if code == 429 else None,
            deadline=deadline,
            credential_worked=code == 401 and credential_worked(),
            words=BACKEND_WORDS,
            refused=f"HTTP {code}: {said(error)}" if code < 500 else "",
        )
    if _is_transport(error):
        outcome = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=said(error))
        return StatusVerdict(outcome, retry=True)
    return None


def own_error(error: BaseException) -> Outcome:
    """The outcome of a call that ended in the tool's own error: uncounted (like the MCP
    proxy's cancelled call, a caller error), so a probe slot is freed and nothing moves."""
    detail = f"the tool raised {said(error)}: its own error, not the backend's"
    return Outcome(OutcomeClass.CALLER_ERROR, detail=detail)


def said(error: BaseException) -> str:
    """An exception as it put itself: its class, and its message when it has one. (A deadline
    the door cut is worded by `describe_error`; a function's own TimeoutError says this.)"""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def deadline_attempt(deadline: float) -> Attempt:
    """An attempt the door cut at its deadline: counted, worth a retry."""
    detail = f"timed out after {deadline:g} s"
    return Attempt(
        Outcome(OutcomeClass.UPSTREAM_FAILURE, True, None, detail), "timeout", retry=True
    )


def _named(error: BaseException, names: frozenset[tuple[str, str]]) -> bool:
    return any((k.__module__.partition(".")[0], k.__name__) in names for k in type(error).__mro__)


def _is_transport(error: BaseException) -> bool:
    if isinstance(error, _TRANSPORT):
        return True
    if isinstance(error, OSError) and (
        error.errno in _CONNECTION_ERRNOS or isinstance(error, socket.gaierror | ssl.SSLError)
    ):
        return True
    return _named(error, _TRANSPORT_NAMES)


def _status_of(error: BaseException) -> tuple[int, Mapping[str, str]] | None:
    """The HTTP status (and headers) an exception carries: httpx's HTTPStatusError, and the
    status errors of the SDKs and clients named in `_STATUS_NAMES`."""
    if isinstance(error, httpx.HTTPStatusError):
        return error.response.status_code, error.response.headers
    if not _named(error, _STATUS_NAMES):
        return None
    response = getattr(error, "response", None)
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    if status is None and response is not None:
        status = getattr(response, "status_code", None)
    headers = getattr(response, "headers", None) or getattr(error, "headers", None) or {}
    return (status, headers) if isinstance(status, int) else None


#: How a transport failure or a status reads when a framework hands over only the text
#: (Claude's `PostToolUseFailure`).
_TEXT_STATUS = re.compile(
    r"\bHTTP(?:/[\d.]+)?[ :]+([1-5]\d\d)\b|\bstatus(?:[ _]code)?[ :=]+([1-5]\d\d)\b"
    r"|\bError code: ([1-5]\d\d)\b|(?:Client|Server) error '([1-5]\d\d) ",
    re.IGNORECASE,
)
_TEXT_TRANSPORT = re.compile(
    r"ConnectError|ConnectionRefused|Connection refused|ECONNREFUSED|ConnectionReset"
    r"|Connection reset|ECONNRESET|ConnectTimeout|ReadTimeout|TimeoutError|timed out"
    r"|Name or service not known|getaddrinfo|SSLError|certificate verify failed"
    r"|RemoteProtocolError|Server disconnected|Network is unreachable",
    re.IGNORECASE,
)


def text_verdict(
    text: str, *, deadline: float, credential_worked: Callable[[], bool]
) -> StatusVerdict | None:
    """The verdict on a failure known only as text (`ConnectError: [Errno 111] Connection
    refused`, an HTTP status in the message), or None: nothing the policy counts or refuses
    (a command's exit code, a missing file), left to the tool."""
    found = _TEXT_STATUS.search(text)
    if found is not None:
        code = int(next(group for group in found.groups() if group))
        if code >= 400:
            return status_verdict(
                code,
                None,
                deadline=deadline,
                credential_worked=code == 401 and credential_worked(),
                words=BACKEND_WORDS,
                refused=text[:200] if code < 500 else "",
            )
    if _TEXT_TRANSPORT.search(text) is not None:
        outcome = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=text[:200])
        return StatusVerdict(outcome, retry=True)
    return None


def default_classifier(value: Any, error: BaseException | None) -> Outcome:
    """The function tools' classification (`function_attempt`) as a `Classifier`, for code that
    takes one (`Engine.guard`): with no deadline to compare a 429's wait with, and a 401 read
    as a credential that never worked."""
    return function_attempt(
        value,
        error,
        schema=None,
        deadline=math.inf,
        credential_worked=_never,
        now_wall=time.time,
    ).outcome


def _never() -> bool:
    return False
