"""Host configs: a stdio server's `env`, `secret_env` and `cwd` reach it, and a host's
`mcpServers` JSON becomes a config `--check-config` accepts, its secrets in private files, with
one host entry printed that starts the proxy."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from breakerdeck.engine.front.mcp.settings.config import ConfigError, load
from breakerdeck.engine.front.mcp.settings.hostconfig import from_host_config
from tests.front.mcp_support import proxied
from tests.front.test_check_config_start import mcp
from tests.front.test_mcp_state import INITIALIZE
from tests.front.test_mcp_stdio_files import INITIALIZED, LIST_TOOLS, frame

PLAIN = [sys.executable, "-m", "breakerdeck.fixtures.mcp_plain_server"]
CLAUDE_DESKTOP = """{
  // Claude Desktop's file, with a comment as some hosts accept
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "plain_env": {"command": %s, "args": %s, "env": {"PLAIN_TOKEN": "s3cret-value"}},
    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t0k"}},
    "old-sse": {"type": "sse", "url": "https://tools.example/sse"},
    "keyed": {"url": "https://tools.example/mcp", "headers": {"X-Api-Key": "k"}},
    "queried": {"url": "https://tools.example/mcp?api_key=k"},
    "off": {"command": "x", "disabled": true}
  }
}
"""


async def test_env_secret_env_and_cwd_reach_a_stdio_upstream(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-a-file\n")
    secret.chmod(0o600)
    work = tmp_path / "work"
    work.mkdir()
    os.environ["BREAKERDECK_TEST_CREDENTIAL"] = "the-credential"
    server = {
        "command": PLAIN,
        "env": {"PLAIN_MODE": "plain", "API_KEY": "loses to the credential"},
        "secret_env": {"PLAIN_SECRET": {"file": str(secret)}},
        "cwd": str(work),
        "credential": {"env": "BREAKERDECK_TEST_CREDENTIAL", "name": "API_KEY"},
    }
    try:
        async with proxied({"plain": server}) as bench:
            seen = (await bench.call("plain__environment", {})).structured_content
    finally:
        del os.environ["BREAKERDECK_TEST_CREDENTIAL"]
    assert seen is not None
    assert seen["cwd"] == str(work)
    env = seen["env"]
    assert (env["PLAIN_MODE"], env["PLAIN_SECRET"], env["API_KEY"]) == (
        "plain",
        "from-a-file",
        "the-credential",
    )
    assert "BREAKERDECK_TEST_CREDENTIAL" not in env  # the proxy's own environment stays out
    assert "PATH" in env  # the SDK's default environment


def test_a_relative_command_path_and_cwd_are_beside_the_config(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "server").chmod(0o755)
    path = tmp_path / "mcp.toml"
    path.write_text('[servers.local]\ncommand = ["bin/server", "-v"]\ncwd = "bin"\n')
    server = load(path).servers["local"]
    assert server.command == [str(tmp_path / "bin" / "server"), "-v"]
    assert server.cwd == str(tmp_path / "bin")


def test_env_on_an_http_server_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text('[servers.web]\nurl = "http://127.0.0.1:1/mcp"\nenv = { A = "b" }\n')
    with pytest.raises(ConfigError, match=r"\[servers.web\] env: only a stdio server"):
        load(path)


def converted(tmp_path: Path) -> tuple[int, str, str, Path]:
    host = tmp_path / "claude_desktop_config.json"
    host.write_text(CLAUDE_DESKTOP % (json.dumps(PLAIN[0]), json.dumps(PLAIN[1:])))
    out, err = io.StringIO(), io.StringIO()
    status = from_host_config(host, tmp_path / "proxy", stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue(), tmp_path / "proxy"


def test_a_host_config_becomes_a_config_with_its_secrets_in_private_files(
    tmp_path: Path,
) -> None:
    status, _, said, out = converted(tmp_path)
    assert status == 0, said
    text = (out / "mcp.toml").read_text()
    assert "s3cret-value" not in text and "t0k" not in text
    assert (out / "secrets" / "plain-env.PLAIN_TOKEN").read_text() == "s3cret-value\n"
    assert (out / "secrets" / "remote.credential").read_text() == "t0k\n"
    for path in [out, out / "secrets", *out.rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path
    assert "still holds the secrets" in said


def test_servers_it_cannot_wrap_are_each_named_and_the_others_converted(
    tmp_path: Path,
) -> None:
    _, _, said, out = converted(tmp_path)
    assert "left out: old-sse: type 'sse'" in said
    assert "left out: keyed: header 'X-Api-Key'" in said
    assert "left out: queried: url: carries a query string" in said
    assert "left out: off: unknown key 'disabled'" in said
    assert "plain_env: named plain-env" in said
    assert sorted(load(out / "mcp.toml").servers) == ["plain-env", "remote"]


def test_it_never_writes_over_an_existing_config(tmp_path: Path) -> None:
    converted(tmp_path)
    before = (tmp_path / "proxy" / "mcp.toml").read_text()
    status, printed, said, _ = converted(tmp_path)
    assert status == 2 and printed == ""
    assert "is already there" in said
    assert (tmp_path / "proxy" / "mcp.toml").read_text() == before


def test_it_never_writes_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "proxy").symlink_to(tmp_path / "elsewhere")
    status, _, said, _ = converted(tmp_path)
    assert status == 2
    assert "not a directory" in said
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_written_config_checks_out_and_the_printed_entry_starts_it(tmp_path: Path) -> None:
    _, printed, _, out = converted(tmp_path)
    entry = json.loads(printed)["mcpServers"]["breakerdeck"]
    assert Path(entry["command"]).is_absolute()
    check = mcp("--config", str(out / "mcp.toml"), "--check-config")
    assert check.returncode == 0, check.stderr
    assert "ok (2 servers)" in check.stderr
    done = subprocess.run(  # the remote server refuses connections: the other is served
        [entry["command"], *entry["args"]],
        input=frame(INITIALIZE, INITIALIZED, LIST_TOOLS),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    listing = json.loads(done.stdout.decode().splitlines()[1])
    assert "plain-env__environment" in {tool["name"] for tool in listing["result"]["tools"]}


def test_a_disk_that_fills_half_way_leaves_nothing_and_a_rerun_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = []
    real_fsync = os.fsync

    def fills_up(fd: int) -> None:
        synced.append(fd)
        if len(synced) > 1:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fills_up)
    status, _, said, out = converted(tmp_path)
    assert status != 0 and "No space left on device" in said
    assert [p for p in out.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(os, "fsync", real_fsync)
    again, _, said, _ = converted(tmp_path)
    assert again == 0, said


def test_a_server_whose_command_is_missing_is_written_and_named_with_what_to_do(
    tmp_path: Path,
) -> None:
    host = tmp_path / "host.json"
    servers = {
        "ghost": {"command": "breakerdeck-no-such-server", "args": ["--x"]},
        "plain": {"command": PLAIN[0], "args": PLAIN[1:]},
    }
    host.write_text(json.dumps({"mcpServers": servers}))
    err = io.StringIO()
    status = from_host_config(host, tmp_path / "proxy", stdout=io.StringIO(), stderr=err)
    assert status == 0, err.getvalue()
    warnings = [line for line in err.getvalue().splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert "ghost: 'breakerdeck-no-such-server' not found on PATH" in warnings[0]
    assert "install it" in warnings[0] and "--check-config" in warnings[0]
    assert sorted(load(tmp_path / "proxy" / "mcp.toml").servers) == ["ghost", "plain"]


def test_a_host_file_nested_100000_deep_is_one_line_and_exit_2(tmp_path: Path) -> None:
    host = tmp_path / "deep.json"
    host.write_text('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    done = mcp("--from-host-config", str(host), "--out", str(tmp_path / "proxy"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"breakerdeck mcp: {host}: nested over 64 deep; not a host's config"
    ]
    assert not (tmp_path / "proxy").exists()


def test_brackets_inside_strings_are_not_nesting(tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    args = ["[" * 100, "{" * 100, '\\"[[[']
    host.write_text(json.dumps({"mcpServers": {"plain": {"command": PLAIN[0], "args": args}}}))
    err = io.StringIO()
    status = from_host_config(host, tmp_path / "proxy", stdout=io.StringIO(), stderr=err)
    assert status == 0, err.getvalue()
