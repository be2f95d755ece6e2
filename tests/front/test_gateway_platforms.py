"""What a team putting the gateway in front of its own platforms needs: a deadline per platform,
auth statuses per platform, answers that say what a refresh did, and paths beside the config."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from tests.front.conftest import SHORT_DEADLINE, StartRig, body, credential_file, token
from tests.front.upstream import Recorder


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


def _config(directory: Path, platforms: dict[str, str], credential: str) -> Path:
    """Platforms as `name -> extra TOML lines`, all on the recorder behind `base_url`."""
    lines = []
    for name, extra in platforms.items():
        lines += [f"[platforms.{name}]", extra]
    digest = hashlib.sha256(token("billing").encode()).hexdigest()
    lines += ["[agents.billing]", f'token_sha256 = "{digest}"', "[agents.billing.credentials]"]
    lines += [f"{name} = {credential}" for name in platforms]
    path = directory / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _base(platform: Recorder) -> str:
    return f'base_url = "{platform.url("/api")}"'


async def test_a_platform_with_a_longer_deadline_answers_a_call_the_default_would_count(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    # The 45 s call on a 60 s platform beside a 31 s call on the 30 s default, scaled
    # down: the policy's deadline is 0.5 s here, the reports platform's 2 s.
    config = _config(
        tmp_path,
        {"reports": f"{_base(platform)}\ndeadline_seconds = 2.0", "payments": _base(platform)},
        credential_file(tmp_path),
    )
    rig = await start_gateway(config, SHORT_DEADLINE)
    slow = await rig.call("billing", "/p/reports/delay/1")
    assert slow.status_code == 200
    assert rig.count("billing") == 0
    timed_out = await rig.call("billing", "/p/payments/delay/1")
    assert timed_out.status_code == 502
    assert body(timed_out)["message"] == f"payments did not answer within {SHORT_DEADLINE:g} s"
    assert rig.count("billing") == 1


async def test_a_platforms_deadline_is_on_its_call_line_and_sets_its_probes_lease(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    config = _config(
        tmp_path,
        {"reports": f"{_base(platform)}\ndeadline_seconds = 60"},
        credential_file(tmp_path),
    )
    rig = await start_gateway(config)
    lines: list[Event] = []
    rig.engine.subscribe(lines.append)
    await rig.call("billing", "/p/reports/x")
    assert [line.fields["deadline_seconds"] for line in lines] == [60]
    assert rig.app.platforms["reports"].lease == rig.app.policy.probe_lease(60)


async def test_with_auth_failure_statuses_401_a_platforms_403s_are_relayed_and_never_trip(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    config = _config(
        tmp_path,
        {"payments": f"{_base(platform)}\nauth_failure_statuses = [401]"},
        credential_file(tmp_path),
    )
    rig = await start_gateway(config)
    for _ in range(3):
        denied = await rig.call("billing", "/p/payments/status/403")
        assert (denied.status_code, body(denied)) == (403, {"status": "as asked"})
    assert len(platform.seen) == 3  # no refresh, no retry
    assert rig.count("billing") == 0
    assert rig.engine.view("billing").state == "closed"


async def test_a_401_on_an_env_credential_says_a_restart_is_needed_and_sends_no_retry(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BILLING_PAYMENTS_TOKEN", "env-credential")
    config = _config(tmp_path, {"payments": _base(platform)}, '{ env = "BILLING_PAYMENTS_TOKEN" }')
    rig = await start_gateway(config)
    lines: list[Event] = []
    rig.engine.subscribe(lines.append)
    answer = await rig.call("billing", "/p/payments/status/401")
    assert answer.status_code == 401
    assert body(answer)["error"] == "reauth_failed"
    assert "needs a restart" in body(answer)["message"]
    assert "succeeded" not in body(answer)["message"]
    assert len(platform.seen) == 1
    completed = [line for line in lines if line.type == ev.CALL_COMPLETED]
    assert [line.fields["refresh"] for line in completed] == ["failed"]


async def test_a_small_body_of_known_length_is_one_message_when_it_has_arrived(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    config = _config(tmp_path, {"payments": _base(platform)}, credential_file(tmp_path))
    rig = await start_gateway(config)
    async with rig.client.stream(
        "GET", rig.url + "/p/payments/x", headers={"Authorization": f"Bearer {token('billing')}"}
    ) as answer:
        assert [len(chunk) async for chunk in answer.aiter_raw()] == [
            int(answer.headers["content-length"])
        ]


def test_a_state_dir_in_the_file_is_beside_the_file_whatever_the_working_directory(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "deploy"
    folder.mkdir()
    digest = hashlib.sha256(b"t").hexdigest()
    (folder / "gateway.toml").write_text(
        '[gateway]\nstate_dir = "state"\nlisten = "127.0.0.1:0"\n'
        '[platforms.payments]\nbase_url = "http://127.0.0.1:9"\n'
        f'[agents.billing]\ntoken_sha256 = "{digest}"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "breakerdeck.console.cli",
            "gateway",
            "--config",
            "../deploy/gateway.toml",
            "--feed-listen",
            "127.0.0.1:0",
        ],
        cwd=elsewhere,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert started.stderr is not None
    try:
        for line in started.stderr:
            if line.startswith("gateway on "):
                break
    finally:
        started.terminate()
        started.wait(10)
    assert (folder / "state" / "operator.token").exists()
    assert not (elsewhere / "state").exists()
