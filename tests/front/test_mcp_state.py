"""`breakerdeck mcp` processes on a state dir: the feed as `serve` has it, and a second proxy
(hosts start one per window) on an instance under a held dir, its feed URL written there."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import Any

from breakerdeck.engine.feed.client import fetch_snapshot, read_token
from breakerdeck.fixtures.mcp_server import FixtureControl
from tests.front.mcp_support import FIXTURE, free_port
from tests.front.test_mcp_cli import COMMAND
from tests.waiting import BOUND_SECONDS, signal_taken, wait_until

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


def written(path: Path) -> str:
    """What a process writes to `path`, once the file is there."""
    wait_until(path.exists, f"{path} written")
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
            url = written(state / "instances" / "1" / "feed.url")
            assert url.startswith("ws://127.0.0.1:")
            snapshot = await fetch_snapshot(url, read_token(state / "viewer.token"))
            # the configured server's breaker, there before any call so it can be held
            assert [(b.key, b.state, b.count) for b in snapshot.breakers] == [
                ("search@default", "closed", 0)
            ]
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
        ready(process)
        process.stdin.write(json.dumps(call) + "\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 2
        token = read_token(state / "viewer.token")
        snapshot = await fetch_snapshot(f"ws://127.0.0.1:{feed_port}", token)
        assert [b.key for b in snapshot.breakers] == ["search@default"]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as answer:
            text = answer.read().decode()
        assert 'breakerdeck_breaker_state{key="search@default",state="closed"} 1.0' in text
        assert (
            'breakerdeck_calls_total{counted="false",key="search@default",outcome="success"} 1.0'
            in text
        )
        assert 'breakerdeck_call_duration_seconds_count{key="search@default"} 1.0' in text
    finally:
        stop(process)


def send(process: subprocess.Popen[str], *messages: dict[str, object]) -> None:
    assert process.stdin is not None
    for message in messages:
        process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()


def call(number: int, tool: str = "search__charge") -> dict[str, object]:
    params = {"name": tool, "arguments": {"amount": 1}}
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}


def answer(process: subprocess.Popen[str], number: int, seconds: float = BOUND_SECONDS) -> Any:
    """The result of request `number`, read past notifications; fails rather than waits on."""
    assert process.stdout is not None
    stdout, found = process.stdout, []

    def read() -> None:
        for line in stdout:
            message = json.loads(line)
            if message.get("id") == number:
                found.append(message["result"])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(seconds)
    assert found, f"no answer to request {number} within {seconds} s"
    return found[0]


def ready(process: subprocess.Popen[str]) -> None:
    """Initialized, and search's tools listed: a server that missed its start deadline on a
    loaded machine is started again by a later listing (docs/mcp.md)."""
    send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    numbers = itertools.count(100)

    def listed() -> bool:
        number = next(numbers)
        send(process, {"jsonrpc": "2.0", "id": number, "method": "tools/list"})
        return any(tool["name"].startswith("search__") for tool in answer(process, number)["tools"])

    wait_until(listed, "search's tools listed")


def reached(upstream: FixtureControl) -> None:
    """Waits until a call is on the upstream's wire."""
    wait_until(lambda: upstream.calls() > 0, "a call at the upstream")


def test_sigterm_lets_the_call_in_flight_finish_refuses_new_ones_and_exits_0(
    tmp_path: Path,
) -> None:
    upstream = FixtureControl(tmp_path / "s")
    upstream.set_mode("progress", steps=0, every=0.05, until_released=True)
    process = start(config(tmp_path))
    ready(process)
    send(process, call(2))
    reached(upstream)  # call 2 is in flight, held at the upstream until released
    process.send_signal(signal.SIGTERM)
    wait_until(lambda: signal_taken(process.pid, signal.SIGTERM), "the signal taken")
    send(process, call(3))
    assert answer(process, 3)["structuredContent"]["status"] == "refused"
    upstream.release()
    assert answer(process, 2)["isError"] is False
    process.wait(timeout=30)
    assert process.returncode == 0


def test_a_second_sigterm_stops_at_once(tmp_path: Path) -> None:
    """The drain would wait out the call's budget: 2 attempts of 600 s, two minutes of real
    time at --speed 10, longer than the wait below; the process ends well within it."""
    upstream = FixtureControl(tmp_path / "s")
    upstream.set_mode("hang")
    path = config(tmp_path)
    path.write_text(path.read_text() + "deadline_seconds = 600.0\n")
    process = start(path)
    ready(process)
    send(process, call(2))
    reached(upstream)  # call 2 hangs at the upstream: the drain would wait for it
    process.send_signal(signal.SIGTERM)
    wait_until(lambda: signal_taken(process.pid, signal.SIGTERM), "the signal taken")
    assert process.poll() is None  # draining, the call still in flight
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=BOUND_SECONDS) == 0
