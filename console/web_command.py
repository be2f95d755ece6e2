"""`breakerdeck web`'s command line: its options, and the console command it serves, checked.

Kept apart from the server (`console.web`) so that the command line does not import aiohttp
and textual-serve for every other command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn
from urllib.parse import urlsplit

from breakerdeck.engine.front.arguments import USAGE_EXITS, exit_codes

#: `--max-consoles`: each console is a process of its own (about 60 MB).
CONSOLES_RANGE = (1, 64)
DEFAULT_CONSOLES = 4
#: The commands whose console can be served.
SERVED = ("demo", "watch", "replay")
#: What the served command may not be given, and why.
_REFUSED = {
    "headless": "demo --headless has no console to serve",
    "state_dir": "demo --state-dir: every browser's demo would share one state dir",
    "operator": "--operator: resets from the web are written as web:ADDRESS",
}


def _consoles(text: str) -> int:
    low, high = CONSOLES_RANGE
    if not text.isdigit() or not low <= int(text) <= high:
        raise argparse.ArgumentTypeError(f"must be {low} to {high}, got {text!r}")
    return int(text)


def _listen(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def _public_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"expected http(s)://host[:port], got {text!r}")
    return text.rstrip("/")


def add_web_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    web = commands.add_parser(
        "web",
        help="the console in a browser: web [options] demo|watch|replay [their options]",
        description="Serve the console to browsers (textual-serve). Each browser tab gets a "
        "console of its own, started from the command given after the options. A browser "
        "opens URL/?token=TOKEN once; the token's role (viewer: read only; operator: resets "
        "too) is then kept in a cookie.",
        epilog=exit_codes(
            (0, "stopped (Ctrl-C or SIGTERM)"),
            (2, "cannot start: the token files, the TLS files, or the address (said which)"),
            *USAGE_EXITS,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    web.add_argument(
        "--listen",
        type=_listen,
        default="127.0.0.1:8000",
        metavar="HOST:PORT",
        help="where browsers connect (default: 127.0.0.1:8000)",
    )
    web.add_argument(
        "--viewer-token-file", metavar="FILE", help="a token that lets a browser watch, read only"
    )
    web.add_argument(
        "--operator-token-file", metavar="FILE", help="a token that lets a browser reset too"
    )
    web.add_argument(
        "--tls-cert", metavar="FILE", help="serve https with this certificate (with --tls-key)"
    )
    web.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    web.add_argument(
        "--insecure-bind", action="store_true", help="allow a non-loopback address without TLS"
    )
    web.add_argument(
        "--public-url",
        type=_public_url,
        metavar="URL",
        help="the URL browsers use, when a proxy stands in front (default: from --listen)",
    )
    web.add_argument(
        "--max-consoles",
        type=_consoles,
        default=DEFAULT_CONSOLES,
        metavar="N",
        help=f"consoles running at once, {CONSOLES_RANGE[0]} to {CONSOLES_RANGE[1]} "
        f"(default {DEFAULT_CONSOLES})",
    )
    web.add_argument(
        "console",
        nargs=argparse.REMAINDER,
        metavar="COMMAND ...",
        help="the console each browser tab gets: demo, watch or replay, with their options",
    )


def served_argv(
    console: list[str],
    *,
    parse: Callable[[list[str]], argparse.Namespace],
    refuse: Callable[[str], NoReturn],
) -> list[str]:
    """The console's command line, checked by `parse` as the console would check it, so that
    a mistake is told once at start and not in every browser (`refuse` exits 64); then how to
    execute it."""
    if not console or console[0] not in SERVED:
        refuse(f"name the console to serve: one of {', '.join(SERVED)}")
    args = parse(console)
    for name, why in _REFUSED.items():
        if getattr(args, name, None):
            refuse(why)
    return [sys.executable, "-m", "breakerdeck.console.cli", *console]
