"""What the command lines share: the exit status of a refused start, the argument types for
`--speed` and `HOST:PORT` flags, the help's exit codes, and the flags every door takes
(`add_door_flags`) with how they and the door's table decide together (`door_fields`).

Only argparse here: `breakerdeck --help` and the console's commands read this module."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from breakerdeck.engine.front.paths import resolve

if TYPE_CHECKING:
    from breakerdeck.engine.front.options import DoorTable

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


def add_door_flags(parser: argparse.ArgumentParser, table: str, kept: str) -> None:
    """The flags every front door takes, with the same names, help and meaning; `table` is the
    door's own table in its file, `kept` what its state dir holds."""
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help=f"{kept} (default: [{table}] state_dir; none: nothing is kept)",
    )
    parser.add_argument(
        "--feed-listen",
        type=address,
        metavar="HOST:PORT",
        help=f"serve the live feed for `watch` and `status` here (needs a state dir; default: "
        f"[{table}] feed_listen)",
    )
    parser.add_argument(
        "--metrics-listen",
        type=address,
        metavar="HOST:PORT",
        help=f"serve Prometheus metrics at http://HOST:PORT/metrics (default: [{table}] "
        "metrics_listen)",
    )
    parser.add_argument(
        "--speed",
        type=speed,
        default=1.0,
        metavar="N",
        help="the breakers' clock runs N times real time, 0.1 to 1000 (default: 1; for demos)",
    )
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


class DoorFields(TypedDict):
    config_path: Path
    state_dir: Path | None
    feed_listen: str | None
    metrics_listen: str | None
    speed: float
    insecure_bind: bool
    viewer_token_file: str | None
    operator_token_file: str | None
    events: Path | None


def door_fields(args: argparse.Namespace, table: DoorTable) -> DoorFields:
    """The shared options from `add_door_flags`' flags and the door's table: a flag wins; a
    state dir named in the file is beside the file, as every other path in it is."""
    state_dir = args.state_dir or (table.state_dir and resolve(args.config, table.state_dir))
    return DoorFields(
        config_path=Path(args.config),
        state_dir=None if state_dir is None else Path(state_dir).expanduser(),
        feed_listen=args.feed_listen or table.feed_listen,
        metrics_listen=args.metrics_listen or table.metrics_listen,
        speed=args.speed,
        insecure_bind=args.insecure_bind,
        viewer_token_file=args.viewer_token_file,
        operator_token_file=args.operator_token_file,
        events=None if args.events is None else Path(args.events),
    )


def exit_codes(*rows: tuple[int, str]) -> str:
    """A command's help epilog: its own exit codes, one a line (print it with argparse's
    RawDescriptionHelpFormatter)."""
    return "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in rows)


#: The end of every command's exit codes.
USAGE_EXITS = ((64, "a usage mistake (one line on standard error)"), (74, "standard output closed"))
