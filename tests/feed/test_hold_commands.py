"""`breakerdeck hold`, `release` and `mode` against a real engine's feed on loopback, and
`status` of a held breaker: `reset`'s code, questions and exit codes (DESIGN, "Operator
control: hold and shadow"); a refusal changes nothing. A tool behind a harness counts what
reaches it: a hold from the shell keeps the next call off the wire."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from breakerdeck.console import remote
from breakerdeck.console.cli import build_parser, main
from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.text import printable
from tests.feed.feedkit import OPERATOR, VIEWER

KEY = "crm@default"
HOSTILE = "ann\x1b]0;owned\x07[/]\u202e"


class Backend:
    """The tool's backend: counts every call that reaches it."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, args: Any = None) -> dict[str, int]:
        self.calls += 1
        return {"id": self.calls}


@pytest.fixture
def backend() -> Backend:
    return Backend()


@pytest.fixture
def engine(tmp_path: Path):
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
def harness(engine: Engine, backend: Backend) -> Harness:
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="crm", attempts=1, function=backend.run))
    return harness


@pytest.fixture
async def feed(engine: Engine, harness: Harness):
    assert (await harness.call_tool("ava", "lookup"))["status"] == "ok"  # the key exists
    async with serve_feed(
        engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR, source_name="test-engine"
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def no_default_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(remote.TOKEN_ENV, raising=False)


async def shell(*argv: str, answer: str = "") -> int:
    """The command as `breakerdeck` runs it (usage errors included), with `answer` typed."""

    def run() -> int:
        saved = sys.stdin
        sys.stdin = io.StringIO(answer)
        try:
            return main(list(argv))
        except SystemExit as exit:  # argparse's usage error
            return int(exit.code or 0)
        finally:
            sys.stdin = saved

    return await asyncio.to_thread(run)


def hold_argv(url: str, token: str, *more: str) -> list[str]:
    argv = ["hold", url, KEY, "--reason", "vendor maintenance", "--for", "30m"]
    return [*argv, "--token-file", token, "--operator", "carol", *more]


async def test_a_hold_from_the_shell_refuses_the_next_call_off_the_wire(
    engine: Engine, feed, token_files, harness: Harness, backend: Backend, capsys
) -> None:
    assert await shell(*hold_argv(feed.url, token_files["operator"], "--yes")) == 0
    assert "held crm@default for 30m on test-engine as remote:operator:carol" in (
        capsys.readouterr().err
    )
    reached = backend.calls
    answer = await harness.call_tool("ava", "lookup")
    assert answer["status"] == "circuit_open" and answer["held"] is True
    assert "held open by remote:operator:carol" in answer["reason"]
    assert backend.calls == reached
    [held] = engine.audit.query(types=ev.HELD)
    assert held.fields["actor"] == "remote:operator:carol"
    assert held.fields["reason"] == "vendor maintenance"


async def test_hold_asks_first_and_a_no_sends_nothing(engine: Engine, feed, token_files, capsys):
    seq = engine.seq
    assert await shell(*hold_argv(feed.url, token_files["operator"]), answer="n\n") == 1
    err = capsys.readouterr().err
    assert "Hold open crm@default on test-engine for 30m (CLOSED, count 0)? [y/N]" in err
    assert "not held" in err
    assert await shell(*hold_argv(feed.url, token_files["operator"]), answer="") == 1
    assert engine.seq == seq and engine.view(KEY).state == "closed"
    assert await shell(*hold_argv(feed.url, token_files["operator"]), answer="y\n") == 0
    assert engine.view(KEY).state == "held"


async def test_release_half_opens_and_the_next_call_is_the_probe(
    engine: Engine, feed, token_files, harness: Harness, backend: Backend
) -> None:
    engine.hold(KEY, "ops", "maintenance", 1800)
    argv = ["release", feed.url, KEY, "--yes", "--token-file", token_files["operator"]]
    assert await shell(*argv, "--operator", "dan", "--reason", "vendor done") == 0
    assert engine.view(KEY).state == "half_open"
    [released] = engine.audit.query(types=ev.RELEASED)
    assert released.fields["actor"] == "remote:operator:dan"
    reached = backend.calls
    assert (await harness.call_tool("ava", "lookup"))["status"] == "ok"
    assert backend.calls == reached + 1
    assert engine.view(KEY).state == "closed"


async def test_release_close_closes(engine: Engine, feed, token_files) -> None:
    engine.hold(KEY, "ops", "maintenance", 1800)
    argv = ["release", feed.url, KEY, "--close", "--yes", "--token-file", token_files["operator"]]
    assert await shell(*argv) == 0
    assert engine.view(KEY).state == "closed"
    assert len(engine.audit.query(types=ev.RESET)) == 1


async def test_mode_switches_to_shadow_and_back(engine: Engine, feed, token_files, capsys) -> None:
    argv = ["mode", feed.url, KEY, "shadow", "--reason", "trial run", "--yes"]
    assert await shell(*argv, "--token-file", token_files["operator"]) == 0
    assert engine.view(KEY).mode == "shadow"
    assert "switched crm@default to shadow on test-engine" in capsys.readouterr().err
    argv = ["mode", feed.url, KEY, "enforce", "--reason", "seen enough", "--yes"]
    assert await shell(*argv, "--token-file", token_files["operator"]) == 0
    assert engine.view(KEY).mode == "enforce"
    assert len(engine.audit.query(types=ev.MODE)) == 2


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        # usage: 64, nothing sent
        (["hold", "{url}", KEY, "--for", "30m"], 64),
        (["hold", "{url}", KEY, "--reason", "x"], 64),
        (["hold", "{url}", KEY, "--reason", "  ", "--for", "30m"], 64),
        (["hold", "{url}", KEY, "--reason", "x", "--for", "30 minutes"], 64),
        (["hold", "{url}", KEY, "--reason", "x", "--for", "1d"], 64),
        (["hold", "{url}", KEY, "--reason", "x" * 501, "--for", "30m"], 64),
        (["mode", "{url}", KEY, "off", "--reason", "x"], 64),
        (["mode", "{url}", KEY, "shadow"], 64),
        (["release", "{url}", KEY, "--timeout", "0"], 64),
        # the server's refusal: 5
        (["hold", "{url}", KEY, "--reason", "x", "--for", "25h"], 5),
        (["hold", "{url}", "ghost", "--reason", "x", "--for", "30m"], 5),
        (["release", "{url}", KEY], 5),  # not held
        (["release", "{url}", "ghost"], 5),
        (["mode", "{url}", "ghost", "shadow", "--reason", "x"], 5),
    ],
)
async def test_bad_input_has_reset_s_exit_code_and_changes_nothing(
    engine: Engine, feed, token_files, argv: list[str], code: int
) -> None:
    seq, before = engine.seq, engine.view(KEY)
    filled = [part.format(url=feed.url) for part in argv]
    assert await shell(*filled, "--yes", "--token-file", token_files["operator"]) == code
    assert (engine.seq, engine.view(KEY)) == (seq, before)


