"""The harness under the `tool` policy, counted at the fake platform's wire."""

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
from pydantic import BaseModel

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.results import open_reason
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform

TIMEOUT = Fault(FaultKind.TIMEOUT)
REFUSED = Fault(FaultKind.REFUSED)


async def test_a_dead_backend_takes_exactly_six_requests_then_nothing(harness, platform):
    platform.set_fault(REFUSED)
    statuses = [(await harness.call_tool("ava", "charge"))["status"] for _ in range(3)]
    assert statuses == ["tool_error"] * 3
    assert platform.requests == 6
    for _ in range(20):
        result = await harness.call_tool("ava", "charge")
        assert result["status"] == "circuit_open"
    assert platform.requests == 6


async def test_the_fourth_call_gets_circuit_open_with_reason_and_alternatives(harness, platform):
    platform.set_fault(TIMEOUT)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "circuit_open"
    assert result["tool"] == "charge"
    assert "3 times" in result["reason"] and "timed out after 30 s" in result["reason"]
    assert result["alternatives"] == ["queue_charge"]
    assert 0 < result["retry_after_ms"] <= 30_000


async def test_a_timeout_costs_its_deadline_in_simulated_time(harness, platform):
    platform.set_fault(TIMEOUT)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await harness.call_tool("ava", "charge")
    assert loop.time() - start == 61  # two 30 s attempts and one 1 s backoff


async def test_ten_400s_reach_the_backend_ten_times_and_never_trip(harness, platform):
    platform.set_fault(Fault.http(400))
    for _ in range(10):
        result = await harness.call_tool("ava", "charge")
        assert result["status"] == "invalid_request"
    assert platform.requests == 10
    assert harness.engine.view("payments@default").state == "closed"


async def test_tools_on_one_backend_share_a_breaker(harness, platform):
    platform.set_fault(REFUSED)
    await harness.call_tool("ava", "charge")
    await harness.call_tool("ava", "refund")
    await harness.call_tool("bo", "charge")
    assert (await harness.call_tool("bo", "refund"))["status"] == "circuit_open"
    assert harness.engine.view("payments@default").agents == ("ava", "bo")


async def test_one_tool_with_two_credentials_has_two_breakers(harness, platform):
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge", credential="cred-a")
    platform.set_fault(Fault(FaultKind.OK))
    assert (await harness.call_tool("ava", "charge", credential="cred-b"))["status"] == "ok"
    assert (await harness.call_tool("ava", "charge", credential="cred-a"))["status"] == (
        "circuit_open"
    )


async def test_after_30_s_one_probe_goes_out_and_its_success_closes(harness, platform):
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    platform.set_fault(Fault(FaultKind.OK))
    await asyncio.sleep(30)
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "ok"
    assert harness.engine.view("payments@default").state == "closed"


async def test_fifty_concurrent_calls_in_half_open_admit_exactly_one(harness, platform):
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    platform.set_fault(Fault(FaultKind.SLOW, delay=2.0))
    await asyncio.sleep(30)
    before = platform.requests
    results = await asyncio.gather(*(harness.call_tool("ava", "charge") for _ in range(50)))
    statuses = [r["status"] for r in results]
    assert statuses.count("ok") == 1
    assert statuses.count("probe_in_flight") == 49
    assert platform.requests - before == 1


async def test_a_failed_probe_against_a_dead_backend_costs_two_requests(harness, platform):
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    await asyncio.sleep(30)
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "tool_error"
    assert platform.requests == 8
    assert harness.engine.view("payments@default").cooldown == 60


async def test_a_retry_after_within_the_deadline_is_waited_out_and_never_counted(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="10"))
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(5):
        result = await harness.call_tool("ava", "charge")
        assert result == {"status": "rate_limited", "tool": "charge", "retry_after_ms": 10_000}
    assert loop.time() - start == 50
    assert harness.engine.view("payments@default").count == 0


async def test_a_retry_after_beyond_the_deadline_counts_at_once_and_opens_for_it(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="120"))
    for _ in range(3):
        result = await harness.call_tool("ava", "charge")
        assert result["status"] == "tool_error" and result["attempts"] == 1
    view = harness.engine.view("payments@default")
    assert view.state == "open" and view.cooldown == 120
    assert platform.requests == 3


async def test_a_garbage_retry_after_is_read_as_absent(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="soon-ish"))
    result = await harness.call_tool("ava", "charge")
    assert result == {"status": "rate_limited", "tool": "charge"}
    assert platform.requests == 2


async def test_malformed_output_is_a_counted_failure(harness, platform):
    platform.set_fault(Fault(FaultKind.MALFORMED))
    for _ in range(3):
        result = await harness.call_tool("ava", "charge")
        assert result["status"] == "tool_error"
    assert harness.engine.view("payments@default").trip_cause == "malformed_output"


async def test_a_403_is_a_permission_denial_and_never_counted(harness, platform):
    platform.set_fault(Fault.http(403))
    for _ in range(5):
        assert (await harness.call_tool("ava", "charge"))["status"] == "permission_denied"
    assert harness.engine.view("payments@default").count == 0


