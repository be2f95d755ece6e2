"""`breakerdeck status`, `reset` and `serve` (console.remote) against a live feed."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from breakerdeck.console import remote
from breakerdeck.console.cli import build_parser
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import RESET
from breakerdeck.engine.feed.client import fetch_snapshot
from breakerdeck.engine.feed.server import serve_feed
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy
from tests.feed.feedkit import AUTH, OPERATOR, VIEWER, call, trip
from tests.waiting import BOUND_SECONDS


@pytest.fixture(autouse=True)
def no_default_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(remote.TOKEN_ENV, raising=False)


async def status(url: str, token_file: str | None, *, as_json: bool = False) -> int:
    argv = ["status", url, "--timeout", "3", *(["--json"] if as_json else [])]
    argv += ["--token-file", token_file] if token_file else []
    return await asyncio.to_thread(remote.run_status, build_parser().parse_args(argv))


async def test_status_exit_codes_follow_the_worst_breaker(
    engine: Engine, clock: ManualClock, feed, token_files, capsys
) -> None:
    call(engine, "agent-2")
    assert await status(feed.url, token_files["viewer"]) == 0
    out = capsys.readouterr().out
    assert "agent-2" in out and "CLOSED" in out

    trip(engine, "agent-1")
    assert await status(feed.url, token_files["viewer"]) == 1
    out = capsys.readouterr().out
    assert "OPEN" in out and "auth_failure" in out

    for _ in range(2):  # two failed probes: the page
        clock.advance(300)
        call(engine, "agent-1", AUTH)
    assert engine.view("agent-1").paged
    assert await status(feed.url, token_files["viewer"], as_json=True) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["exit_status"] == 2
    assert {b["key"]: b["paged"] for b in report["breakers"]} == {"agent-1": True, "agent-2": False}
    assert report["source"] == "test-engine"


async def test_status_on_a_paused_credential_is_one(token_files, tmp_path) -> None:
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=tmp_path / "tool-state")
    key = "crm@crm-sales"
    call(engine, key)  # the credential works once...
    call(engine, key, Outcome(OutcomeClass.CREDENTIAL_REVOKED))  # ...then a 401 pauses it
    assert engine.view(key).paused
    async with serve_feed(engine, port=0, viewer_token=VIEWER, operator_token=OPERATOR) as feed:
        assert await status(feed.url, token_files["viewer"]) == 1
    engine.close()


async def test_status_errors_have_their_own_codes(feed, token_files, tmp_path, capsys) -> None:
    wrong = tmp_path / "wrong.token"
    wrong.write_text("nope\n")
    assert await status(feed.url, str(wrong)) == remote.EXIT_REFUSED
    assert "refused the token" in capsys.readouterr().err
    assert await status("ws://127.0.0.1:9", token_files["viewer"]) == remote.EXIT_UNREACHABLE
    assert "cannot reach" in capsys.readouterr().err
    assert await status(feed.url, None) == remote.EXIT_REFUSED  # no token anywhere
    assert "no token" in capsys.readouterr().err


async def test_status_finds_the_token_serve_wrote(feed, tmp_path, monkeypatch) -> None:
    state = tmp_path / "xdg" / "breakerdeck"
    state.mkdir(parents=True)
    (state / "viewer.token").write_text(VIEWER)
    assert await status(feed.url, None) == 0
    monkeypatch.setenv(remote.TOKEN_ENV, OPERATOR)
    assert await status(feed.url, None) == 0


async def reset(url: str, key: str, token_file: str, *, yes: bool, answer: str = "") -> int:
    argv = ["reset", url, key, "--reason", "vault fixed", "--token-file", token_file]
    args = build_parser().parse_args([*argv, "--operator", "carol", *(["--yes"] if yes else [])])

    def run() -> int:
        saved = sys.stdin
        sys.stdin = io.StringIO(answer)
        try:
            return remote.run_write(args)
        finally:
            sys.stdin = saved

    return await asyncio.to_thread(run)


async def test_reset_asks_first_and_resets_over_the_feed(engine: Engine, feed, token_files) -> None:
    trip(engine, "agent-1")
    assert await reset(feed.url, "agent-1", token_files["operator"], yes=False, answer="n\n") == 1
    assert engine.view("agent-1").state == "open"
    assert await reset(feed.url, "agent-1", token_files["operator"], yes=False, answer="") == 1
    assert engine.view("agent-1").state == "open"
    assert await reset(feed.url, "agent-1", token_files["operator"], yes=False, answer="y\n") == 0
    assert engine.view("agent-1").state == "closed"
    [audited] = engine.audit.query(types=RESET)
    assert audited.fields["actor"] == "remote:operator:carol"
    assert audited.fields["reason"] == "vault fixed"
    # --yes skips the question; a closed breaker is reset and audited too.
    assert await reset(feed.url, "agent-1", token_files["operator"], yes=True) == 0
    assert len(engine.audit.query(types=RESET)) == 2


async def test_reset_refusals(engine: Engine, feed, token_files, capsys) -> None:
    trip(engine, "agent-1")
    assert await reset(feed.url, "ghost", token_files["operator"], yes=True) == remote.EXIT_ERROR
    assert "'ghost'" in capsys.readouterr().err
    # A viewer's token is a refused token (4, as DESIGN gives it), not the server's refusal.
    assert await reset(feed.url, "agent-1", token_files["viewer"], yes=True) == remote.EXIT_REFUSED
    assert "needs the operator token" in capsys.readouterr().err
    assert engine.view("agent-1").state == "open"


def test_serve_tokens_are_generated_with_mode_0600_and_reused(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve"])
    viewer, operator = remote.serve_tokens(args, tmp_path)
    assert viewer != operator
    for name in ("viewer.token", "operator.token"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    assert remote.serve_tokens(args, tmp_path) == (viewer, operator)
    (tmp_path / "viewer.token").chmod(0o644)
    remote.serve_tokens(args, tmp_path)
    assert stat.S_IMODE((tmp_path / "viewer.token").stat().st_mode) == 0o600


async def test_serve_runs_a_simulation_behind_the_feed(tmp_path: Path) -> None:
    """The real command in a subprocess: tokens written, feed up, events flowing."""
    port_probe = __import__("socket").socket()
    port_probe.bind(("127.0.0.1", 0))
    port = port_probe.getsockname()[1]
    port_probe.close()
    state = tmp_path / "state"
    code = (
        "import sys; from breakerdeck.console.cli import main; "
        f"sys.exit(main(['serve', '--port', '{port}', '--speed', '20', "
        f"'--state-dir', {str(state)!r}, '--source', 'sim']))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, env=env)
    try:
        token_file = state / "viewer.token"
        deadline = time.monotonic() + BOUND_SECONDS
        snapshot = None
        while snapshot is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            if not token_file.exists():
                continue
            try:
                snapshot = await fetch_snapshot(
                    f"ws://127.0.0.1:{port}", token_file.read_text().strip(), timeout=2
                )
            except Exception:
                continue
        assert snapshot is not None, "serve never came up"
        assert snapshot.source == "sim"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND_SECONDS)
    assert proc.returncode == 0, err.decode()
    assert b"viewer token in" in err
