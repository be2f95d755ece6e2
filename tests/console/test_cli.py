"""Mistakes on the command line and in what it is pointed at: a message, an exit status, never a
traceback. Each goes through the real parser and `main()`; the state dirs, scenario files and
pipes are real ones."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from breakerdeck.console import cli, headless
from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.text import printable

ESCAPES = "x\x1b]0;owned\x07\x1b[2J"


@pytest.fixture
def parser_only(monkeypatch):
    """Fail loudly if a command runs: these mistakes must be caught by the parser."""

    def ran(args: argparse.Namespace) -> int:
        raise AssertionError(f"the command ran with {args}")

    monkeypatch.setattr(cli, "_run", ran)


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--speed", "nan"],
        ["demo", "--speed", "1e-300"],
        ["demo", "--speed", "inf"],
        ["serve", "--speed", "5000"],
        ["demo", "--headless", "--duration", "nan"],
        ["demo", "--headless", "--duration", "1e300"],
        ["serve", "--port", "70000"],
        ["serve", "--port", "http"],
        ["status", "not-a-url"],
        ["status", "http://127.0.0.1:8765"],
        ["status", "ws://127.0.0.1:99999"],
        ["status", "ws://127.0.0.1:8765", "--timeout", "nan"],
        ["watch", "ws://127.0.0.1:8765", "not-a-url"],
        ["reset", "ws://127.0.0.1:8765", "ava", "--operator", "o" * 201],
        ["demo", "--operator", "o" * 201],
        ["watch", "ws://127.0.0.1:8765", "--operator", "o" * 201],
        ["status"],
        ["no-such-command"],
    ],
)
def test_a_usage_mistake_is_one_line_and_exit_64(argv, cli_run, parser_only):
    code, err = cli_run(argv)
    assert code == cli.EXIT_USAGE
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("breakerdeck")


@pytest.mark.parametrize(
    ("option", "at_the_bound", "beyond"),
    [
        ("--speed", "0.1", "0.099"),
        ("--speed", "1000", "1000.1"),
        ("--duration", str(366 * 86400), str(366 * 86400 + 1)),
        ("--operator", "o" * 200, "o" * 201),
    ],
    ids=["slowest", "fastest", "longest", "operator"],
)
def test_demo_takes_a_value_at_its_bound_and_refuses_one_beyond(
    option, at_the_bound, beyond, cli_run, parser_only
):
    parser = cli.build_parser()
    parser.parse_args(["demo", option, at_the_bound])
    code, err = cli_run(["demo", option, beyond])
    assert code == cli.EXIT_USAGE and option in err


def test_reset_takes_a_reason_and_key_at_the_feeds_limits_and_not_beyond(cli_run, parser_only):
    url = "wss://h.example:443/feed"
    args = cli.build_parser().parse_args(["reset", url, "k" * 1024, "--reason", "r" * 500])
    assert (len(args.key), len(args.reason)) == (1024, 500)
    assert cli_run(["reset", url, "k", "--reason", "r" * 501])[0] == cli.EXIT_USAGE
    assert cli_run(["reset", url, "k" * 1025])[0] == cli.EXIT_USAGE


def test_a_stray_argument_is_quoted_escaped(cli_run, parser_only):
    code, err = cli_run(["status", "ws://127.0.0.1:8765", ESCAPES])
    assert code == cli.EXIT_USAGE
    assert f"unrecognized arguments: {printable(ESCAPES)}" in err and "\x1b" not in err


def test_watch_with_token_files_not_matching_the_urls_is_a_usage_error(cli_run, tmp_path):
    token = tmp_path / "t"
    token.write_text("tok\n")
    argv = ["watch", "ws://127.0.0.1:9", "ws://127.0.0.1:10", "ws://127.0.0.1:11"]
    code, err = cli_run([*argv, "--token-file", str(token), "--token-file", str(token)])
    assert code == cli.EXIT_USAGE
    assert "one per URL" in err


# -- headless: files and state dirs ------------------------------------------------------------


def headless_argv(*more: str) -> list[str]:
    return ["demo", "--headless", "--duration", "60", *more]


def test_a_trace_path_in_a_missing_dir_is_an_io_error(cli_run, tmp_path):
    code, err = cli_run(headless_argv("--events", str(tmp_path / "missing" / "x")))
    assert code == 74
    assert "cannot write the trace" in err and "No such file or directory" in err


def test_a_state_dir_that_is_not_a_dir_is_refused_with_a_message(cli_run, tmp_path):
    code, err = cli_run(headless_argv("--events", str(tmp_path / "t"), "--state-dir", "/dev/null"))
    assert code == headless.EXIT_START
    assert "state dir /dev/null" in err


def world_writable(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o777)
    return path


def test_a_state_dir_others_can_write_is_refused(cli_run, tmp_path):
    shared = world_writable(tmp_path / "shared")
    code, err = cli_run(headless_argv("--events", str(tmp_path / "t"), "--state-dir", str(shared)))
    assert code == headless.EXIT_START
    assert "writable by others" in err
    assert list(shared.iterdir()) == []  # nothing written there


def test_a_state_dir_another_engine_holds_is_a_message(cli_run, tmp_path):
    """The engine's own refusal (its lock: another process is using the dir) is printed."""
    held = tmp_path / "held"
    argv = headless_argv("--events", str(tmp_path / "t"), "--state-dir", str(held))
    holder = Engine(AgentPolicy(), state_dir=held)
    try:
        code, err = cli_run(argv)
    finally:
        holder.close()
    assert code == headless.EXIT_START
    assert "in use by another breakerdeck process" in err


