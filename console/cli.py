"""The `breakerdeck` command line: one sub-command per way of using the engine.

A mistake on the command line is one line on standard error and exit 64 (`EXIT_USAGE`), for
every command: never a traceback, and never a number that `status` uses for a verdict. Numbers
are read with bounds (a NaN speed or a 1e-300 one would wedge the simulation), names with the
lengths the feed accepts. docs/console.md lists every exit status.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from breakerdeck.console.completion_args import COMPLETE, SHELLS, add_complete_parser
from breakerdeck.console.contexts import MAX_NAME, ConfigError, UnknownName, feed_url
from breakerdeck.console.output import EXIT_CONFIG, EXIT_IO, EXIT_USAGE, discard
from breakerdeck.console.web_command import add_web_parser, served_argv
from breakerdeck.engine.core import holds
from breakerdeck.engine.feed.protocol import MAX_ACTOR_CHARS, MAX_KEY_CHARS, MAX_REASON_CHARS
from breakerdeck.engine.front.arguments import EXIT_START, USAGE_EXITS, exit_codes
from breakerdeck.engine.front.gateway.cli import add_gateway_parser, run_gateway
from breakerdeck.engine.front.mcp.cli import add_mcp_parser, run_mcp
from breakerdeck.engine.text import printable

#: A command-line usage error (sysexits' EX_USAGE): DESIGN's number for `status`, kept for all.
#: Interrupted (Ctrl-C) before the command finished: 128 + SIGINT, as a shell reports it.
EXIT_INTERRUPTED = 130

#: `--speed`: slower than this a demo looks frozen; faster, a cooldown passes between repaints.
SPEED_RANGE = (0.1, 1000.0)
#: `--duration`: a headless run covers at most a simulated year.
MAX_DURATION = 366 * 86400.0
#: `--timeout`: connecting to a feed never waits longer than an hour.
MAX_TIMEOUT = 3600.0


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line and exit 64 (argparse's own 2 would read as
    `status`'s "paged")."""

    def error(self, message: str) -> NoReturn:
        shown = printable(message)  # it quotes what was typed, which may be pasted from anywhere
        self.exit(EXIT_USAGE, f"{self.prog}: {shown} (see {self.prog} --help)\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """An option the command does not know is reported by that command's parser, with the
        nearest it does know (`gateway --confg` → did you mean --config?): argparse reports
        leftovers from the top parser, whose help does not list them."""
        parsed, extras = self.parse_known_args(args, namespace)
        if not extras:
            return parsed
        command = self._commands.get(getattr(parsed, "command", None) or "", self)
        unknown = extras[0].partition("=")[0]
        known = [o for action in command._actions for o in action.option_strings]
        near = difflib.get_close_matches(unknown, known, n=1, cutoff=0.8)
        hint = f"; did you mean {near[0]}?" if near else ""
        command.error(f"unrecognized arguments: {' '.join(extras)}{hint}")

    @property
    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


def _number(low: float, high: float, *, above_low: bool = False) -> Callable[[str], float]:
    """A finite float in [low, high] (or (low, high] with `above_low`)."""
    shown = f"{'more than' if above_low else 'at least'} {low:g} and at most {high:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        too_low = value <= low if above_low else value < low
        if not math.isfinite(value) or too_low or value > high:
            raise argparse.ArgumentTypeError(f"must be {shown}, got {text}")
        return value

    return parse


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def _feed_url(text: str) -> str:
    try:
        return feed_url(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _directory(text: str) -> Path:
    """A directory that exists (`--export-dir`): a typo is told at start, not at the first
    export in the middle of an incident."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {text!r}")
    return path


_EXPORT_DIR_HELP = (
    "where e writes an incident's .md and .json (default: the working directory; under web, "
    "a browser download and nothing on the server unless given)"
)