async def test_a_401_on_a_credential_that_never_worked_is_a_caller_error(harness, platform):
    platform.revoke_credential()
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "invalid_request"
    assert not harness.engine.credential_paused("payments@default")


async def test_a_401_on_a_credential_that_worked_pauses_it_until_marked_fixed(harness, platform):
    events = []
    harness.engine.subscribe(events.append)
    assert (await harness.call_tool("ava", "charge"))["status"] == "ok"
    platform.revoke_credential()
    assert (await harness.call_tool("ava", "charge"))["status"] == "credential_revoked"
    sent = platform.requests
    assert (await harness.call_tool("ava", "charge"))["status"] == "credential_revoked"
    assert platform.requests == sent
    platform.fix_credential()
    harness.engine.restore_credential("payments@default", actor="alice")
    assert (await harness.call_tool("ava", "charge"))["status"] == "ok"
    types = [e.type for e in events]
    assert types.count(ev.CREDENTIAL_REVOKED) == 1 and types.count(ev.CREDENTIAL_RESTORED) == 1
    assert harness.engine.view("payments@default").count == 0


async def test_an_entry_says_whether_its_keys_credential_was_revoked_when_it_entered(
    harness, platform
):
    engine = harness.engine
    await harness.call_tool("ava", "charge")
    platform.revoke_credential()
    await harness.call_tool("ava", "charge")
    assert engine.enter("payments@default", "ava", "payments", "charge", 30.0).credential_revoked
    engine.restore_credential("payments@default", actor="alice")
    entry = engine.enter("payments@default", "ava", "payments", "charge", 30.0)
    assert not entry.credential_revoked


async def test_a_call_whose_retry_finds_the_breaker_open_stops_with_circuit_open(harness, platform):
    platform.set_fault(REFUSED)
    await harness.call_tool("ava", "charge")
    await harness.call_tool("ava", "charge")
    # Two calls race: both fail their first attempt; the first to finish its budget trips,
    # so the other's retry is refused at the re-check.
    first, second = await asyncio.gather(
        harness.call_tool("ava", "charge"), harness.call_tool("bo", "charge")
    )
    assert {first["status"], second["status"]} == {"tool_error", "circuit_open"}


async def test_unknown_tool_is_an_invalid_request_naming_the_known_ones(harness: Harness):
    result = await harness.call_tool("ava", "chrage")
    assert result["status"] == "invalid_request"
    assert "charge" in result["error"]


async def test_each_call_line_counts_the_requests_the_fixture_saw(harness, platform: FakePlatform):
    lines = []
    harness.engine.subscribe(lambda e: lines.append(e) if e.type == ev.CALL_COMPLETED else None)
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    for line in lines:
        key = harness.engine.idempotency_key(line.fields["call_id"])
        assert line.fields["attempts"] == platform.requests_for(key) == 2
        assert line.fields["fault"] == "refused"


async def test_a_retry_refused_while_another_call_probes_says_when_to_come_back(harness, platform):
    harness.register(Tool("slow_charge", backend="payments", deadline_seconds=40))
    platform.set_fault(TIMEOUT)
    stuck = asyncio.create_task(harness.call_tool("ava", "slow_charge"))  # times out at t=40
    await asyncio.sleep(0.1)
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("bo", "charge")  # trips at about t=3; half-open at t=33
    await asyncio.sleep(34 - asyncio.get_running_loop().time())
    platform.set_fault(Fault(FaultKind.SLOW, delay=10.0))
    probe = asyncio.create_task(harness.call_tool("bo", "charge"))  # out until t=44

    result = await stuck  # its retry, at t=41, finds the probe out

    assert result["status"] == "circuit_open" and result["retry_after_ms"] == 5000
    assert (await probe)["status"] == "ok"


async def test_idempotency_keys_carry_the_process_instance(harness, platform: FakePlatform):
    """A restarted process numbers its calls from 1 again; its keys still never repeat."""
    await harness.call_tool("ava", "charge")
    (key,) = platform.keys_seen()
    instance, call_id = key.split(".")
    assert instance == harness.engine.instance
    assert len(instance) == 16
    assert call_id.startswith("call-")


def test_each_engine_has_its_own_instance():
    assert Engine(ToolPolicy()).instance != Engine(ToolPolicy()).instance


def completed_lines(engine: Engine) -> list:
    lines: list = []
    engine.subscribe(lambda e: lines.append(e) if e.type == ev.CALL_COMPLETED else None)
    return lines


async def test_a_retry_after_of_hundreds_of_digits_is_counted_as_a_day(harness, platform):
    """Read as given it overflowed a float and raised out of call_tool before the line."""
    lines = completed_lines(harness.engine)
    platform.set_fault(Fault.http(429, retry_after="9" * 310))
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "tool_error" and result["retry_after_ms"] == 86_400_000
    (line,) = lines
    assert line.fields["counted"] and line.fields["retry_after_seconds"] == 86_400


