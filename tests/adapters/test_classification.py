"""One classification of what a tool raises or returns, for the harness's function tools and
every adapter: real SDKs' exceptions, and a 429's wait read as real APIs send it."""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from breakerdeck.engine.core.classify import (
    Attempt,
    function_attempt,
    rate_limit_wait,
    text_verdict,
)
from breakerdeck.engine.outcomes import OutcomeClass

NOW = 1_767_225_600.0
REQUEST = httpx.Request("POST", "https://api.openai.test/v1/responses")


def classified(error: Exception, *, worked: bool = False) -> Attempt:
    return function_attempt(
        None,
        error,
        schema=None,
        deadline=30.0,
        credential_worked=lambda: worked,
        now_wall=lambda: NOW,
    )


def status_error(status: int, **headers: str) -> openai.APIStatusError:
    response = httpx.Response(status, headers=headers, request=REQUEST)
    return openai.APIStatusError("upstream said no", response=response, body=None)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"Retry-After": "9", "x-ratelimit-reset-requests": "1s"}, 9.0),
        ({"Retry-After": "Thu, 01 Jan 2026 00:00:20 GMT"}, 20.0),
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),
        ({"anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:05Z"}, 5.0),
        ({"retry-after-ms": "nan"}, None),
        ({"x-ratelimit-reset-requests": "soon"}, None),
        ({}, None),
    ],
)
def test_a_429s_wait_is_read_in_the_order_real_apis_send_it(
    headers: dict[str, str], wait: float | None
) -> None:
    assert rate_limit_wait(headers, NOW) == wait


def test_an_sdks_connection_error_counts_and_is_worth_a_retry() -> None:
    attempt = classified(openai.APIConnectionError(request=REQUEST))
    assert (attempt.outcome.cls, attempt.outcome.counted, attempt.retry) == (
        OutcomeClass.UPSTREAM_FAILURE,
        True,
        True,
    )


def test_an_sdks_5xx_counts() -> None:
    assert classified(status_error(503)).outcome.counted


def test_an_sdks_400_is_the_callers_to_fix_and_never_counts() -> None:
    outcome = classified(status_error(400)).outcome
    assert (outcome.cls, outcome.counted) == (OutcomeClass.CALLER_ERROR, False)


def test_an_sdks_429_is_waited_out_uncounted_when_the_wait_fits_the_deadline() -> None:
    attempt = classified(status_error(429, **{"retry-after-ms": "2000"}))
    assert (attempt.outcome.counted, attempt.retry, attempt.wait) == (False, True, 2.0)


def test_an_sdks_429_longer_than_the_deadline_counts_at_once() -> None:
    attempt = classified(status_error(429, **{"x-ratelimit-reset-tokens": "1m30s"}))
    assert (attempt.outcome.counted, attempt.retry) == (True, False)


def test_a_401_on_a_credential_that_worked_is_a_revocation() -> None:
    outcome = classified(status_error(401), worked=True).outcome
    assert outcome.cls is OutcomeClass.CREDENTIAL_REVOKED


def test_a_permission_error_is_a_denial_never_counted() -> None:
    outcome = classified(PermissionError("not yours")).outcome
    assert (outcome.cls, outcome.counted) == (OutcomeClass.PERMISSION_DENIED, False)


def test_any_other_exception_is_the_tools_own_raised_again_and_never_counted() -> None:
    bug = ZeroDivisionError("division by zero")
    attempt = classified(bug)
    assert (attempt.raised, attempt.outcome.counted) == (bug, False)


@pytest.mark.parametrize(
    ("text", "cls", "counted"),
    [
        ("ConnectError: [Errno 111] Connection refused", OutcomeClass.UPSTREAM_FAILURE, True),
        ("Error code: 503 - {'error': 'overloaded'}", OutcomeClass.UPSTREAM_FAILURE, True),
        (
            "Client error '404 Not Found' for url 'https://crm.test/c/1'",
            OutcomeClass.CALLER_ERROR,
            False,
        ),
        ("HTTP 403: forbidden", OutcomeClass.PERMISSION_DENIED, False),
    ],
)
def test_a_failure_known_only_as_text_is_read_for_what_it_names(
    text: str, cls: OutcomeClass, counted: bool
) -> None:
    verdict = text_verdict(text, deadline=30.0, credential_worked=lambda: False)
    assert verdict is not None
    assert (verdict.outcome.cls, verdict.outcome.counted) == (cls, counted)


def test_text_naming_nothing_the_policy_reads_has_no_verdict() -> None:
    assert text_verdict("Exit code 1", deadline=math.inf, credential_worked=lambda: False) is None
