"""`breakerdeck mcp`: its arguments and its run, for the console's command line.

`add_mcp_parser(subparsers)` adds the command; `run_mcp(args)` runs it and returns the exit
status: 0 after a clean stop (or a config that checks out), 2 when it cannot start (a config
problem names the file, the table and the key).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from breakerdeck.engine.front import logs, ports
from breakerdeck.engine.front.arguments import (
    EXIT_START,
    USAGE_EXITS,
    add_door_flags,
    address,
    door_fields,
    exit_codes,
)
from breakerdeck.engine.text import counted


def add_mcp_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    mcp: argparse.ArgumentParser = subparsers.add_parser(
        "mcp",
        help="the tool policy for MCP: a breaker in front of every MCP server a host uses",
        description="An MCP server to the host (stdio, or streamable HTTP with --http) in front "
        "of the upstream MCP servers the config names; their tools are listed as "
        "<server>__<tool>, each server behind its own breaker.",
        epilog=exit_codes(
            (
                0,
                "stopped (the host closed stdio, Ctrl-C or SIGTERM), --check-config found the "
                "file good, or --from-host-config wrote the config",
            ),
            (
                2,
                "cannot start: the config, the state dir, a port in use (said which); or "
                "--from-host-config wrote nothing",
            ),
            *USAGE_EXITS,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mcp.add_argument("--config", metavar="FILE", help="the proxy's TOML file")
    mcp.add_argument(
        "--http", type=address, metavar="HOST:PORT", help="serve streamable HTTP, not stdio"
    )
    mcp.add_argument("--token-file", metavar="FILE", help="the bearer token hosts send (--http)")
    add_door_flags(mcp, "proxy", "verdicts, audit log, tool lists and the feed's tokens")
    mcp.add_argument(
        "--from-host-config",
        metavar="FILE",
        help="write the proxy's config for a host's mcpServers JSON into --out DIR, and print "
        "the host's one entry for the proxy",
    )
    mcp.add_argument("--out", metavar="DIR", help="where --from-host-config writes (0700)")
    mcp.add_argument(
        "--demo",
        action="store_true",
        help="the proxy over fixture MCP servers with a scripted MCP client driving it",
    )
    return mcp


def run_mcp(args: argparse.Namespace) -> int:
    import anyio

    from breakerdeck.engine.errors import StateDirError
    from breakerdeck.engine.front.mcp.options import McpOptions, check_start, say
    from breakerdeck.engine.front.mcp.settings.config import ConfigError, check_commands, load
    from breakerdeck.engine.front.serving import StartError
    from breakerdeck.engine.storage import statedir

    logs.setup("mcp")
    if args.from_host_config:
        return _from_host_config(args)
    if not args.config:
        say("--config FILE is required (or --demo)")
        return EXIT_START
    try:
        config = load(args.config)
    except ConfigError as error:
        say(str(error))
        return EXIT_START
    options = McpOptions(
        **door_fields(args, config.proxy),
        config=config,
        http_listen=args.http,
        token_file=args.token_file,
    )
    if args.check_config:
        try:
            check_start(options)
            check_commands(args.config, config)
        except (StartError, ConfigError) as error:
            say(str(error))
            return EXIT_START
        say(f"{args.config}: ok ({counted(len(config.servers), 'server')})")
        return 0
    try:
        check_start(options)
        ports.check_free(
            [
                ("the host's HTTP", options.http_listen),
                ("the feed", options.feed_listen),
                ("metrics", options.metrics_listen),
            ]
        )
        if options.state_dir is not None:
            statedir.prepare(options.state_dir)
        from breakerdeck.engine.front.mcp.serve import serve  # the SDK: only when serving

        anyio.run(serve, options)
    except (StartError, StateDirError) as error:
        say(str(error))
        return EXIT_START
    except OSError as error:
        say(f"cannot listen: {error.strerror or error}")
        return EXIT_START
    except KeyboardInterrupt:
        pass
    return 0


def _from_host_config(args: argparse.Namespace) -> int:
    import sys

    from breakerdeck.engine.front.mcp.options import say
    from breakerdeck.engine.front.mcp.settings.hostconfig import from_host_config

    if not args.out:
        say("--from-host-config FILE needs --out DIR: where the config and its secrets go")
        return EXIT_START
    return from_host_config(
        Path(args.from_host_config), Path(args.out), stdout=sys.stdout, stderr=sys.stderr
    )