async def test_a_forty_digit_retry_after_reaches_the_model_as_a_day(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="1" + "0" * 39))
    result = await harness.call_tool("ava", "charge")
    assert result["retry_after_ms"] == 86_400_000


async def test_three_day_long_retry_afters_open_for_the_policy_cap(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="9" * 400))
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    view = harness.engine.view("payments@default")
    assert view.state == "open" and view.cooldown == 900


@pytest.mark.parametrize(
    "form",
    [
        "%a, %d %b %Y %H:%M:%S GMT",  # IMF-fixdate (RFC 1123)
        "%A, %d-%b-%y %H:%M:%S GMT",  # RFC 850
        "%a %b %e %H:%M:%S %Y",  # asctime: no zone, and HTTP dates are UTC
    ],
    ids=["imf_fixdate", "rfc850", "asctime"],
)
async def test_each_http_date_form_is_read_as_seconds_from_now(harness, platform, form):
    in_two_minutes = datetime.fromtimestamp(harness.engine.clock.wall() + 120, UTC)
    platform.set_fault(Fault.http(429, retry_after=in_two_minutes.strftime(form)))
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "tool_error" and result["retry_after_ms"] == 120_000


async def test_a_retry_after_date_in_the_past_is_retried_at_once_uncounted(harness, platform):
    platform.set_fault(Fault.http(429, retry_after="Sun Nov  6 08:49:37 1994"))
    start = asyncio.get_running_loop().time()
    result = await harness.call_tool("ava", "charge")
    assert result == {"status": "rate_limited", "tool": "charge", "retry_after_ms": 0}
    assert platform.requests == 2 and asyncio.get_running_loop().time() == start


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


UNENCODABLE = {
    "datetime": {"when": datetime(2026, 1, 1, tzinfo=UTC)},
    "nan": {"amount": float("nan")},
    "bytes": {"receipt": b"\x00"},
    "lone_surrogate": {"name": "\ud800"},
    "too_deep": {"items": nested(100_000)},
}


@pytest.mark.parametrize("args", UNENCODABLE.values(), ids=UNENCODABLE.keys())
async def test_arguments_that_cannot_be_sent_as_json_are_an_invalid_request(
    harness, platform, args
):
    lines = completed_lines(harness.engine)
    result = await harness.call_tool("ava", "charge", args)
    assert result["status"] == "invalid_request"
    assert "cannot be sent as JSON" in result["error"]
    assert platform.requests == 0
    (line,) = lines
    assert (line.fields["attempts"], line.fields["fault"]) == (0, "none")
    assert line.fields["admitted_as"] is None and not line.fields["counted"]


async def test_arguments_that_cannot_be_sent_never_take_the_probe_slot(harness, platform):
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    platform.set_fault(Fault(FaultKind.OK))
    await asyncio.sleep(30)
    refused = await harness.call_tool("ava", "charge", UNENCODABLE["datetime"])
    assert refused["status"] == "invalid_request"
    assert (await harness.call_tool("ava", "charge", {"amount": 5}))["status"] == "ok"
    assert harness.engine.view("payments@default").state == "closed"


@pytest.mark.parametrize(
    "setting",
    [
        {"deadline_seconds": float("nan")},
        {"deadline_seconds": float("inf")},
        {"backoff_seconds": float("nan")},
        {"backoff_seconds": -1.0},
    ],
    ids=["nan_deadline", "infinite_deadline", "nan_backoff", "negative_backoff"],
)
def test_a_tool_refuses_a_deadline_or_backoff_that_is_not_a_finite_time(setting):
    with pytest.raises(ValueError, match="finite"):
        Tool("charge", backend="payments", **setting)


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


class Charge(BaseModel):
    id: str


def answering(tool_engine: Engine, status: int, content: bytes) -> Harness:
    """A harness whose backend gives every request the same answer."""
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=content))
    client = httpx.AsyncClient(transport=transport, base_url="https://payments.test")
    harness = Harness(tool_engine, {"payments": client})
    harness.register(Tool("charge", backend="payments", response_schema=Charge))
    return harness


async def test_a_2xx_nested_too_deep_to_read_is_malformed_output(tool_engine):
    """Decoding it raised RecursionError out of the call, after admission."""
    lines = completed_lines(tool_engine)
    result = await answering(tool_engine, 200, DEEP_JSON).call_tool("ava", "charge")
    assert result["status"] == "tool_error" and result["attempts"] == 2
    (line,) = lines
    assert line.fields["outcome"] == "malformed_output" and line.fields["counted"]


async def test_a_4xx_nested_too_deep_to_read_is_still_an_invalid_request(tool_engine):
    result = await answering(tool_engine, 422, DEEP_JSON).call_tool("ava", "charge")
    assert result["status"] == "invalid_request"
    assert tool_engine.view("payments@default").count == 0


def test_a_refusals_reason_never_doubles_the_last_failures_full_stop():
    reason = open_reason("crm@default", 3, "Server disconnected without sending a response.")
    assert "a response. Calls are paused" in reason
    assert ".." not in reason