def test_a_second_serve_on_a_held_state_dir_touches_no_token(cli_run, tmp_path):
    """The lock is taken before the tokens: the refused process writes and reads nothing."""
    held = tmp_path / "held"
    holder = Engine(AgentPolicy(), state_dir=held)
    try:
        code, err = cli_run(["serve", "--state-dir", str(held), "--port", "0"])
    finally:
        holder.close()
    assert code == headless.EXIT_START
    assert "in use by another breakerdeck process" in err
    assert not list(held.glob("*.token"))


def test_the_console_demo_refuses_a_bad_state_dir_before_opening_the_screen(
    cli_run, tmp_path, monkeypatch
):
    opened = []
    monkeypatch.setattr(BreakerdeckApp, "run", lambda self, *a, **k: opened.append(self))
    code, err = cli_run(["demo", "--state-dir", str(world_writable(tmp_path / "shared"))])
    assert code == 2 and opened == []
    assert "writable by others" in err


def test_serve_refuses_a_state_dir_others_can_write_before_serving(cli_run, tmp_path, monkeypatch):
    from breakerdeck.engine.feed import server

    def served(*args, **kwargs):
        raise AssertionError("served on an untrusted state dir")

    monkeypatch.setattr(server, "serve_feed", served)
    shared = world_writable(tmp_path / "shared")
    code, err = cli_run(["serve", "--port", "0", "--state-dir", str(shared)])
    assert code == 2
    assert "writable by others" in err
    assert not (shared / "viewer.token").exists()


def test_serve_refuses_dev_null_as_its_state_dir(cli_run):
    code, err = cli_run(["serve", "--port", "0", "--state-dir", "/dev/null"])
    assert code == 2
    assert "state dir /dev/null" in err


# -- scenario files ----------------------------------------------------------------------------


def test_a_scenario_that_is_not_utf8_is_a_message(cli_run, tmp_path):
    bad = tmp_path / "latin.toml"
    bad.write_bytes('description = "caf\xe9"\npolicies = ["agent"]\n'.encode("latin-1"))
    code, err = cli_run(headless_argv("--events", str(tmp_path / "t"), "--scenario", str(bad)))
    assert code == headless.EXIT_START
    assert "latin.toml: not UTF-8" in err


def test_a_scenario_naming_an_unknown_platform_fails_before_running(cli_run, tmp_path):
    typo = tmp_path / "typo.toml"
    typo.write_text(
        'description = "d"\npolicies = ["agent"]\n[[steps]]\nat = 5\nplatform = "paymnts"\n'
        'fault = "refused"\n'
    )
    trace = tmp_path / "t"
    code, err = cli_run(headless_argv("--events", str(trace), "--scenario", str(typo)))
    assert code == headless.EXIT_START
    assert "steps[0].platform: no platform 'paymnts'" in err and "payments" in err
    assert not trace.exists()


def test_a_scenario_name_with_escape_codes_is_shown_escaped(cli_run, tmp_path):
    missing = tmp_path / f"{ESCAPES}.toml"
    code, err = cli_run(headless_argv("--events", str(tmp_path / "t"), "--scenario", str(missing)))
    assert code == headless.EXIT_START
    assert printable(ESCAPES) in err and "\x1b" not in err


# -- serve's tokens ------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_serve_refuses_a_token_link_to_another_users_file_and_leaves_it_alone(tmp_path):
    from breakerdeck.console import remote

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    planted = tmp_path / "planted"
    planted.write_text("a token someone else chose\n")
    planted.chmod(0o644)
    os.chown(planted, 12345, 12345)
    (state / "viewer.token").symlink_to(planted)
    args = cli.build_parser().parse_args(["serve"])
    with pytest.raises(StateDirError, match="belongs to uid 12345"):
        remote.serve_tokens(args, state)
    assert stat.S_IMODE(planted.stat().st_mode) == 0o644


def test_serve_reads_a_token_link_of_ours_and_never_changes_the_file_it_reaches(tmp_path):
    """A link put in the state dir on purpose (a mounted secret): read, not rewritten."""
    from breakerdeck.console import remote

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    secret = tmp_path / "mounted-secret"
    secret.write_text("viewer-from-the-secret\n")
    secret.chmod(0o644)
    (state / "viewer.token").symlink_to(secret)
    args = cli.build_parser().parse_args(["serve"])
    viewer, _ = remote.serve_tokens(args, state)
    assert viewer == "viewer-from-the-secret"
    assert (state / "viewer.token").is_symlink()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o644


def test_a_standard_error_nobody_reads_leaves_the_exit_status_alone(tmp_path):
    """`status` on an unreachable URL says so on standard error and exits 3; with that closed,
    it still exits 3 (no traceback, no other number)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    done = subprocess.run(
        [sys.executable, "-m", "breakerdeck.console.cli", "status", "ws://127.0.0.1:9"],
        stderr=write_end,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path), "BREAKERDECK_TOKEN": "t"},
        timeout=60,
    )
    os.close(write_end)
    assert done.returncode == 3


@pytest.mark.parametrize("command", ["gateway", "mcp"])
def test_the_front_doors_are_breakerdeck_commands(cli_run, tmp_path, command):
    """A config that is not there is named, from the one `breakerdeck` entry point."""
    missing = tmp_path / "nowhere.toml"
    code, err = cli_run([command, "--config", str(missing), "--check-config"])
    assert code == 2
    assert str(missing) in err
