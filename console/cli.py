"""The `breakerdeck` command line: one sub-command per way of using the engine."""

from __future__ import annotations

import argparse
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "scenarios":
        from console.headless import list_scenarios

        return list_scenarios(sys.stdout)
    if args.command == "demo" and args.headless:
        from console.headless import run_headless

        return run_headless(args)
    from console.demo import run_demo

    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
