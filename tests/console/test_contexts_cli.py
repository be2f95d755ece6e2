"""Issue 35 at the command line: `watch --context`, `--contexts`, `--view`; a refused file is
exit 78 naming it, an unknown name is a usage mistake (64) naming the known ones. Each is said
before any console starts."""

from __future__ import annotations

from tests.console.test_contexts_file import PROD, write


def test_watch_refuses_a_group_writable_contexts_file_naming_it(cli_run, config_home):
    path = write(config_home / "contexts.toml", PROD, 0o660)
    code, err = cli_run(["watch", "--context", "prod"])
    assert code == 78
    assert f"refused: file {path} is writable by others" in err


def test_watch_names_the_known_contexts_for_an_unknown_one(cli_run, tmp_path):
    path = write(tmp_path / "fleet.toml", PROD)
    code, err = cli_run(["watch", "--contexts", str(path), "--context", "prod", "--context", "qa"])
    assert code == 64
    assert f"no context 'qa' in {path}" in err and "(known: prod, staging)" in err


def test_a_name_from_the_command_line_is_said_escaped(cli_run, config_home):
    write(config_home / "contexts.toml", PROD)
    code, err = cli_run(["watch", "--context", "\x1b]0;pwned\x07"])
    assert code == 64
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07" in err


def test_each_problem_of_a_contexts_file_is_a_line_of_its_own(cli_run, config_home):
    write(config_home / "contexts.toml", '[contexts.a]\nurls = "ws://a:1"\ncolour = "red"\n')
    code, err = cli_run(["watch", "--context", "a"])
    assert code == 78
    lines = [line for line in err.splitlines() if "contexts.toml" in line]
    assert len(lines) == 2, err
    assert any("key 'colour': unknown key" in line for line in lines)


def test_demo_and_replay_name_the_known_views_for_an_unknown_one(cli_run, tmp_path):
    code, err = cli_run(["demo", "--view", "billing"])
    assert code == 64
    assert "no view 'billing'" in err and "(known: open, held, probing)" in err
    code, err = cli_run(["replay", str(tmp_path / "trace.jsonl"), "--view", "billing"])
    assert code == 64


def test_a_views_file_others_can_write_stops_a_console_from_starting(cli_run, config_home):
    path = write(config_home / "views.toml", '[views.mine]\nfilter = "pay"\n', 0o646)
    code, err = cli_run(["demo", "--view", "open"])
    assert code == 78
    assert f"refused: file {path} is writable by others" in err


def test_watch_takes_urls_or_contexts_and_a_context_brings_its_own_token(cli_run):
    for argv in (
        ["watch"],
        ["watch", "ws://127.0.0.1:1", "--context", "prod"],
        ["watch", "--context", "prod", "--token-file", "t"],
        ["watch", "ws://127.0.0.1:1", "--contexts", "fleet.toml"],
    ):
        code, err = cli_run(argv)
        assert code == 64, argv
        assert err.startswith("breakerdeck watch: "), err
