"""Tools that are not plain HTTP bring their own classifier: an SDK's exceptions and results
map to the design's classes, and the breaker treats them like any HTTP outcome."""

import asyncio
from typing import Any

import httpx
import pytest

from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass


class SdkConnectionError(Exception):
    pass


class SdkBadRequest(Exception):
    pass


def crm_classifier(value: Any, error: BaseException | None) -> Outcome:
    if isinstance(error, SdkConnectionError):
        return Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=str(error))
    if isinstance(error, SdkBadRequest):
        return Outcome(OutcomeClass.CALLER_ERROR, detail=str(error))
    if error is not None:
        raise error
    if isinstance(value, dict) and value.get("error") == "forbidden":
        return Outcome(OutcomeClass.PERMISSION_DENIED, detail="the SDK says forbidden")
    return SUCCESS


class FakeSdk:
    """Counts invocations: for a function tool, the call is the wire."""

    def __init__(self) -> None:
        self.calls = 0
        self.raises: Exception | None = None
        self.returns: Any = {"id": 7}

    async def lookup(self, args: Any) -> Any:
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        return self.returns


def sdk_harness(engine) -> tuple[Harness, FakeSdk]:
    sdk = FakeSdk()
    harness = Harness(engine)
    harness.register(
        Tool("crm_lookup", backend="crm-sdk", function=sdk.lookup, classifier=crm_classifier)
    )
    return harness, sdk


async def test_an_sdk_connection_error_counts_and_trips_after_three_calls_of_one_attempt(
    tool_engine,
):
    harness, sdk = sdk_harness(tool_engine)
    sdk.raises = SdkConnectionError("crm unreachable")
    for _ in range(3):
        assert (await harness.call_tool("ava", "crm_lookup"))["status"] == "tool_error"
    assert sdk.calls == 3  # a function tool not marked idempotent is never run twice
    result = await harness.call_tool("ava", "crm_lookup")
    assert result["status"] == "circuit_open" and "crm unreachable" in result["reason"]
    assert sdk.calls == 3


async def test_a_function_tool_marked_idempotent_keeps_its_retry_budget(tool_engine):
    sdk = FakeSdk()
    sdk.raises = SdkConnectionError("crm unreachable")
    harness = Harness(tool_engine)
    harness.register(
        Tool(
            "crm_lookup",
            backend="crm-sdk",
            function=sdk.lookup,
            classifier=crm_classifier,
            idempotent=True,
        )
    )
    for _ in range(3):
        assert (await harness.call_tool("ava", "crm_lookup"))["attempts"] == 2
    assert sdk.calls == 6


async def test_an_sdk_bad_request_is_a_caller_error_never_retried_or_counted(tool_engine):
    harness, sdk = sdk_harness(tool_engine)
    sdk.raises = SdkBadRequest("name is required")
    for _ in range(10):
        result = await harness.call_tool("ava", "crm_lookup")
        assert result == {
            "status": "invalid_request",
            "tool": "crm_lookup",
            "error": "name is required",
        }
    assert sdk.calls == 10
    assert tool_engine.view("crm-sdk@default").count == 0


async def test_a_result_the_classifier_reads_as_forbidden_is_a_permission_denial(tool_engine):
    harness, sdk = sdk_harness(tool_engine)
    sdk.returns = {"error": "forbidden"}
    assert (await harness.call_tool("ava", "crm_lookup"))["status"] == "permission_denied"
    assert tool_engine.view("crm-sdk@default").count == 0


async def test_a_success_returns_the_sdk_value_as_data(tool_engine):
    harness, _ = sdk_harness(tool_engine)
    assert await harness.call_tool("ava", "crm_lookup") == {
        "status": "ok",
        "tool": "crm_lookup",
        "data": {"id": 7},
    }


