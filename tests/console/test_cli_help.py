"""The command line tells a newcomer what it is and what went wrong: `--version`, a mistyped
option reported by its own command with the nearest it knows, exit codes in `status` and
`reset`'s help, and a mistyped key answered with the nearest and how many more there are."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from breakerdeck.console.cli import EXIT_USAGE, main
from breakerdeck.console.remote import EXIT_ERROR
from tests.console.test_status import clock, engine, feed  # noqa: F401 - pytest fixtures
from tests.feed.feedkit import OPERATOR, call


def test_version_names_the_installed_package(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("breakerdeck 0.")


def test_a_mistyped_option_is_reported_by_its_command_with_the_nearest_it_knows(capsys):
    with pytest.raises(SystemExit) as done:
        main(["gateway", "--confg", "x.toml"])
    assert done.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "breakerdeck gateway: unrecognized arguments: --confg x.toml" in err
    assert "did you mean --config?" in err and "(see breakerdeck gateway --help)" in err


def test_an_option_like_nothing_known_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--zzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzz" in err and "did you mean" not in err


@pytest.mark.parametrize("command", ["status", "reset"])
def test_status_and_reset_help_list_their_exit_codes(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    for code in ("3   unreachable", "4   the token was refused", "5   the server refused"):
        assert code in out


async def test_a_mistyped_key_gets_the_nearest_and_the_count_of_the_rest(
    engine,  # noqa: F811 - the fixture
    feed,  # noqa: F811
    tmp_path: Path,
    capsys,
):
    for n in range(12):
        call(engine, f"agent-{n:02d}")
    call(engine, "calendar-butler")
    token = tmp_path / "operator.token"
    token.write_text(OPERATOR)
    argv = ["reset", feed.url, "calender-butler", "--yes", "--token-file", str(token)]
    assert await asyncio.to_thread(main, argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "did you mean 'calendar-butler'?" in err
    assert "… 3 more" in err  # 13 keys: ten named, then how many are not
