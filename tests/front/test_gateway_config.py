"""The config and the command: refused at start (exit 2) naming the file, table and key;
credentials from env, file and command, under their deadline."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.front.conftest import SHORT_DEADLINE, StartRig, body, write_config

GOOD = """
[gateway]
listen = "127.0.0.1:0"

[platforms.payments]
base_url = "http://127.0.0.1:9/api"

[agents.billing-assistant]
token_sha256 = "{digest}"
[agents.billing-assistant.credentials]
payments = {{ env = "BD_TEST_PAYMENTS" }}
"""
DIGEST = hashlib.sha256(b"t").hexdigest()


def _gateway(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "breakerdeck.console.cli", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BD_TEST_PAYMENTS": "secret-value", **(env or {})},
    )


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def test_check_config_accepts_a_good_file_and_exits_0(tmp_path: Path) -> None:
    done = _gateway("--config", str(_write(tmp_path, GOOD.format(digest=DIGEST))), "--check-config")
    assert done.returncode == 0, done.stderr
    assert "1 platform, 1 agent" in done.stderr


@pytest.mark.parametrize(
    ("typo", "expected"),
    [
        ("token_sha256", "[agents.billing-assistant] key 'tokn_sha256': unknown key"),
        ("[gateway]\nlisten", "[gateway] key 'listn': unknown key"),
        ("base_url", "[platforms.payments] key 'base_ur': unknown key"),
    ],
)
def test_a_typo_is_refused_with_exit_2_naming_file_table_and_key(
    typo: str, expected: str, tmp_path: Path
) -> None:
    wrong = {"token_sha256": "tokn_sha256", "[gateway]\nlisten": "[gateway]\nlistn"}.get(
        typo, "base_ur"
    )
    text = GOOD.format(digest=DIGEST).replace(typo, wrong, 1)
    path = _write(tmp_path, text)
    done = _gateway("--config", str(path), "--check-config")
    assert done.returncode == 2
    assert f"{path}: {expected}" in done.stderr


@pytest.mark.parametrize(
    ("good", "bad", "expected"),
    [
        ('"http://127.0.0.1:9/api"', '"ftp://h/api"', "[platforms.payments] key 'base_url'"),
        ('"http://127.0.0.1:9/api"', '"http://h/api?x=1"', "no query"),
        ('listen = "127.0.0.1:0"', 'listen = "nowhere"', "[gateway] key 'listen'"),
        ('listen = "127.0.0.1:0"', "drain_seconds = '30'", "[gateway] key 'drain_seconds'"),
        ("BD_TEST_PAYMENTS", "BD_TEST_UNSET_VARIABLE", "$BD_TEST_UNSET_VARIABLE is not set"),
        (
            'token_sha256 = "',
            'mode = "shdow"\ntoken_sha256 = "',
            "[agents.billing-assistant] key 'mode': Input should be 'enforce' or 'shadow'",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_where_it_is(
    good: str, bad: str, expected: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, GOOD.format(digest=DIGEST).replace(good, bad))
    done = _gateway("--config", str(path), "--check-config")
    assert done.returncode == 2
    assert expected in done.stderr
    assert "secret-value" not in done.stderr


@pytest.mark.parametrize("problem", ["writable by others", "belongs to uid"])
def test_a_token_file_with_the_wrong_mode_or_owner_is_refused_at_start(
    problem: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text("t\n")
    if problem == "writable by others":
        token_file.chmod(0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file away needs root")
        os.chown(token_file, 65534, 65534)
    text = GOOD.format(digest=DIGEST).replace(
        f'token_sha256 = "{DIGEST}"', 'token_file = "agent.token"'
    )
    path = _write(tmp_path, text)
    done = _gateway("--config", str(path), "--check-config")
    assert done.returncode == 2
    assert "[agents.billing-assistant] key 'token_file'" in done.stderr
    assert problem in done.stderr


def test_a_missing_credential_file_is_refused_at_start(tmp_path: Path) -> None:
    text = GOOD.format(digest=DIGEST).replace('{ env = "BD_TEST_PAYMENTS" }', '{ file = "gone" }')
    done = _gateway("--config", str(_write(tmp_path, text)), "--check-config")
    assert done.returncode == 2
    assert "[agents.billing-assistant.credentials.payments] key 'file'" in done.stderr


def test_a_non_loopback_bind_without_tls_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.format(digest=DIGEST))
    done = _gateway("--config", str(path), "--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "without TLS" in done.stderr and "--insecure-bind" in done.stderr


@pytest.fixture
def payments() -> Iterator[tuple[FakePlatform, PlatformServer]]:
    platform = FakePlatform("payments")
    with PlatformServer({"payments": platform}) as server:
        yield platform, server


@pytest.mark.parametrize(
    "command", [["sleep", "30"], ["true"], ["false"]], ids=["hangs", "prints-nothing", "fails"]
)
async def test_a_vault_command_that_hangs_fails_or_prints_nothing_is_an_upstream_failure(
    command: list[str],
    tmp_path: Path,
    payments: tuple[FakePlatform, PlatformServer],
    start_gateway: StartRig,
) -> None:
    platform, server = payments
    entry = "{ command = [" + ", ".join(f'"{word}"' for word in command) + "] }"
    config = write_config(
        tmp_path, {"payments": server.url("payments")}, {"a": {"payments": entry}}
    )
    rig = await start_gateway(config, SHORT_DEADLINE)
    answer = await rig.call("a", "/p/payments/x")
    assert answer.status_code == 502
    assert "vault" in body(answer)["message"]
    assert rig.count("a") == 1
    assert platform.requests == 0


async def test_a_vault_command_provides_the_credential(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    _, server = payments
    entry = '{ command = ["echo", "from-the-vault"] }'
    config = write_config(
        tmp_path, {"payments": server.url("payments")}, {"a": {"payments": entry}}
    )
    rig = await start_gateway(config)
    assert (await rig.call("a", "/p/payments/x")).status_code == 200


async def test_credentials_never_appear_in_a_repr_or_an_error_body(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    secret = tmp_path / "secret"
    secret.write_text("very-secret-credential\n")
    secret.chmod(0o600)
    config = write_config(
        tmp_path,
        {"payments": server.url("payments")},
        {"a": {"payments": f'{{ file = "{secret}" }}'}},
    )
    rig = await start_gateway(config)
    platform.credential_valid = False
    answer = await rig.call("a", "/p/payments/x")
    assert answer.status_code == 401
    for shown in (answer.text, repr(rig.app), repr(rig.app.vault), repr(rig.app.vault._held)):
        assert "very-secret-credential" not in shown


async def test_a_reset_reads_a_file_credential_again(
    tmp_path: Path, payments: tuple[FakePlatform, PlatformServer], start_gateway: StartRig
) -> None:
    platform, server = payments
    secret = tmp_path / "secret"
    secret.write_text("old\n")
    secret.chmod(0o600)
    entry = f'{{ file = "{secret}" }}'
    config = write_config(
        tmp_path, {"payments": server.url("payments")}, {"a": {"payments": entry}}
    )
    rig = await start_gateway(config)
    platform.credential_valid = False
    for _ in range(3):
        await rig.call("a", "/p/payments/x")
    assert rig.app.vault._held[("a", "payments")].value == "old"
    secret.write_text("fixed\n")
    platform.credential_valid = True
    rig.engine.reset("a", actor="operator", reason="credential fixed")
    answer = await rig.call("a", "/p/payments/x")
    assert answer.status_code == 200
    assert rig.app.vault._held[("a", "payments")].value == "fixed"
