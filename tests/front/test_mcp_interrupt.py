"""Ctrl-C in a terminal signals the whole foreground process group: the proxy and the fixture
MCP servers it started. Each ends without a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.front.mcp_support import FIXTURE
from tests.front.test_mcp_cli import COMMAND
from tests.front.test_mcp_stdio_files import (
    EXIT_SECONDS,
    INITIALIZE,
    START_SECONDS,
    answers,
    frame,
)
from tests.waiting import signal_taken, wait_until

#: The demo calls one tool of each of its three fixture servers.
TOOLS = ("search__lookup", "billing__charge", "docs__lookup")


@contextmanager
def default_sigint() -> Iterator[None]:
    """Children started inside take Ctrl-C as a terminal's foreground job does, even when this
    run was started with SIGINT ignored (a background job of a shell without job control, as a
    CI runner may start `make test`): an ignored signal stays ignored across exec, and the
    interrupted processes would then end otherwise, or not at all; a handler set here is reset
    to the default in the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def test_a_fixture_server_interrupted_ends_without_a_traceback_when_its_host_leaves(
    tmp_path: Path,
) -> None:
    out, errors = tmp_path / "out.json", tmp_path / "stderr.txt"
    read_end, write_end = os.pipe()
    with out.open("wb") as stdout, errors.open("wb") as stderr, default_sigint():
        server = subprocess.Popen(
            [*FIXTURE, "--control", str(tmp_path / "search")],
            stdin=read_end,
            stdout=stdout,
            stderr=stderr,
        )
    os.close(read_end)
    try:
        os.write(write_end, frame(INITIALIZE))
        wait_until(lambda: len(answers(out)) == 1, "answer to initialize")
        server.send_signal(signal.SIGINT)
        # Interrupted before the host goes away: on a loaded machine the end of input could
        # otherwise reach it first, and it would end as a server whose host left (0).
        wait_until(lambda: signal_taken(server.pid, signal.SIGINT), "the signal taken")
    finally:
        os.close(write_end)  # the host goes away too, as the interrupted proxy does
        try:
            status = server.wait(EXIT_SECONDS)
        finally:
            if server.poll() is None:
                server.kill()
    assert errors.read_text() == ""
    assert status == 130


def test_ctrl_c_on_the_demo_prints_no_traceback_and_exits_0(tmp_path: Path) -> None:
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr, default_sigint():
        demo = subprocess.Popen(
            [*COMMAND, "--demo", "--feed-listen", "127.0.0.1:0", "--state-dir", str(tmp_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    try:
        # Every server has answered a call: all three children are up and serving.
        wait_until(
            lambda: all(f"{tool}: ok" in errors.read_text() for tool in TOOLS),
            "a call answered by each server",
        )
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert demo.wait(START_SECONDS) == 0, errors.read_text()  # what it said, if it failed
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(EXIT_SECONDS)
    text = errors.read_text()
    for noise in ("Traceback", "KeyboardInterrupt", "CancelledError"):
        assert noise not in text, text
