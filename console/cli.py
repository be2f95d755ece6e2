"""The `breakerdeck` command line: one sub-command per way of using the engine."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="breakerdeck",
        description="Circuit breakers for AI agents' tool calls, and the console to watch them.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="the console on an in-process engine and simulated agents"
    )
    demo.add_argument(
        "--scenario", default=None, help="scenario name (see `breakerdeck scenarios`)"
    )
    demo.add_argument("--policy", choices=["agent", "tool"], default="agent")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--speed",
        type=_positive,
        default=None,
        help="simulated seconds per real second (console default: 5; headless: as fast as it can)",
    )
    demo.add_argument("--state-dir", default=None, help="keep verdicts and audit log here")
    demo.add_argument("--operator", default=None, help="name written on resets (default: login)")
    demo.add_argument("--headless", action="store_true", help="no screen: write the event trace")
    demo.add_argument(
        "--duration", type=_positive, default=3600.0, help="simulated seconds to run (headless)"
    )
    demo.add_argument("--events", default="-", help="trace output path, or - for stdout (headless)")
    demo.add_argument("--on-page", default=None, help="command run with each page event as JSON")

    commands.add_parser("scenarios", help="list the scenarios and what each demonstrates")

    serve = commands.add_parser(
        "serve", help="simulated agents on an engine, served over the live feed"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--scenario", default=None, help="scenario name (see `breakerdeck scenarios`)"
    )
    serve.add_argument(
        "--speed",
        type=_positive,
        default=1.0,
        help="simulated seconds per real second (default: real time)",
    )
    serve.add_argument("--seed", type=int, default=7)
    serve.add_argument("--policy", choices=["agent", "tool"], default="agent")
    serve.add_argument("--operator-token-file", default=None)
    serve.add_argument("--viewer-token-file", default=None)
    serve.add_argument(
        "--state-dir",
        default=None,
        help="verdicts, audit log, generated tokens (default: ~/.local/state/breakerdeck)",
    )
    serve.add_argument("--on-page", default=None, help="command run with each page event as JSON")
    serve.add_argument(
        "--source", default=None, help="this engine's label in consoles (default: hostname:port)"
    )

    status = commands.add_parser(
        "status", help="one-shot table or JSON of a remote engine's breakers"
    )
    status.add_argument("url")
    status.add_argument("--json", action="store_true")
    status.add_argument("--token-file", default=None)
    status.add_argument("--timeout", type=_positive, default=10.0)

    watch = commands.add_parser(
        "watch", help="the console on one or more remote engines (replicas of a service)"
    )
    watch.add_argument("urls", nargs="+", metavar="URL", help="ws://host:port of each engine")
    watch.add_argument(
        "--token-file",
        action="append",
        default=None,
        help="token for every URL, or repeat once per URL (default: $BREAKERDECK_TOKEN, then "
        "operator.token / viewer.token in the default state dir)",
    )
    watch.add_argument("--operator", default=None, help="name written on resets (default: login)")
    watch.add_argument("--timeout", type=_positive, default=10.0, help="seconds to connect")

    reset = commands.add_parser("reset", help="reset one breaker on a remote engine")
    reset.add_argument("url")
    reset.add_argument("key")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    reset.add_argument("--reason", default=None)
    reset.add_argument("--token-file", default=None)
    reset.add_argument(
        "--operator", default=None, help="name written on the reset (default: login)"
    )
    reset.add_argument("--timeout", type=_positive, default=10.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader left (`status --json | head`): end quietly, with nothing more to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "scenarios":
        from breakerdeck.console.headless import list_scenarios

        return list_scenarios(sys.stdout)
    if args.command in ("serve", "status", "reset"):
        from breakerdeck.console import remote

        runner = {"serve": remote.run_serve, "status": remote.run_status, "reset": remote.run_reset}
        return runner[args.command](args)
    if args.command == "watch":
        from breakerdeck.console.remote_source import run_watch

        return run_watch(args)
    if args.command == "demo" and args.headless:
        from breakerdeck.console.headless import run_headless

        return run_headless(args)
    from breakerdeck.console.demo import run_demo

    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
