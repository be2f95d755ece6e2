"""`breakerdeck mcp` as a host starts it: a command reading one TOML file, JSON-RPC on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest

from breakerdeck.engine.front.mcp.settings.config import ConfigError, load
from tests.front.mcp_support import FIXTURE

COMMAND = [sys.executable, "-m", "breakerdeck.console.cli", "mcp"]


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    return path


def fixture_command(control: Path, *extra: str) -> str:
    return json.dumps([*FIXTURE, "--control", str(control), *extra])


def test_a_typo_in_the_config_is_refused_at_start_with_exit_2_naming_file_table_and_key(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, '[servers.search]\ncomand = ["x"]\n')
    done = subprocess.run(
        [*COMMAND, "--config", str(path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert f"{path}: [servers.search] comand: unknown key" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("text", "table", "key"),
    [
        ('[proxy]\nstate_dri = "x"\n[servers.a]\ncommand = ["x"]\n', "proxy", "state_dri"),
        ('[servers.a]\nurl = "ftp://x/mcp"\n', "servers.a", "url"),
        ('[servers."a b"]\ncommand = ["x"]\n', "servers", "a b"),
        ('[servers.a]\ncommand = ["x"]\nattempts = "2"\n', "servers.a", "attempts"),
        (
            '[servers.a]\ncommand = ["x"]\ncount_is_error = ["("]\n',
            "servers.a",
            "count_is_error[0]",
        ),
        (
            '[servers.a]\nurl = "http://h/mcp"\ncredential = { file = "/nonexistent/key" }\n',
            "servers.a.credential",
            "file",
        ),
        (
            '[servers.a]\ncommand = ["x"]\ncredential = { env = "X", tokn = "y" }\n',
            "servers.a.credential",
            "tokn",
        ),
    ],
)
def test_a_bad_config_names_its_table_and_key(
    tmp_path: Path, text: str, table: str, key: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(write_config(tmp_path, text))
    assert (raised.value.table, raised.value.key) == (table, key)


def test_a_credential_file_others_may_write_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("s3cret")
    secret.chmod(0o666)
    path = write_config(
        tmp_path, f'[servers.a]\nurl = "http://h/mcp"\ncredential = {{ file = "{secret}" }}\n'
    )
    with pytest.raises(ConfigError, match="writable by others"):
        load(path)


def test_stdout_carries_nothing_but_json_rpc(tmp_path: Path) -> None:
    """The proxy's own messages (here: tools it leaves out) and the SDK's logs go to stderr."""
    path = write_config(
        tmp_path,
        "[servers.search]\n"
        f"command = {fixture_command(tmp_path / 's', '--behaviour', 'invalid-names')}\n",
    )
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw-host", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search__lookup", "arguments": {"query": "z"}},
        },
    ]
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        [*COMMAND, "--config", str(path), "--speed", "10"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "always"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    answers = [types.jsonrpc_message_adapter.validate_json(line) for line in lines]
    assert [a.id for a in answers] == [1, 2, 3]
    assert "left out" in done.stderr


def test_check_config_validates_the_file_and_exits_0_without_starting_anything(
    tmp_path: Path,
) -> None:
    control = tmp_path / "s"
    path = write_config(tmp_path, f"[servers.search]\ncommand = {fixture_command(control)}\n")
    done = subprocess.run(
        [*COMMAND, "--config", str(path), "--check-config"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert "ok (1 server)" in done.stderr
    assert not (control / "starts").exists()


def test_http_without_a_token_file_is_refused_at_start(tmp_path: Path) -> None:
    path = write_config(tmp_path, f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    done = subprocess.run(
        [*COMMAND, "--config", str(path), "--http", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "--token-file" in done.stderr


def test_a_non_loopback_listener_without_tls_is_refused_at_start(tmp_path: Path) -> None:
    path = write_config(tmp_path, f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    token = tmp_path / "token"
    token.write_text("t" * 32)
    token.chmod(0o600)
    done = subprocess.run(
        [*COMMAND, "--config", str(path), "--http", "0.0.0.0:0", "--token-file", str(token)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "without TLS" in done.stderr
