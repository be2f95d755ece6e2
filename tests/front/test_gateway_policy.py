"""The `agent` policy on HTTP, counted at the fixture platform's wire."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.results import HALT_INSTRUCTIONS
from breakerdeck.engine.shared import SharedStore
from breakerdeck.fixtures.faults import REFUSED, SLOW, Fault
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import (
    ROTATING_CREDENTIAL,
    Rig,
    StartRig,
    body,
    credential_file,
    write_config,
)
from tests.redis_server import RedisServer


@pytest.fixture
def payments() -> Iterator[tuple[FakePlatform, PlatformServer]]:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}, hang_seconds=2) as server:
        yield platform, server


def _config(tmp_path: Path, server: PlatformServer, platform_extra: str = "") -> Path:
    cred = credential_file(tmp_path)
    return write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"billing": {"payments": cred}, "other": {"payments": cred}},
        platform_extra=platform_extra,
    )


async def trip_and_cool_down(rig: Rig, platform: FakePlatform) -> None:
    """billing trips on five refused calls, and its 300 s cooldown passes on the rig's clock:
    the next call is the probe."""
    platform.set_fault(REFUSED)
    for _ in range(5):
        await rig.call("billing", "/p/payments/x")
    rig.clock.advance(300)


def _assert_halted(response, reason: str, state: str, cause: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 403
    halt = body(response)["halt"]
    assert body(response) == {
        "error": "agent_halted",
        "reason": reason,
        "halt": {
            "state": state,
            "recoverable_by": "time",
            "cause": cause,
            "retry_after_seconds": halt["retry_after_seconds"],
            "instructions": HALT_INSTRUCTIONS,
        },
    }
    assert isinstance(halt["retry_after_seconds"], int) and halt["retry_after_seconds"] >= 5
    assert response.headers["retry-after"] == str(halt["retry_after_seconds"])
    assert response.headers["x-breakerdeck-call"].startswith("call-")


async def test_five_upstream_failures_trip_and_the_sixth_call_never_reaches_the_platform(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server))
    platform.set_fault(REFUSED)
    for _ in range(5):
        failed = await rig.call("billing", "/p/payments/v1/charges")
        assert failed.status_code == 502
        assert body(failed)["error"] == "upstream_failure"
    halted = await rig.call("billing", "/p/payments/v1/charges")
    _assert_halted(halted, "circuit_breaker_open", "breaker_open", "breaker_upstream_failure")
    assert body(halted)["halt"]["retry_after_seconds"] == 300
    assert platform.requests == 5


async def test_three_auth_failures_trip_with_auth_as_the_cause(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server))
    platform.credential_valid = False
    for _ in range(3):
        rejected = await rig.call("billing", "/p/payments/x")
        assert rejected.status_code == 401
        assert body(rejected)["error"] == "reauth_failed"
    halted = await rig.call("billing", "/p/payments/x")
    _assert_halted(halted, "circuit_breaker_open", "breaker_open", "breaker_auth_failure")
    # Each call: one attempt. The re-read gave back the credential just rejected, which is a
    # failed refresh (DESIGN): no retry is sent with it.
    assert platform.requests == 3


@pytest.mark.parametrize("status", [500, 503, 404, 422, 429])
async def test_platform_error_answers_are_relayed_as_they_came_and_never_counted(
    status: int,
    tmp_path: Path,
    payments: tuple[FakePlatform, PlatformServer],
    start_gateway: StartRig,
) -> None:
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server))
    platform.set_fault(Fault.http(status))
    for _ in range(8):
        answer = await rig.call("billing", "/p/payments/x")
        assert answer.status_code == status
        assert body(answer)["status"] == status
    assert platform.requests == 8
    assert rig.count("billing") == 0


async def test_a_refreshed_credential_is_retried_once_and_the_success_relayed(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    config = write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"billing": {"payments": ROTATING_CREDENTIAL}},
    )
    rig = await start_gateway(config)
    platform.set_fault(Fault.http(401), requests=1)
    answer = await rig.call("billing", "/p/payments/x", method="POST", json={"amount": 5})
    assert answer.status_code == 200
    assert platform.requests == 2
    assert rig.count("billing") == 0


async def test_after_the_cooldown_fifty_concurrent_calls_send_exactly_one_probe(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server), deadline=30.0)
    await trip_and_cool_down(rig, platform)
    # The probe is held on the wire until the other forty-nine have been answered.
    platform.set_fault(Fault(SLOW.kind, delay=60))
    calls = [asyncio.create_task(rig.call("billing", "/p/payments/x")) for _ in range(50)]
    async with asyncio.timeout(30):
        while sum(call.done() for call in calls) < 49:
            await asyncio.sleep(0.02)
    server.release()
    answers = await asyncio.gather(*calls)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [403] * 49
    for refused in (a for a in answers if a.status_code == 403):
        _assert_halted(refused, "probe_in_flight", "breaker_half_open", "breaker_upstream_failure")
    assert platform.requests == 5 + 1


@pytest.fixture
async def billing_at_probe(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> Rig:
    """A gateway whose calls wait for billing's probe, billing tripped and its cooldown passed.
    The deadline and the waiters' bound are far longer than a loaded machine takes for the
    probe."""
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server, "probe_wait_seconds = 30"), deadline=10.0)
    await trip_and_cool_down(rig, platform)
    return rig


async def test_with_probe_wait_the_waiters_proceed_after_a_successful_probe(
    payments: tuple[FakePlatform, PlatformServer], billing_at_probe: Rig
) -> None:
    platform, rig = payments[0], billing_at_probe
    platform.set_fault(Fault(SLOW.kind, delay=0.2))
    answers = await asyncio.gather(*(rig.call("billing", "/p/payments/x") for _ in range(20)))
    assert [a.status_code for a in answers] == [200] * 20
    assert platform.requests == 5 + 20


async def test_with_probe_wait_the_waiters_are_refused_after_a_failed_probe(
    payments: tuple[FakePlatform, PlatformServer], billing_at_probe: Rig
) -> None:
    platform, rig = payments[0], billing_at_probe
    answers = await asyncio.gather(*(rig.call("billing", "/p/payments/x") for _ in range(20)))
    assert sorted(a.status_code for a in answers) == [403] * 19 + [502]
    reasons = {body(a)["reason"] for a in answers if a.status_code == 403}
    assert reasons == {"circuit_breaker_open"}
    assert platform.requests == 5 + 1


async def test_one_agents_trip_leaves_another_agent_on_the_same_platform_alone(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    rig = await start_gateway(_config(tmp_path, server))
    platform.set_fault(REFUSED, requests=5)
    for _ in range(5):
        await rig.call("billing", "/p/payments/x")
    assert (await rig.call("billing", "/p/payments/x")).status_code == 403
    assert (await rig.call("other", "/p/payments/x")).status_code == 200


async def test_a_platform_with_a_token_url_gets_the_refresh_token_grant(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    refresh = tmp_path / "refresh"
    refresh.write_text("the-refresh-token\n")
    refresh.chmod(0o600)
    entry = f'{{ file = "{refresh}", refresh_token = {{ file = "{refresh}" }} }}'
    config = write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"billing": {"payments": entry}},
        platform_extra=f'token_url = "{server.url("payments")}/oauth/token"',
    )
    rig = await start_gateway(config)
    platform.set_fault(Fault.http(401), requests=1)
    answer = await rig.call("billing", "/p/payments/x")
    assert answer.status_code == 200
    assert (platform.refreshes, platform.requests) == (1, 2)
    assert rig.app.vault._held[("billing", "payments")].value == "payments-refreshed-1"


async def test_with_probe_wait_waiters_on_another_replica_proceed_when_its_probe_succeeds(
    tmp_path: Path,
    payments: tuple[FakePlatform, PlatformServer],
    start_gateway: StartRig,
    session_redis: RedisServer,
) -> None:
    platform, server = payments
    # Waiters would wait out 20 s unless the other replica's probe ending wakes them.
    config = _config(tmp_path, server, "probe_wait_seconds = 20")
    clock = ManualClock()
    a, b = [
        await start_gateway(config, 25.0, clock=clock, shared=SharedStore(session_redis.url))
        for _ in range(2)
    ]
    await trip_and_cool_down(a, platform)
    platform.set_fault(Fault(SLOW.kind, delay=0.5))
    probe = asyncio.create_task(a.call("billing", "/p/payments/x"))

    def heard_of_the_probe() -> bool:
        """b has heard of the trip and of a's probe: until then b's calls are no waiters (and
        before the trip, asking b for the agent's breaker raises UnknownKey)."""
        known = b.engine.keys()
        return "billing" in known and b.engine.breaker("billing").probe_id is not None

    while not heard_of_the_probe():
        await asyncio.sleep(0.01)
    waiters = [b.call("billing", "/p/payments/x") for _ in range(5)]
    answers = await asyncio.wait_for(asyncio.gather(probe, *waiters), timeout=10)
    assert [a.status_code for a in answers] == [200] * 6
    assert platform.requests == 5 + 6