@pytest.mark.parametrize(
    "argv",
    [
        ["hold", "{url}", KEY, "--reason", "x", "--for", "30m"],
        ["mode", "{url}", KEY, "shadow", "--reason", "x"],
        ["release", "{url}", KEY],
    ],
)
async def test_a_viewer_token_is_refused_with_4_and_nothing_changes(
    engine: Engine, feed, token_files, argv: list[str], capsys
) -> None:
    engine.hold(KEY, "ops", "maintenance", 1800)
    seq, before = engine.seq, engine.view(KEY)
    filled = [part.format(url=feed.url) for part in argv]
    assert await shell(*filled, "--yes", "--token-file", token_files["viewer"]) == 4
    assert "needs the operator token" in capsys.readouterr().err
    assert (engine.seq, engine.view(KEY)) == (seq, before)


async def test_a_server_s_forbidden_reads_4_too(engine: Engine, feed, token_files, monkeypatch):
    """An older server's snapshot may not say the role: the server's `forbidden` is a 4."""
    real = remote.fetch_snapshot

    async def roleless(*args: Any, **kwargs: Any):
        return (await real(*args, **kwargs)).model_copy(update={"role": None})

    monkeypatch.setattr(remote, "fetch_snapshot", roleless)
    argv = ["hold", feed.url, KEY, "--reason", "x", "--for", "30m", "--yes"]
    assert await shell(*argv, "--token-file", token_files["viewer"]) == 4
    assert engine.view(KEY).state == "closed"


async def test_unreachable_is_3(token_files) -> None:
    argv = ["hold", "ws://127.0.0.1:9", KEY, "--reason", "x", "--for", "30m", "--yes"]
    assert await shell(*argv, "--token-file", token_files["operator"], "--timeout", "3") == 3


async def test_status_shows_a_hold_escaped_with_who_until_and_time_left_and_exits_1(
    engine: Engine, feed, token_files, capsys
) -> None:
    engine.hold(KEY, HOSTILE, "vendor\x1b[2J window", 1800)
    argv = ["status", feed.url, "--token-file", token_files["viewer"]]
    assert await shell(*argv) == 1
    out = capsys.readouterr().out
    header, row = out.splitlines()
    assert header.split()[:4] == ["KEY", "AGENT", "STATE", "MODE"]
    assert "HELD" in row.split() and "enforce" in row.split()
    assert f"held by {printable(HOSTILE)} until " in row and "(30m left)" in row
    assert printable("vendor\x1b[2J window") in row
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert await shell(*argv, "--json") == 1
    [breaker] = json.loads(capsys.readouterr().out)["breakers"]
    assert (breaker["state"], breaker["held_by"], breaker["mode"]) == ("held", HOSTILE, "enforce")


async def test_status_shows_each_breaker_s_mode(engine: Engine, feed, token_files, capsys) -> None:
    engine.set_mode(KEY, "shadow", "ops", "trial")
    assert await shell("status", feed.url, "--token-file", token_files["viewer"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[2:4] == ["CLOSED", "shadow"]


def test_each_write_has_reset_s_options_and_exit_codes() -> None:
    parser = build_parser()
    commands = parser._commands  # type: ignore[attr-defined]
    shared = {"--yes", "--token-file", "--operator", "--timeout", "--reason"}
    for name in ("reset", "hold", "release", "mode"):
        options = {o for a in commands[name]._actions for o in a.option_strings}
        assert shared <= options, name
        epilog = commands[name].epilog
        for code in ("0", "1", "3", "4", "5", "64"):
            assert f"\n  {code} " in epilog or epilog.startswith(f"  {code} "), (name, code)
