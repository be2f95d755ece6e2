"""The command line's part of completion: `completion`'s shells and the hidden `__complete`
subcommand a completion script calls for keys and context names (kept apart from
`console.completion`, which writes the scripts, so that every command's parser stays light)."""

from __future__ import annotations

import argparse

from breakerdeck.engine.front.arguments import USAGE_EXITS, exit_codes

SHELLS = ("bash", "zsh", "fish")
#: Not listed in `--help` (no `help=`): only completion scripts call it.
COMPLETE = "__complete"


def add_complete_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    complete = commands.add_parser(
        COMPLETE,
        description="What a completion script asks for: the keys of an engine, or the names "
        "of contexts.toml, one a line (nothing, and exit 0, when it cannot be reached or read: "
        "a shell must not show errors).",
        epilog=exit_codes((0, "the words printed, or none"), *USAGE_EXITS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    complete.add_argument("what", choices=["keys", "contexts"], help="what to complete")
    complete.add_argument("url", nargs="?", default=None, help="keys: the engine's feed")
    complete.add_argument("--contexts", default=None, help="contexts: the file (as `watch`'s)")
    complete.add_argument("--token-file", default=None, help="the token (as `status` finds it)")
    complete.add_argument(
        "--timeout", type=float, default=2.0, help="seconds to wait for the engine (default: 2)"
    )
