"""`breakerdeck gateway`: its arguments and its run, for the console's command line.

`add_gateway_parser(subparsers)` adds the command; `run_gateway(args)` runs it and returns the
exit status: 0 after a clean stop (or a config that checks out), 2 when it cannot start (a
config problem names the file, the table and the key).
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from breakerdeck.engine.front.arguments import (
    EXIT_START,
    USAGE_EXITS,
    add_door_flags,
    address,
    door_fields,
    exit_codes,
)
from breakerdeck.engine.text import counted

if TYPE_CHECKING:
    from breakerdeck.engine.front.gateway.options import Options


def _wall(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError("expected a wall time in seconds since 1970")
    return value


def add_gateway_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    gateway: argparse.ArgumentParser = subparsers.add_parser(
        "gateway",
        help="the agent policy on HTTP: agents call their platforms through the breaker",
        description="Agents call METHOD /p/<platform>/<path> with their bearer token; the "
        "gateway adds the platform credential and keeps one breaker per agent.",
        epilog=exit_codes(
            (0, "stopped (Ctrl-C or SIGTERM), or --check-config found the file good"),
            (2, "cannot start: the config, the state dir, TLS, or a port in use (said which)"),
            *USAGE_EXITS,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gateway.add_argument("--config", metavar="FILE", help="the gateway's TOML file")
    gateway.add_argument(
        "--listen",
        type=address,
        metavar="HOST:PORT",
        help="where agents call (default: [gateway] listen, else 127.0.0.1:8080)",
    )
    gateway.add_argument(
        "--shared",
        metavar="URL",
        help="share each agent's breaker with other replicas through Redis: redis://host:port/db "
        "or rediss://…, the password from [shared] password_env or password_file",
    )
    gateway.add_argument(
        "--clock-anchor",
        type=_wall,
        metavar="WALL",
        help="the wall time (Unix seconds) a sped-up clock runs from, the same for every "
        "replica; default: the one in the shared store, else the start",
    )
    add_door_flags(gateway, "gateway", "verdicts, audit log and the feed's tokens")
    gateway.add_argument("--scenario", help="with --demo: the scenario to play (default live-demo)")
    gateway.add_argument(
        "--demo",
        action="store_true",
        help="a generated config in front of the loopback fixture platforms, with simulated "
        "agents calling it over HTTP",
    )
    return gateway


def run_gateway(args: argparse.Namespace) -> int:
    from breakerdeck.engine.front.gateway.config import ConfigError, load, shared_settings
    from breakerdeck.engine.front.gateway.options import Options, say

    if not args.config:
        say("gateway: --config FILE is required (or --demo)")
        return EXIT_START
    try:
        config, digests = load(args.config)
        shared = shared_settings(args.config, config, args.shared)
    except ConfigError as error:
        say(str(error))
        return EXIT_START
    options = Options(
        **door_fields(args, config.gateway),
        config=config,
        digests=digests,
        listen=args.listen or config.gateway.listen,
        clock_anchor=args.clock_anchor,
        shared=shared,
    )
    if args.check_config:
        return _check(options)
    return _serve(options)


def _check(options: Options) -> int:
    """`--check-config`: the file, then the same checks the start makes before it binds."""
    from breakerdeck.engine.front.gateway.config import redis_address
    from breakerdeck.engine.front.gateway.options import check_start, say
    from breakerdeck.engine.front.serving import StartError

    try:
        check_start(options)
    except StartError as error:
        say(str(error))
        return EXIT_START
    config = options.config
    where = "" if options.shared is None else f", shared on {redis_address(options.shared.url)}"
    counts = f"{counted(len(config.platforms), 'platform')}, {counted(len(config.agents), 'agent')}"
    say(f"{options.config_path}: ok ({counts}{where})")
    return 0


def _serve(options: Options) -> int:
    from breakerdeck.engine.errors import StateDirError
    from breakerdeck.engine.front import logs, ports
    from breakerdeck.engine.front.gateway.options import check_start, say
    from breakerdeck.engine.front.gateway.server import run, serve
    from breakerdeck.engine.front.serving import StartError
    from breakerdeck.engine.storage import statedir

    logs.setup("gateway")
    try:
        check_start(options)
        ports.check_free([("the feed", options.feed_listen), ("metrics", options.metrics_listen)])
        sock = ports.bind("the gateway", options.listen)
        if options.state_dir is not None:
            statedir.prepare(options.state_dir)
        with sock:
            run(serve(options, sock))
    except (StartError, StateDirError) as error:
        say(str(error))
        return EXIT_START
    except OSError as error:
        # A port taken between the check above and the feed's own bind.
        say(f"gateway: cannot start: {error.strerror or error}")
        return EXIT_START
    except KeyboardInterrupt:
        pass
    say("gateway stopped")
    return 0
