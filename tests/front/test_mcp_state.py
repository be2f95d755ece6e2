"""`breakerdeck mcp` processes on a state dir: the feed as `serve` has it, and a second proxy
(hosts start one per window) on an instance under a held dir, its feed URL written there."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

from breakerdeck.engine.feed.client import fetch_snapshot, read_token
from tests.front.mcp_support import FIXTURE, free_port
from tests.front.test_mcp_cli import COMMAND

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "window", "version": "1"},
    },
}


def config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.toml"
    command = json.dumps([*FIXTURE, "--control", str(tmp_path / "s")])
    path.write_text(f"[servers.search]\ncommand = {command}\n")
    return path


def start(path: Path, *flags: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*COMMAND, "--config", str(path), "--speed", "10", *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(INITIALIZE) + "\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1  # serving
    return process


def stop(process: subprocess.Popen[str]) -> str:
    assert process.stdin is not None and process.stderr is not None
    process.stdin.close()
    process.wait(timeout=30)
    err = process.stderr.read()
    assert process.returncode == 0, err
    return err


def wait_for(path: Path, seconds: float = 15.0) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text().strip()


async def test_a_second_proxy_on_a_held_state_dir_serves_as_an_instance_with_its_feed(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    path = config(tmp_path)
    first = start(path, "--state-dir", str(state))
    try:
        second = start(path, "--state-dir", str(state))
        try:
            url = wait_for(state / "instances" / "1" / "feed.url")
            assert url.startswith("ws://127.0.0.1:")
            snapshot = await fetch_snapshot(url, read_token(state / "viewer.token"))
            assert snapshot.breakers == []
        finally:
            said = stop(second)
        assert "held by another proxy" in said
    finally:
        stop(first)


async def test_the_feed_and_the_metrics_serve_the_proxys_breakers(tmp_path: Path) -> None:
    state = tmp_path / "state"
    feed_port, metrics_port = free_port(), free_port()
    process = start(
        config(tmp_path),
        "--state-dir",
        str(state),
        "--feed-listen",
        f"127.0.0.1:{feed_port}",
        "--metrics-listen",
        f"127.0.0.1:{metrics_port}",
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search__lookup", "arguments": {"query": "q"}},
        }
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        process.stdin.write("\n" + json.dumps(call) + "\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 2
        token = read_token(state / "viewer.token")
        snapshot = await fetch_snapshot(f"ws://127.0.0.1:{feed_port}", token)
        assert [b.key for b in snapshot.breakers] == ["search@default"]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as answer:
            text = answer.read().decode()
        assert 'breakerdeck_breaker_state{key="search@default",state="closed"} 1.0' in text
    finally:
        stop(process)
