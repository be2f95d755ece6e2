"""Hold and shadow at the HTTP gateway (DESIGN, "Operator control: hold and shadow"): a held
agent is refused with the 403 `circuit_breaker_held` and a `Retry-After` before any request
reaches its platform; a shadow agent's calls go through to the platform whatever its breaker
would say. The recording platform is the witness of what reached the wire."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from breakerdeck.engine.events import iso_utc
from breakerdeck.engine.front.gateway.config import load
from tests.engine.test_gateway_hold import held_body
from tests.front.conftest import Rig, StartRig, body, credential_file, write_config
from tests.front.upstream import Recorder

HOUR = 3600.0


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


def _config(tmp_path: Path, platform: Recorder, mode: str | None = None) -> Path:
    path = write_config(
        tmp_path,
        {"payments": platform.url("/api")},
        {"billing": {"payments": credential_file(tmp_path)}},
    )
    if mode is not None:
        text = path.read_text().replace(
            "[agents.billing]\n", f'[agents.billing]\nmode = "{mode}"\n'
        )
        path.write_text(text)
    return path


def _held_body(rig: Rig, reason: str, seconds: float) -> dict[str, object]:
    return held_body(iso_utc(rig.clock.wall() + seconds), reason, int(seconds))


async def test_a_held_agent_gets_the_held_403_with_retry_after_and_nothing_reaches_the_platform(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    assert (await rig.call("billing", "/p/payments/x")).status_code == 200
    reached = len(platform.seen)
    rig.engine.hold("billing", "ana", "vendor maintenance", HOUR)
    refused = [await rig.call("billing", "/p/payments/x") for _ in range(3)]
    assert len(platform.seen) == reached
    for answer in refused:
        assert answer.status_code == 403
        assert body(answer) == _held_body(rig, "vendor maintenance", HOUR)
        assert answer.headers["retry-after"] == "3600"
        assert answer.headers["x-breakerdeck-call"].startswith("call-")


async def test_an_agent_can_be_held_before_its_first_call(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    rig.engine.hold("billing", "ana", "vendor maintenance", HOUR)
    answer = await rig.call("billing", "/p/payments/x")
    assert platform.seen == []
    assert (answer.status_code, body(answer)) == (403, _held_body(rig, "vendor maintenance", HOUR))


async def test_a_configured_agent_is_named_before_its_first_call(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    view = rig.engine.view("billing")
    assert (view.state, view.agents, view.count) == ("closed", ("billing",), 0)


async def test_a_held_refusal_says_at_least_5_seconds_near_the_holds_end(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    await rig.call("billing", "/p/payments/x")
    rig.engine.hold("billing", "ana", "vendor maintenance", 60)
    rig.clock.advance(58)
    answer = await rig.call("billing", "/p/payments/x")
    assert (answer.status_code, answer.headers["retry-after"]) == (403, "5")
    assert body(answer)["halt"]["retry_after_seconds"] == 5


async def test_each_hold_is_answered_with_its_own_words(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    await rig.call("billing", "/p/payments/x")
    rig.engine.hold("billing", "ana", "vendor maintenance", HOUR)
    await rig.call("billing", "/p/payments/x")
    rig.engine.release("billing", "ana", close=True)
    rig.engine.hold("billing", "bo", "card network outage", HOUR)
    answer = await rig.call("billing", "/p/payments/x")
    assert body(answer) == _held_body(rig, "card network outage", HOUR)


async def test_after_a_release_the_agents_calls_reach_the_platform_again(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform))
    await rig.call("billing", "/p/payments/x")
    rig.engine.hold("billing", "ana", "vendor maintenance", HOUR)
    await rig.call("billing", "/p/payments/x")
    reached = len(platform.seen)
    rig.engine.release("billing", "ana", "vendor is back")
    probe = await rig.call("billing", "/p/payments/x")
    assert probe.status_code == 200
    assert len(platform.seen) == reached + 1
    assert rig.engine.view("billing").state == "closed"


async def test_a_shadow_agent_whose_breaker_is_open_still_reaches_the_platform(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform, mode="shadow"))
    for _ in range(5):
        assert (await rig.call("billing", "/p/payments/garbage")).status_code == 502
    view = rig.engine.view("billing")
    assert (view.state, view.mode) == ("open", "shadow")
    reached = len(platform.seen)
    answers = [await rig.call("billing", "/p/payments/status/201") for _ in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert "retry-after" not in answers[0].headers
    assert len(platform.seen) == reached + 3
    assert rig.engine.view("billing").state == "open"


async def test_a_held_shadow_agent_is_refused_like_an_enforcing_one(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig: Rig = await start_gateway(_config(tmp_path, platform, mode="shadow"))
    await rig.call("billing", "/p/payments/x")
    reached = len(platform.seen)
    rig.engine.hold("billing", "ana", "vendor maintenance", HOUR)
    answer = await rig.call("billing", "/p/payments/x")
    assert body(answer) == _held_body(rig, "vendor maintenance", HOUR)
    assert len(platform.seen) == reached


def test_an_agents_mode_is_read_from_its_table_and_unset_means_the_engines_default(
    tmp_path: Path, platform: Recorder
) -> None:
    config, _ = load(_config(tmp_path, platform, mode="shadow"))
    assert config.agents["billing"].mode == "shadow"
    plain, _ = load(_config(tmp_path, platform))
    assert plain.agents["billing"].mode is None
