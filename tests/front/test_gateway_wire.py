"""What the gateway sends and relays, recorded at a platform's wire: refusals, URLs, headers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.front.conftest import (
    ROTATING_CREDENTIAL,
    SHORT_DEADLINE,
    Rig,
    StartRig,
    auth,
    body,
    counted,
    credential_file,
    write_config,
)
from tests.front.upstream import Recorder


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


@pytest.fixture
async def evil() -> AsyncIterator[Recorder]:
    """Another host the agent would like to reach through the gateway."""
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


def _config(tmp_path: Path, platform: Recorder, evil: Recorder) -> Path:
    cred = credential_file(tmp_path)
    return write_config(
        tmp_path,
        {"payments": platform.url("/api"), "crm": evil.url("/crm")},
        {"billing": {"payments": cred}, "sales": {"crm": cred}},
        gateway="body_limit_bytes = 1000",
    )


@pytest.fixture
async def rig(tmp_path: Path, platform: Recorder, evil: Recorder, start_gateway: StartRig) -> Rig:
    started: Rig = await start_gateway(_config(tmp_path, platform, evil))
    return started


async def test_the_path_and_query_are_appended_to_base_urls_path(
    rig: Rig, platform: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/v1/charges?x=1&y=%20z")
    assert answer.status_code == 200
    assert platform.seen[0].target == "/api/v1/charges?x=1&y=%20z"


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/p/payments//evil.invalid/x", "/api//evil.invalid/x"),
        ("/p/payments/@evil.invalid/x", "/api/@evil.invalid/x"),
        ("/p/payments/%2F%2Fevil.invalid/x", "/api/%2F%2Fevil.invalid/x"),
        ("/p/payments/../../crm/secrets", "/api/crm/secrets"),
        ("/p/payments/%2e%2e/%2E%2E/crm", "/api/crm"),
        ("/p/payments/a/./b/../c", "/api/a/c"),
    ],
)
async def test_no_path_changes_the_platforms_scheme_host_or_port(
    path: str, target: str, rig: Rig, platform: Recorder, evil: Recorder
) -> None:
    raw = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-of-billing\r\n\r\n"
    status = await _raw_exchange(rig, raw.encode())
    assert status.startswith(b"HTTP/1.1 200")
    assert [seen.target for seen in platform.seen] == [target]
    assert platform.seen[0].header("host") == [f"127.0.0.1:{platform.port}"]
    assert evil.seen == []


async def test_an_absolute_form_target_never_picks_the_host(
    rig: Rig, platform: Recorder, evil: Recorder
) -> None:
    raw = (
        f"GET http://127.0.0.1:{evil.port}/p/payments/x HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer token-of-billing\r\n\r\n"
    ).encode()
    await _raw_exchange(rig, raw)
    assert evil.seen == []
    assert all(seen.target.startswith("/api/") for seen in platform.seen)


async def test_the_platform_sees_the_credential_and_never_the_agents_token_or_host(
    rig: Rig, platform: Recorder
) -> None:
    await rig.call("billing", "/p/payments/x", headers={"Host": "evil.invalid", "X-Mine": "kept"})
    seen = platform.seen[0]
    assert seen.header("authorization") == ["Bearer stored-credential"]
    assert seen.header("host") == [f"127.0.0.1:{platform.port}"]
    assert seen.header("x-mine") == ["kept"]


async def test_hop_by_hop_headers_are_dropped_both_ways(rig: Rig, platform: Recorder) -> None:
    answer = await rig.call(
        "billing",
        "/p/payments/x",
        headers={"Connection": "keep-alive, X-Private", "X-Private": "hop", "TE": "trailers"},
    )
    seen = platform.seen[0]
    assert seen.header("x-private") == [] and seen.header("te") == []
    assert "x-hop" not in answer.headers and "keep-alive" not in answer.headers


async def test_an_agents_idempotency_key_is_scoped_to_the_agent(
    rig: Rig, platform: Recorder
) -> None:
    await rig.call("billing", "/p/payments/x", headers={"Idempotency-Key": "order-1"})
    await rig.call("billing", "/p/payments/x")
    own, generated = (seen.header("idempotency-key") for seen in platform.seen)
    assert own == ["billing/order-1"]
    assert generated == [f"{rig.engine.instance}.call-000002"]


async def test_a_redirect_is_relayed_and_never_followed(
    rig: Rig, platform: Recorder, evil: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/redirect")
    assert answer.status_code == 302
    assert answer.headers["location"] == "http://evil.invalid/steal"
    assert len(platform.seen) == 1


async def test_every_answer_to_a_call_that_reached_the_breaker_names_the_call(
    rig: Rig, platform: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/status/404")
    assert answer.status_code == 404
    assert answer.headers["x-breakerdeck-call"] == "call-000001"


@pytest.mark.parametrize(
    ("headers", "path", "status", "error"),
    [
        ({}, "/p/payments/x", 401, "unauthenticated"),
        ({"Authorization": "Bearer wrong"}, "/p/payments/x", 401, "unauthenticated"),
        (
            {"Authorization": "Basic dG9rZW4tb2YtYmlsbGluZw=="},
            "/p/payments/x",
            401,
            "unauthenticated",
        ),
        (auth("billing"), "/p/nowhere/x", 404, "unknown_platform"),
        (auth("billing"), "/elsewhere", 404, "unknown_platform"),
        (auth("billing"), "/p/crm/x", 403, "permission_denied"),
    ],
)
async def test_refusals_before_the_breaker_never_reach_a_platform_count_or_name_a_call(
    headers: dict[str, str],
    path: str,
    status: int,
    error: str,
    rig: Rig,
    platform: Recorder,
    evil: Recorder,
) -> None:
    answer = await rig.client.get(rig.url + path, headers=headers)
    assert (answer.status_code, body(answer)) == (status, {"error": error})
    assert "x-breakerdeck-call" not in answer.headers
    assert platform.seen == [] and evil.seen == []
    assert counted(rig.engine) == []


async def test_an_unknown_token_is_refused_before_an_unknown_platform(rig: Rig) -> None:
    answer = await rig.client.get(rig.url + "/p/nowhere/x", headers={"Authorization": "Bearer x"})
    assert answer.status_code == 401


async def test_a_declared_body_over_the_limit_is_refused_before_the_breaker(
    rig: Rig, platform: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/x", method="POST", content=b"x" * 1001)
    assert (answer.status_code, body(answer)) == (413, {"error": "body_too_large"})
    assert "x-breakerdeck-call" not in answer.headers
    assert platform.seen == [] and counted(rig.engine) == []


async def test_a_chunked_body_that_overruns_the_limit_is_413_and_uncounted(
    rig: Rig, platform: Recorder
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"y" * 100

    answer = await rig.call("billing", "/p/payments/x", method="POST", content=chunks())
    assert (answer.status_code, body(answer)) == (413, {"error": "body_too_large"})
    assert rig.count("billing") == 0


async def test_a_stalled_upload_is_answered_408_and_uncounted(
    tmp_path: Path, platform: Recorder, evil: Recorder, start_gateway: StartRig
) -> None:
    rig = await start_gateway(_config(tmp_path, platform, evil), SHORT_DEADLINE)
    raw = (
        b"POST /p/payments/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-of-billing\r\n"
        b"Content-Length: 100\r\n\r\nonly part of it"
    )
    status = await _raw_exchange(rig, raw)
    assert status.startswith(b"HTTP/1.1 408")
    assert rig.count("billing") == 0


async def test_a_platform_answering_garbage_is_a_502_upstream_failure(
    rig: Rig, platform: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/garbage")
    assert answer.status_code == 502
    assert body(answer)["error"] == "upstream_failure"
    assert rig.count("billing") == 1
    assert (await rig.call("billing", "/p/payments/fine")).status_code == 200


async def test_a_platform_closing_mid_body_cuts_the_agents_answer_short(
    rig: Rig, platform: Recorder
) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        await rig.call("billing", "/p/payments/midbody")
    assert rig.count("billing") == 0
    assert (await rig.call("billing", "/p/payments/fine")).status_code == 200


async def test_malformed_http_gets_400_and_the_gateway_keeps_serving(
    rig: Rig, platform: Recorder
) -> None:
    status = await _raw_exchange(rig, b"GET /p/payments/x HTTP/1.1\r\nBad Header\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400")
    assert platform.seen == []
    assert (await rig.call("billing", "/p/payments/x")).status_code == 200


async def test_a_header_injection_in_an_agents_header_never_reaches_the_platform(
    rig: Rig, platform: Recorder
) -> None:
    raw = (
        b"GET /p/payments/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-of-billing\r\n"
        b"X-Evil: a\rInjected: yes\r\n\r\n"
    )
    status = await _raw_exchange(rig, raw)
    assert status.startswith(b"HTTP/1.1 400")
    assert all(not seen.header("injected") for seen in platform.seen)
    assert platform.seen == []


async def test_health_answers_without_a_token(rig: Rig) -> None:
    answer = await rig.client.get(rig.url + "/-/healthz")
    assert (answer.status_code, body(answer)) == (200, {"status": "ok"})


async def _raw_exchange(rig: Rig, raw: bytes) -> bytes:
    """Bytes no HTTP client would send: the status line of the gateway's answer."""
    host, port = rig.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(raw)
    await writer.drain()
    try:
        async with asyncio.timeout(5):
            return await reader.readline()
    finally:
        writer.close()


async def test_a_small_body_rejected_twice_is_retried_once_then_reauth_failed(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    config = write_config(
        tmp_path, {"payments": platform.url("/api")}, {"billing": {"payments": ROTATING_CREDENTIAL}}
    )
    rig = await start_gateway(config)
    answer = await rig.call("billing", "/p/payments/status/401", method="POST", content=b"x" * 10)
    assert (answer.status_code, body(answer)["error"]) == (401, "reauth_failed")
    assert [seen.body_bytes for seen in platform.seen] == [10, 10]
    assert rig.count("billing") == 1


async def test_a_body_over_the_replay_buffer_gets_the_platforms_401_relayed_uncounted(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    config = write_config(
        tmp_path,
        {"payments": platform.url("/api")},
        {"billing": {"payments": ROTATING_CREDENTIAL}},
        gateway="replay_buffer_bytes = 100",
    )
    rig = await start_gateway(config)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"z" * 50

    answer = await rig.call("billing", "/p/payments/status/401", method="POST", content=chunks())
    assert (answer.status_code, body(answer)) == (401, {"status": "as asked"})
    assert [seen.body_bytes for seen in platform.seen] == [250]
    assert rig.count("billing") == 0