def test_the_sync_guard_uses_the_same_classifier(tool_engine):
    harness, _ = sdk_harness(tool_engine)
    invocations = []

    def lookup(name: str) -> dict:
        invocations.append(name)
        raise SdkConnectionError("crm unreachable")

    guarded = harness.guard("crm_lookup", sleep=lambda seconds: None)(lookup)
    for _ in range(3):
        assert guarded("ada")["status"] == "tool_error"
    assert guarded("ada")["status"] == "circuit_open"
    assert len(invocations) == 3  # a function tool not marked idempotent: one run a call


def test_the_guard_wraps_a_function_no_tool_was_registered_for(tool_engine):
    harness = Harness(tool_engine)
    invocations = []

    def lookup(name: str) -> dict:
        invocations.append(name)
        raise ConnectionRefusedError("crm unreachable")

    guarded = harness.guard("lookup", sleep=lambda seconds: None)(lookup)
    for _ in range(3):
        assert guarded("ada")["status"] == "tool_error"
    assert guarded("ada")["status"] == "circuit_open"
    assert len(invocations) == 3
    assert tool_engine.view("lookup@default").state == "open"


def test_the_guard_takes_its_backend_budget_and_classifier_from_a_tool(tool_engine):
    harness = Harness(tool_engine)
    sdk_error: list[Exception] = [SdkBadRequest("name is required")]

    def lookup() -> dict:
        raise sdk_error[0]

    tool = Tool("lookup", backend="crm-sdk", attempts=1, classifier=crm_classifier)
    guarded = harness.guard(tool, sleep=lambda seconds: None)(lookup)
    assert guarded()["status"] == "invalid_request"
    sdk_error[0] = SdkConnectionError("crm unreachable")
    for _ in range(3):
        assert guarded()["attempts"] == 1
    assert tool_engine.view("crm-sdk@default").state == "open"
    assert "lookup" not in harness.tools


async def test_a_function_tools_own_timeout_error_is_reported_as_what_it_said(tool_engine):
    async def slow_report(args: Any) -> Any:
        raise TimeoutError("the report service gave up after 90 s")

    harness = Harness(tool_engine)
    harness.register(Tool("report", backend="reports", function=slow_report))
    result = await harness.call_tool("ava", "report")
    assert result["reason"] == "TimeoutError: the report service gave up after 90 s"


async def test_a_function_tools_own_bug_is_raised_again_and_never_counted(tool_engine):
    async def buggy(args: Any) -> Any:
        raise KeyError("customer_id")

    harness = Harness(tool_engine)
    harness.register(Tool("lookup", backend="crm", function=buggy))
    for _ in range(5):
        with pytest.raises(KeyError):
            await harness.call_tool("ava", "lookup")
    view = tool_engine.view("crm@default")
    assert (view.state, view.count) == ("closed", 0)


async def test_a_function_tools_http_429_waits_out_retry_after_ms_then_retries(tool_engine):
    sent = []

    async def rate_limited(args: Any) -> Any:
        sent.append(asyncio.get_running_loop().time())
        request = httpx.Request("POST", "https://api.test/v1")
        response = httpx.Response(429, headers={"retry-after-ms": "2500"}, request=request)
        raise httpx.HTTPStatusError("429", request=request, response=response)

    harness = Harness(tool_engine)
    harness.register(Tool("ask", backend="api", function=rate_limited, idempotent=True))
    result = await harness.call_tool("ava", "ask")
    assert result == {"status": "rate_limited", "tool": "ask", "retry_after_ms": 2500}
    assert sent[1] - sent[0] == 2.5
    assert tool_engine.view("api@default").count == 0


def test_the_guard_retries_a_function_whose_tool_is_marked_idempotent(tool_engine):
    harness = Harness(tool_engine)
    invocations = []

    def lookup(name: str) -> dict:
        invocations.append(name)
        raise ConnectionRefusedError("crm unreachable")

    settings = Tool("lookup", backend="crm", attempts=2, idempotent=True)
    guarded = harness.guard(settings, sleep=lambda seconds: None)(lookup)
    for _ in range(3):
        assert guarded("ada")["status"] == "tool_error"
    assert len(invocations) == 6
