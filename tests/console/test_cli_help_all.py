"""Every option and positional of every subcommand says what it is, and every subcommand's
help ends with its own exit codes: one walk over the whole parser, so an option added later
without help fails here."""

from __future__ import annotations

import argparse

import pytest

from breakerdeck.console.cli import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_option_and_positional_of_every_subcommand_has_help() -> None:
    unexplained = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in subcommands().items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert unexplained == []


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_ends_its_help_with_exit_codes(name: str) -> None:
    epilog = subcommands()[name].epilog or ""
    assert epilog.startswith("exit codes:\n  0 ")
    assert "64" in epilog


def test_reset_lists_its_own_exit_codes_not_statuss() -> None:
    epilog = subcommands()["reset"].epilog or ""
    assert "paged" not in epilog
    assert "reset done" in epilog and "not confirmed: nothing sent" in epilog


def test_a_server_command_says_ctrl_c_stops_it_with_0() -> None:
    for name in ("serve", "web", "gateway", "mcp"):
        assert "130" not in (subcommands()[name].epilog or ""), name