def _text(limit: int, what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if len(text) > limit:
            raise argparse.ArgumentTypeError(
                f"{what} is {len(text)} characters long; at most {limit}"
            )
        return text

    return parse


_speed = _number(*SPEED_RANGE)
_duration = _number(0.0, MAX_DURATION, above_low=True)
_timeout = _number(0.0, MAX_TIMEOUT, above_low=True)
# The same bounds as the live feed's: a reset the feed would refuse is refused here first.
_actor = _text(MAX_ACTOR_CHARS, "the operator name")
_reason = _text(MAX_REASON_CHARS, "the reason")
_key = _text(MAX_KEY_CHARS, "the key")
_name = _text(MAX_NAME, "the name")


def _said_reason(text: str) -> str:
    """A reason that is required: blank is none."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a reason is required, and blank is none")
    return _reason(text)


def _hold_duration(text: str) -> str:
    """`90s`, `30m` or `2h`; the engine's own bound (`max_hold_seconds`) is checked there."""
    try:
        holds.duration_seconds(text, math.inf)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text.strip()


#: Every command's exit codes end with these; a server (`serve`, `web`, `gateway`, `mcp`)
#: stops on Ctrl-C with 0, so 130 is only the others'.
_INTERRUPTED = (EXIT_INTERRUPTED, "interrupted (Ctrl-C)")
#: A feed client's troubles, alike for `status`, `watch` and `reset` (docs/feed.md).
_FEED_TROUBLES = (
    (3, "unreachable: nothing listening, timed out, or not a websocket"),
    (4, "the token was refused, or none could be found or read"),
    (5, "the server refused the request or spoke another protocol version"),
)
#: The consoles' files (`--view`, `--context`): an unknown name is a usage mistake (64).
_CONFIG = (EXIT_CONFIG, "contexts.toml or views.toml refused or not valid (said which and why)")

#: The operator's writes over the feed (`console.remote.run_write`).
_WRITES = ("reset", "hold", "release", "mode")


def _write_exits(name: str) -> str:
    """An operator write's exit codes, alike for `reset`, `hold`, `release` and `mode`."""
    return exit_codes(
        (0, f"{name} done"),
        (1, "not confirmed: nothing sent"),
        _FEED_TROUBLES[0],
        (4, "the token was refused, or none could be found or read, or it is a viewer's"),
        (
            5,
            "the server refused it (an unknown key, a hold past max_hold_seconds, a release of "
            "a breaker not held) or spoke another protocol version",
        ),
        *USAGE_EXITS,
        _INTERRUPTED,
    )


_EXITS = {
    "demo": exit_codes(
        (0, "the console quit, or the headless run's duration passed"),
        (2, "cannot start: the scenario or the state dir (said which)"),
        *USAGE_EXITS,
        _CONFIG,
        _INTERRUPTED,
    ),
    "scenarios": exit_codes((0, "listed"), *USAGE_EXITS),
    "serve": exit_codes(
        (0, "stopped (Ctrl-C or SIGTERM)"),
        (2, "cannot start: the scenario, the state dir, the tokens, or the port (said which)"),
        *USAGE_EXITS,
    ),
    "status": exit_codes(
        (0, "every breaker closed"),
        (1, "something open, half-open, held or paused"),
        (2, "something paged (open through two cooldowns)"),
        *_FEED_TROUBLES,
        *USAGE_EXITS,
        _INTERRUPTED,
    ),
    "watch": exit_codes(
        (0, "the console quit"),
        *_FEED_TROUBLES,
        *USAGE_EXITS,
        _CONFIG,
        _INTERRUPTED,
    ),
    **{name: _write_exits(name) for name in _WRITES},
    "export": exit_codes(
        (0, "the incident printed"),
        (2, "the state dir's audit log cannot be read (said why)"),
        *_FEED_TROUBLES[:2],
        (5, "no breaker with that key, or the server refused or spoke another protocol version"),
        *USAGE_EXITS,
        _INTERRUPTED,
    ),
    "completion": exit_codes((0, "the script printed"), *USAGE_EXITS),
    "replay": exit_codes(
        (0, "the console quit"),
        (2, "the recording cannot be read (said why)"),
        *USAGE_EXITS,
        _CONFIG,
        _INTERRUPTED,
    ),
    "whatif": exit_codes(
        (0, "tallied (a recording without call.would_deny lines too: an empty table)"),
        (2, "the recording cannot be read, or holds no trace line (said why)"),
        *USAGE_EXITS,
        _INTERRUPTED,
    ),
}


_TOKEN_HELP = (
    "the token (default: $BREAKERDECK_TOKEN, then viewer.token / operator.token in the default "
    "state dir)"
)
_TIMEOUT_HELP = "seconds to wait for the engine to answer, at most 3600 (default: 10)"


def _command(commands: argparse._SubParsersAction, name: str, **kwargs: Any) -> Any:  # type: ignore[type-arg]
    """A subcommand whose help ends with its own exit codes."""
    return commands.add_parser(
        name,
        epilog=_EXITS[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("breakerdeck")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _operator_write(commands: argparse._SubParsersAction, name: str, help: str) -> Any:  # type: ignore[type-arg]
    """A write over the feed (`reset`, `hold`, `release`, `mode`): one set of options, so the
    four read alike; each adds its own `--reason` and what else it needs."""
    write = _command(commands, name, help=help)
    write.add_argument("url", type=_feed_url, help="the engine's feed: ws://host:port")
    write.add_argument(
        "key", type=_key, help="the breaker's key, as `status` lists it (an agent, or server@…)"
    )
    write.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    write.add_argument(
        "--token-file",
        default=None,
        help="the operator token (default: $BREAKERDECK_TOKEN, then operator.token in the "
        "default state dir)",
    )
    write.add_argument(
        "--operator",
        type=_actor,
        default=None,
        help=f"name written on the {name} in the audit log (default: login)",
    )
    write.add_argument("--timeout", type=_timeout, default=10.0, help=_TIMEOUT_HELP)
    return write


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="breakerdeck",
        description="Circuit breakers for AI agents' tool calls, and the console to watch them.",
    )
    parser.add_argument("--version", action="version", version=f"breakerdeck {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _command(
        commands, "demo", help="the console on an in-process engine and simulated agents"
    )
    demo.add_argument(
        "--scenario", default=None, help="scenario name (see `breakerdeck scenarios`)"
    )
    demo.add_argument(
        "--policy",
        choices=["agent", "tool"],
        default=None,
        help="default: the scenario's own (the first its `policies` name; agent if none)",
    )
    demo.add_argument(
        "--seed", type=int, default=7, help="the simulated agents' random seed (default: 7)"
    )
    demo.add_argument(
        "--speed",
        type=_speed,
        default=None,
        help="simulated seconds per real second, 0.1 to 1000 (console default: 5; headless: as "
        "fast as it can)",
    )
    demo.add_argument("--state-dir", default=None, help="keep verdicts and audit log here")
    demo.add_argument(
        "--operator", type=_actor, default=None, help="name written on resets (default: login)"
    )
    demo.add_argument("--headless", action="store_true", help="no screen: write the event trace")
    demo.add_argument(
        "--duration", type=_duration, default=3600.0, help="simulated seconds to run (headless)"
    )
    demo.add_argument("--events", default="-", help="trace output path, or - for stdout (headless)")
    demo.add_argument("--on-page", default=None, help="command run with each page event as JSON")
    demo.add_argument("--export-dir", type=_directory, default=None, help=_EXPORT_DIR_HELP)

    _command(commands, "scenarios", help="list the scenarios and what each demonstrates")

    serve = _command(
        commands, "serve", help="simulated agents on an engine, served over the live feed"
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address the feed listens on (default: 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=_port, default=8765, help="port the feed listens on (default: 8765)"
    )
    serve.add_argument(
        "--scenario", default=None, help="scenario name (see `breakerdeck scenarios`)"
    )
    serve.add_argument(
        "--speed",
        type=_speed,
        default=1.0,
        help="simulated seconds per real second, 0.1 to 1000 (default: real time)",
    )
    serve.add_argument(
        "--seed", type=int, default=7, help="the simulated agents' random seed (default: 7)"
    )
    serve.add_argument(
        "--policy",
        choices=["agent", "tool"],
        default=None,
        help="default: the scenario's own (the first its `policies` name; agent if none)",
    )
    serve.add_argument(
        "--operator-token-file",
        default=None,
        help="the feed's token that may reset (default: operator.token in the state dir, made "
        "if missing)",
    )
    serve.add_argument(
        "--viewer-token-file",
        default=None,
        help="the feed's read-only token (default: viewer.token in the state dir, made if missing)",
    )
    serve.add_argument(
        "--state-dir",
        default=None,
        help="verdicts, audit log, generated tokens (default: ~/.local/state/breakerdeck)",
    )
    serve.add_argument("--on-page", default=None, help="command run with each page event as JSON")
    serve.add_argument(
        "--source", default=None, help="this engine's label in consoles (default: hostname:port)"
    )

    status = _command(
        commands,
        "status",
        help="one-shot table or JSON of a remote engine's breakers",
    )
    status.add_argument("url", type=_feed_url, help="the engine's feed: ws://host:port")
    status.add_argument(
        "--json", action="store_true", help="the snapshot as JSON, with url and exit_status"
    )
    status.add_argument("--token-file", default=None, help=_TOKEN_HELP)
    status.add_argument("--timeout", type=_timeout, default=10.0, help=_TIMEOUT_HELP)

    watch = _command(
        commands, "watch", help="the console on one or more remote engines (replicas of a service)"
    )
    watch.add_argument(
        "urls",
        nargs="*",
        type=_feed_url,
        metavar="URL",
        help="ws://host:port of each engine (or name contexts with --context)",
    )
    watch.add_argument(
        "--token-file",
        action="append",
        default=None,
        help="token for every URL, or repeat once per URL (default: $BREAKERDECK_TOKEN, then "
        "operator.token / viewer.token in the default state dir)",
    )
    watch.add_argument(
        "--context",
        action="append",
        type=_name,
        default=None,
        metavar="NAME",
        help="a context of contexts.toml, instead of URLs; repeat for one tab each (1-9 switch, "
        "p shows them all)",
    )
    watch.add_argument(
        "--contexts",
        default=None,
        metavar="FILE",
        help="the contexts file (default: $XDG_CONFIG_HOME/breakerdeck/contexts.toml, else "
        "~/.config/breakerdeck/contexts.toml); views.toml is read beside it",
    )
    watch.add_argument(
        "--operator", type=_actor, default=None, help="name written on resets (default: login)"
    )
    watch.add_argument("--timeout", type=_timeout, default=10.0, help=_TIMEOUT_HELP)
    watch.add_argument("--export-dir", type=_directory, default=None, help=_EXPORT_DIR_HELP)

    reset = _operator_write(commands, "reset", "reset one breaker on a remote engine")
    reset.add_argument(
        "--reason",
        type=_reason,
        default=None,
        help="why, written in the audit log (default: reset from the shell)",
    )

    hold = _operator_write(
        commands,
        "hold",
        "hold one breaker open on a remote engine: every call refused, no probe, until it is "
        "released or the hold runs out (then half-open)",
    )
    hold.add_argument(
        "--reason",
        type=_said_reason,
        required=True,
        help="why (required): written in the audit log, and shown to every refused caller",
    )
    hold.add_argument(
        "--for",
        dest="duration",
        type=_hold_duration,
        required=True,
        metavar="DURATION",
        help="how long (required): 90s, 30m or 2h, at most the engine's max_hold_seconds "
        "(default 24h), on the engine's clock",
    )

    release = _operator_write(
        commands,
        "release",
        "end a hold early: the breaker half-opens (the next call is the probe), or closes",
    )
    release.add_argument(
        "--reason", type=_reason, default=None, help="why, written in the audit log (optional)"
    )
    release.add_argument(
        "--close",
        action="store_true",
        help="close the breaker instead of half-opening it (you vouch for the platform, as a "
        "reset does)",
    )

    mode = _operator_write(
        commands,
        "mode",
        "switch one breaker between enforce and shadow (decides as it would, refuses nothing)",
    )
    mode.add_argument(
        "mode",
        choices=["shadow", "enforce"],
        help="shadow: let through what it would refuse, writing call.would_deny; enforce: refuse",
    )
    mode.add_argument(
        "--reason",
        type=_said_reason,
        required=True,
        help="why (required): written in the audit log",
    )

    replay = _command(
        commands,
        "replay",
        help="the console on a recorded incident (a trace, or a state dir's audit log)",
        description="Replay a recorded incident in the console, read-only: space plays and "
        "pauses, . and , step by event, ] and [ jump a minute, n and N go to the next and "
        "previous transition, + and - change the speed.",
    )
    replay.add_argument(
        "trace", nargs="?", default=None, help="a trace: `demo --headless` or a door's --events"
    )
    replay.add_argument(
        "--state-dir",
        default=None,
        help="replay this state dir's audit log instead (serve's, a gateway's, an MCP proxy's)",
    )
    replay.add_argument(
        "--policy",
        choices=["agent", "tool"],
        default=None,
        help="default: tool when the keys read backend@credential, else agent",
    )
    replay.add_argument(
        "--speed",
        type=_speed,
        default=None,
        help="recorded seconds per real second while playing (default: 10)",
    )
    replay.add_argument(
        "--at",
        type=_number(0.0, MAX_DURATION),
        default=None,
        help="start this many recorded seconds after the first event",
    )
    replay.add_argument("--export-dir", type=_directory, default=None, help=_EXPORT_DIR_HELP)

    export = _command(
        commands,
        "export",
        help="a breaker's incident as Markdown (or JSON) on standard output",
        description="The document e writes from a console: the card, its timeline, trips, "
        "last denied calls, the episode's audit rows and the reset command line; never a token.",
    )
    export.add_argument(
        "target",
        nargs="+",
        metavar="[URL] KEY",
        help="the engine's feed (ws://host:port) and the breaker's key; with --state-dir, "
        "the key alone",
    )
    export.add_argument(
        "--state-dir",
        default=None,
        help="read this state dir's audit log instead of a feed (it is not written to)",
    )
    export.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    export.add_argument("--token-file", default=None, help=_TOKEN_HELP)
    export.add_argument("--timeout", type=_timeout, default=10.0, help=_TIMEOUT_HELP)

    completion = _command(
        commands,
        "completion",
        help="a shell completion script: source <(breakerdeck completion bash)",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    add_complete_parser(commands)

    for console in (demo, watch, replay):
        console.add_argument(
            "--view",
            type=_name,
            default=None,
            metavar="NAME",
            help="start filtered by a saved view: open, held, probing, or one of views.toml",
        )

    whatif = _command(
        commands,
        "whatif",
        help="what enforcing would have refused where breakers ran in shadow, per key",
        description="From a recording's call.would_deny lines, per key: the calls a shadow\n"
        "breaker would have refused, how many then succeeded (false refusals: answers\n"
        "enforcing would have cost), how many did not (saved), and the seconds the saved\n"
        "ones spent in attempts. Many saved, few false refusals: enforce (docs/trace.md).",
    )
    whatif.add_argument(
        "trace",
        nargs="?",
        default=None,
        help="a trace: `demo --headless` or a door's --events (- reads standard input)",
    )
    whatif.add_argument(
        "--state-dir",
        default=None,
        help="read this state dir's audit log instead (serve's, a gateway's, an MCP proxy's)",
    )
    whatif.add_argument(
        "--json", action="store_true", help="one JSON object per key a line, instead of a table"
    )
    whatif.add_argument(
        "--by-reason",
        action="store_true",
        help="a row per key and reason (circuit_breaker_open, probe_in_flight)",
    )

    add_gateway_parser(commands)
    add_mcp_parser(commands)
    add_web_parser(commands)
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """A command's own parser: its `error` names the command (`breakerdeck web: …`)."""
    parser = build_parser()
    return parser._commands[name] if isinstance(parser, _Parser) else parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, checked (exit 64 on a mistake): `main`'s, and the one `web` serves."""
    args = build_parser().parse_args(argv)
    if args.command == "replay" and (args.trace is None) == (args.state_dir is None):
        command_parser("replay").error("give one recording: a trace file, or --state-dir DIR")
    if args.command == "watch":
        refuse = command_parser("watch").error
        if bool(args.urls) == bool(args.context):
            refuse("give the engines' URLs, or --context NAME (not both)")
        if args.context and args.token_file:
            refuse("--token-file goes with URLs; a context names its own token_file")
        if args.contexts and not args.context:
            refuse("--contexts FILE goes with --context NAME")

    recorded = args.command in ("replay", "whatif")
    if recorded and (args.trace is None) == (args.state_dir is None):
        command_parser(args.command).error("give one recording: a trace file, or --state-dir DIR")
    if args.command == "export":
        _export_target(args)
    return args


def _export_target(args: argparse.Namespace) -> None:
    """`export URL KEY`, or `export --state-dir DIR KEY`: checked as `reset` checks them."""
    refuse = command_parser("export").error
    wanted = 1 if args.state_dir else 2
    if len(args.target) != wanted:
        refuse("give a feed URL and a key, or --state-dir DIR and a key")
    try:
        args.url = None if args.state_dir else _feed_url(args.target[0])
        args.key = _key(args.target[-1])
    except argparse.ArgumentTypeError as error:
        refuse(str(error))


#: The extra each command needs beyond the package itself, which is all `make demo` installs.
_EXTRAS = {"gateway": "front", "mcp": "front", "web": "web"}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        return _run(args)
    except (ConfigError, UnknownName) as error:  # contexts.toml, views.toml, or a name in them
        from breakerdeck.console.output import say

        for line in str(error).splitlines():
            say(line)
        return EXIT_CONFIG if isinstance(error, ConfigError) else EXIT_USAGE
    except ModuleNotFoundError as error:
        extra = _EXTRAS.get(args.command)
        if extra is None:
            raise
        from breakerdeck.console.output import say

        say(
            f"{args.command} needs breakerdeck's {extra!r} extra ({error}): `make test` installs "
            f"every extra into .venv, or: pip install -e '.[{extra}]'"
        )
        return EXIT_START
    except BrokenPipeError:
        # Standard output goes through `console.output`; this is standard error gone too.
        discard(sys.stdout)
        discard(sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


#: The commands whose warnings go through the doors' log (`engine.front.logs`; `gateway` and
#: `mcp` set it up themselves): one line each, each kind at most once per 10 s. Without it an
#: engine's `logger.error` reached standard error through Python's last-resort handler, once
#: per failed write: a full disk under `serve` wrote the same sentence 1,429 times in 40 s. A
#: console's screen is not standard error's to write on, so `demo`, `watch` and `replay` are
#: left as they are.
_LOGGED = {"serve", "web"}


def _run(args: argparse.Namespace) -> int:
    if args.command in _LOGGED or (args.command == "demo" and args.headless):
        from breakerdeck.engine.front import logs

        logs.setup(args.command)
    if args.command == "scenarios":
        from breakerdeck.console.headless import list_scenarios

        return list_scenarios(sys.stdout)
    if args.command == "serve" and not _port_free("the feed", f"{args.host}:{args.port}"):
        return EXIT_START
    if args.command in ("serve", "status", "watch", *_WRITES):
        from breakerdeck.console import remote

        runner = {
            "serve": remote.run_serve,
            "status": remote.run_status,
            "watch": remote.run_watch,
        }
        return runner.get(args.command, remote.run_write)(args)
    if args.command == "gateway" and args.demo:
        # The demo drives the fixtures, which the engine's own command never imports.
        from breakerdeck.fixtures.gateway_demo import run_demo as run_gateway_demo

        return run_gateway_demo(args)
    if args.command == "gateway":
        return run_gateway(args)
    if args.command == "mcp" and args.demo:
        from breakerdeck.fixtures.mcp_demo import run_demo as run_mcp_demo

        return run_mcp_demo(args)
    if args.command == "mcp":
        return run_mcp(args)
    if args.command == "web":
        from breakerdeck.console.web import run_web

        refuse = command_parser("web").error
        return run_web(args, served_argv(args.console, parse=parse, refuse=refuse))
    if args.command == "replay":
        from breakerdeck.console.replay_command import run_replay

        return run_replay(args)
    if args.command == "whatif":
        from breakerdeck.console.whatif_command import run_whatif

        return run_whatif(args)
    if args.command == "export":
        from breakerdeck.console.export_command import run_export

        return run_export(args)
    if args.command == "completion":
        from breakerdeck.console.completion import run_completion

        return run_completion(args, build_parser())
    if args.command == COMPLETE:
        from breakerdeck.console.completion import run_complete

        return run_complete(args)
    if args.command == "demo" and args.headless:
        from breakerdeck.console.headless import run_headless

        return run_headless(args)
    from breakerdeck.console.demo import run_demo

    return run_demo(args)


def _port_free(what: str, address: str) -> bool:
    """Checked before the command writes or says anything (its tokens, its address): a port
    found taken once the tokens were made and announced left a state dir for nothing."""
    from breakerdeck.console.output import say
    from breakerdeck.engine.front.ports import check_free
    from breakerdeck.engine.front.serving import StartError

    try:
        check_free([(what, address)])
    except StartError as error:
        say(str(error))
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
