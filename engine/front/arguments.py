"""What both doors' command lines share: the exit status of a refused start, the argument
types for `--speed` and `HOST:PORT` flags and the flags every door takes, so `gateway` and
`mcp` read a flag alike."""

from __future__ import annotations

import argparse
import math

EXIT_START = 2

#: `--speed`: the design's tests stay at or below 10; demos go faster.
SPEED_RANGE = (0.1, 1000.0)


def speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    low, high = SPEED_RANGE
    if not math.isfinite(value) or not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be at least {low:g} and at most {high:g}")
    return value


def address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def add_door_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every front door takes, with the same names, help and meaning."""
    parser.add_argument(
        "--events",
        metavar="FILE",
        help="write the headless trace's lines (every call and transition) to FILE",
    )
    parser.add_argument("--check-config", action="store_true", help="validate and exit")
    parser.add_argument(
        "--insecure-bind", action="store_true", help="allow a non-loopback address without TLS"
    )
    parser.add_argument(
        "--viewer-token-file",
        metavar="FILE",
        help="the feed's read-only token (default: viewer.token in the state dir, made if missing)",
    )
    parser.add_argument(
        "--operator-token-file",
        metavar="FILE",
        help="the feed's token that may reset (default: operator.token in the state dir, made "
        "if missing)",
    )


def exit_codes(*rows: tuple[int, str]) -> str:
    """A command's help epilog: its own exit codes, one a line (print it with argparse's
    RawDescriptionHelpFormatter)."""
    return "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in rows)


#: The end of every command's exit codes.
USAGE_EXITS = ((64, "a usage mistake (one line on standard error)"), (74, "standard output closed"))
