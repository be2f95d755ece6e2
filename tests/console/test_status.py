"""`breakerdeck status` and `reset` in a real process against a real feed: exit statuses per
DESIGN (0/1/2 only for verdicts, 64 usage, 74 I/O) and outside text shown escaped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from breakerdeck.console.cli import main
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.text import printable
from tests.feed.feedkit import AUTH, OPERATOR, VIEWER, call, trip

HOSTILE_KEY = "ev\x1b]0;owned\x07il[/]"
#: Enough breakers that the JSON (about 200 KB) outgrows a pipe's buffer and `head`'s read.
MANY = 300


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(clock: ManualClock, tmp_path: Path):
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
async def feed(engine: Engine):
    async with serve_feed(
        engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, source_name="test-engine"
    ) as server:
        yield server


@pytest.fixture
def viewer_token(tmp_path: Path) -> str:
    path = tmp_path / "viewer.token"
    path.write_text(VIEWER)
    return str(path)


def page(engine: Engine, clock: ManualClock, key: str) -> None:
    """Open through two cooldowns: two failed probes after the trip."""
    trip(engine, key)
    for _ in range(2):
        clock.advance(300)
        call(engine, key, AUTH)
    assert engine.view(key).paged


def status_command(url: str, token_file: str) -> list[str]:
    command = [sys.executable, "-m", "breakerdeck.console.cli", "status", url]
    return [*command, "--json", "--token-file", token_file]


async def test_status_piped_into_head_keeps_its_paged_verdict(engine, clock, feed, viewer_token):
    for index in range(MANY):
        call(engine, f"agent-{index:03d}")
    page(engine, clock, "agent-paged")

    def pipeline() -> tuple[int, bytes, bytes]:
        status = subprocess.Popen(
            status_command(feed.url, viewer_token), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            head = subprocess.run(["head", "-n", "3"], stdin=status.stdout, capture_output=True)
            status.stdout.close()
            return status.wait(timeout=60), head.stdout, status.stderr.read()
        finally:
            status.kill()

    code, shown, err = await asyncio.to_thread(pipeline)
    assert len(shown.splitlines()) == 3
    assert code == 2, err.decode()
    assert b"Traceback" not in err


async def test_status_into_a_closed_pipe_is_an_io_error(engine, clock, feed, viewer_token):
    page(engine, clock, "agent-paged")

    def closed_pipe() -> tuple[int, bytes]:
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run(
                status_command(feed.url, viewer_token),
                stdout=write_end,
                stderr=subprocess.PIPE,
                timeout=60,
            )
        finally:
            os.close(write_end)
        return done.returncode, done.stderr

    code, err = await asyncio.to_thread(closed_pipe)
    assert code == 74
    assert b"reader is gone" in err and b"Traceback" not in err


async def test_status_shows_a_hostile_key_escaped(engine, feed, viewer_token, capsys):
    trip(engine, HOSTILE_KEY)
    argv = ["status", feed.url, "--token-file", viewer_token]
    assert await asyncio.to_thread(main, argv) == 1
    out = capsys.readouterr().out
    assert printable(HOSTILE_KEY) in out and "\x1b" not in out and "\x07" not in out


async def test_reset_messages_show_a_hostile_key_and_source_escaped(engine, feed, tmp_path, capsys):
    trip(engine, HOSTILE_KEY)
    token = tmp_path / "operator.token"
    token.write_text(OPERATOR)
    argv = ["reset", feed.url, HOSTILE_KEY, "--yes", "--token-file", str(token)]
    argv += ["--operator", "ann"]
    assert await asyncio.to_thread(main, argv) == 0
    err = capsys.readouterr().err
    assert f"reset {printable(HOSTILE_KEY)} on test-engine" in err and "\x1b" not in err
    assert engine.view(HOSTILE_KEY).state == "closed"
