"""A taken port, met by each command that listens: it names the taken address, says nothing
before (no `feed on`, no `watch it:`, no token made), and exits 2 as docs/console.md says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.front.test_gateway_config import DIGEST, GOOD
from tests.front.test_mcp_cli import fixture_command

CLI = [sys.executable, "-m", "breakerdeck.console.cli"]


@pytest.fixture
def taken() -> Iterator[str]:
    """HOST:PORT of a socket this test listens on for its whole run."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        yield f"127.0.0.1:{held.getsockname()[1]}"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BD_TEST_PAYMENTS": "secret-value"},
    )


def token(tmp_path: Path) -> str:
    path = tmp_path / "host.token"
    path.write_text("t" * 32 + "\n")
    path.chmod(0o600)
    return str(path)


def refused_naming(done: subprocess.CompletedProcess[str], address: str) -> str:
    """The one line a refused start wrote, checked to name `address` and nothing announced."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert address in lines[0]
    assert "in use" in lines[0]
    return lines[0]


def gateway_config(tmp_path: Path) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(GOOD.format(digest=DIGEST))
    return str(path)


def test_gateway_whose_listen_port_is_taken_names_it_before_announcing_its_feed(
    tmp_path: Path, taken: str
) -> None:
    done = run(
        "gateway", "--config", gateway_config(tmp_path), "--listen", taken,
        "--state-dir", str(tmp_path / "state"), "--feed-listen", "127.0.0.1:0",
    )  # fmt: skip
    assert "the gateway" in refused_naming(done, taken)
    assert not (tmp_path / "state" / "operator.token").exists()


def test_gateway_whose_feed_port_is_taken_names_the_feed_not_the_free_listen_address(
    tmp_path: Path, taken: str
) -> None:
    done = run(
        "gateway", "--config", gateway_config(tmp_path), "--listen", "127.0.0.1:0",
        "--state-dir", str(tmp_path / "state"), "--feed-listen", taken,
    )  # fmt: skip
    line = refused_naming(done, taken)
    assert "the feed" in line
    assert "127.0.0.1:0" not in line


def test_mcp_whose_http_port_is_taken_names_it_before_starting_anything(
    tmp_path: Path, taken: str
) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    done = run(
        "mcp", "--config", str(config), "--http", taken, "--token-file", token(tmp_path),
        "--state-dir", str(tmp_path / "state"), "--feed-listen", "127.0.0.1:0",
    )  # fmt: skip
    assert "the host's HTTP" in refused_naming(done, taken)


def test_mcp_whose_feed_port_is_taken_names_the_feed(tmp_path: Path, taken: str) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(f"[servers.search]\ncommand = {fixture_command(tmp_path)}\n")
    done = run(
        "mcp", "--config", str(config), "--http", "127.0.0.1:0", "--token-file",
        token(tmp_path), "--state-dir", str(tmp_path / "state"), "--feed-listen", taken,
    )  # fmt: skip
    assert "the feed" in refused_naming(done, taken)


def test_serve_whose_port_is_taken_names_it_before_making_its_tokens(
    tmp_path: Path, taken: str
) -> None:
    port = taken.rpartition(":")[2]
    done = run("serve", "--port", port, "--state-dir", str(tmp_path / "state"))
    refused_naming(done, taken)
    assert not (tmp_path / "state" / "operator.token").exists()


def test_web_whose_port_is_taken_names_it(tmp_path: Path, taken: str) -> None:
    done = run("web", "--listen", taken, "--viewer-token-file", token(tmp_path), "demo")
    refused_naming(done, taken)
