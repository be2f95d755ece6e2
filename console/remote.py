"""`breakerdeck serve`, `status`, `reset`, `hold`, `release`, `mode` and `watch`: the live feed
from the command line.

- `run_serve`: simulated agents on an engine, served over the feed (engine.feed.server).
- `run_status`: one snapshot of a remote engine as a table or JSON; the exit status says how
  bad things are (see `EXIT_*` and docs/feed.md).
- `run_write`: one operator write (`reset`, `hold`, `release`, `mode`) over the feed, after a
  confirmation unless `--yes`.
- `run_watch`: the console on one or more remote engines (`console.remote_source`).

Each returns the process's exit status. Results go to standard output, messages to standard
error. `FeedClient` (re-exported) is the reconnecting client the console's watch screen uses.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import getpass
import json
import math
import os
import secrets
import signal
import socket
import stat
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from breakerdeck.console.output import aligned, deliver, say
from breakerdeck.console.states import LISTED_WORDS
from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.feed import protocol as p
from breakerdeck.engine.feed.client import (
    ConnectionLost,
    FeedClient,
    FeedError,
    FeedProtocolError,
    FeedRefused,
    FeedRequestError,
    FeedUnreachable,
    fetch_snapshot,
    read_token,
    send_request,
)
from breakerdeck.engine.state import State
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.text import counted, printable

if TYPE_CHECKING:
    from breakerdeck.console.app import BreakerdeckApp
    from breakerdeck.console.contexts import Context
    from breakerdeck.console.remote_source import RemoteFeed, RemoteSource
    from breakerdeck.console.source import Source

__all__ = [
    "EXIT_ERROR",
    "EXIT_OPEN",
    "EXIT_PAGED",
    "EXIT_REFUSED",
    "EXIT_UNREACHABLE",
    "ConnectionLost",
    "FeedClient",
    "default_state_dir",
    "run_serve",
    "run_status",
    "run_watch",
    "run_write",
]

#: `status`: every breaker closed. `reset`: done.
EXIT_OK = 0
#: `status`: something open, half-open or paused. `reset`: not confirmed, nothing sent.
EXIT_OPEN = 1
#: `status`: something paged (open through two cooldowns).
EXIT_PAGED = 2
#: The feed could not be reached (nothing listening, timeout, not a websocket).
EXIT_UNREACHABLE = 3
#: The token was refused at the handshake, or no token could be found, or a write was asked
#: with a viewer's token.
EXIT_REFUSED = 4
#: The server refused the request (an unknown key, a hold past its bound, a release of a
#: breaker not held) or spoke another protocol version.
EXIT_ERROR = 5
#: `serve`: could not start (state dir, tokens, scenario, address): the message says why.
EXIT_START = 2

VIEWER_TOKEN_FILE = "viewer.token"
OPERATOR_TOKEN_FILE = "operator.token"
TOKEN_ENV = "BREAKERDECK_TOKEN"


def default_state_dir() -> Path:
    """Where `serve` keeps verdicts, audit log and generated tokens without `--state-dir`."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "breakerdeck"


# -- tokens -------------------------------------------------------------------------------------


def _generated_token(path: Path) -> str:
    """The token kept in the state dir: reused across restarts (watching consoles keep working),
    created with mode 0600 when missing. Delete the file to rotate it. Written as `statedir`
    writes (a fresh file, never through a link) and read as it reads (a file of another user,
    or one others can write, is refused). A link put there on purpose (a mounted secret) is
    read and left alone; a plain file others can read is replaced by a 0600 copy."""
    if not os.path.lexists(path):
        token = secrets.token_urlsafe(32)
        statedir.write_private(path, token + "\n")
        return token
    token = statedir.read_private(path).strip()
    if not token:
        raise FeedError(f"token file {path} is empty; delete it to have a new one made")
    info = path.lstat()
    if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
        statedir.write_private(path, token + "\n")
        say(f"{path} was readable by others (mode {info.st_mode & 0o777:o}); now 0600")
    return token


def serve_tokens(args: argparse.Namespace, state_dir: Path) -> tuple[str, str]:
    """(viewer, operator): from the token files given, else generated into `state_dir`."""
    tokens = {}
    for role, option, name in (
        ("viewer", "viewer_token_file", VIEWER_TOKEN_FILE),
        ("operator", "operator_token_file", OPERATOR_TOKEN_FILE),
    ):
        given = vars(args)[option]
        if given:
            tokens[role] = read_token(given)
            say(f"{role} token from {given}")
        else:
            path = state_dir / name
            tokens[role] = _generated_token(path)
            say(f"{role} token in {path} (mode 0600)")
    if secrets.compare_digest(tokens["viewer"], tokens["operator"]):
        raise FeedError("the viewer and operator tokens must differ")
    return tokens["viewer"], tokens["operator"]


def client_token(args: argparse.Namespace, *, operator: bool) -> str:
    """`--token-file`, else $BREAKERDECK_TOKEN, else the token files `serve` writes into the
    default state dir (operator first for writes, viewer first for reads)."""
    given = args.token_file
    if given:
        return read_token(given)
    if os.environ.get(TOKEN_ENV, "").strip():
        return os.environ[TOKEN_ENV].strip()
    names = [OPERATOR_TOKEN_FILE, VIEWER_TOKEN_FILE]
    if not operator:
        names.reverse()
    for name in names:
        path = default_state_dir() / name
        if path.exists():
            return read_token(path)
    raise FeedError(
        f"no token: pass --token-file, set {TOKEN_ENV}, or run `breakerdeck serve` on this "
        f"machine (it writes {default_state_dir()}/{{viewer,operator}}.token)"
    )


def _exit_for(error: BaseException) -> int:
    if isinstance(error, FeedRefused):
        return EXIT_REFUSED
    if isinstance(error, FeedUnreachable):
        return EXIT_UNREACHABLE
    if isinstance(error, FeedRequestError | FeedProtocolError):
        return EXIT_ERROR
    if isinstance(error, OSError):  # an unreadable token file
        return EXIT_REFUSED
    if isinstance(error, FeedError):
        return EXIT_REFUSED if "token" in str(error) else EXIT_ERROR
    return EXIT_ERROR


# -- serve ------------------------------------------------------------------------------------


def run_serve(args: argparse.Namespace) -> int:
    from breakerdeck.console.headless import scenario_policy
    from breakerdeck.engine.feed.server import serve_feed
    from breakerdeck.engine.page import command_hook
    from breakerdeck.fixtures import scenario as scenarios
    from breakerdeck.fixtures.simulation import DEFAULT_SCENARIO, Simulation

    chosen = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    try:
        state_dir = statedir.prepare(chosen)
        loaded = scenarios.load(args.scenario or DEFAULT_SCENARIO)
        policy, warning = scenario_policy(loaded, args.policy)
        if warning:
            say(warning)
        simulation = Simulation.build(
            args.scenario,
            policy=policy,
            seed=args.seed,
            speed=args.speed or 1.0,
            state_dir=state_dir,
            page_hook=command_hook(args.on_page) if args.on_page else None,
            epoch=time.time(),
        )
    except (scenarios.ScenarioError, StateDirError) as error:
        say(str(error))
        return EXIT_START
    # Tokens only once the engine holds the state dir: a second `serve` on it touches nothing.
    try:
        viewer, operator = serve_tokens(args, state_dir)
    except (OSError, FeedError, StateDirError) as error:
        simulation.close()
        say(f"cannot set up tokens: {error}")
        return EXIT_START
    for problem in simulation.engine.problems:
        say(problem)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        say(
            f"listening on {args.host}: the feed is plain ws://, tokens travel unencrypted; "
            "prefer an SSH tunnel or a TLS-terminating proxy"
        )
    source = args.source or f"{socket.gethostname()}:{args.port}"

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        async with serve_feed(
            simulation.engine,
            host=args.host,
            port=args.port,
            viewer_token=viewer,
            operator_token=operator,
            source_name=source,
        ) as feed:
            simulation.start_thread()
            say(
                f"serving {simulation.scenario.name} under the {policy} policy as "
                f"{feed.source!r} on {feed.url} (speed {args.speed or 1.0:g}x); Ctrl-C stops"
            )
            await stop.wait()

    try:
        asyncio.run(main())
    except OSError as error:
        say(f"cannot serve on {args.host}:{args.port}: {error}")
        return EXIT_START
    except KeyboardInterrupt:
        pass
    finally:
        simulation.stop()
    say("stopped")
    return 0


# -- status -----------------------------------------------------------------------------------


def status_exit(snapshot: p.SnapshotMessage) -> int:
    if any(b.paged for b in snapshot.breakers):
        return EXIT_PAGED
    if any(b.state != State.CLOSED or b.paused for b in snapshot.breakers):
        return EXIT_OPEN
    return EXIT_OK


def run_status(args: argparse.Namespace) -> int:
    try:
        token = client_token(args, operator=False)
        snapshot = asyncio.run(fetch_snapshot(args.url, token, timeout=_timeout(args)))
    except (FeedError, OSError) as error:
        say(str(error))
        return _exit_for(error)
    code = status_exit(snapshot)
    if args.json:
        report = {"url": args.url, "exit_status": code, **snapshot.model_dump(mode="json")}
        lines = (json.dumps(report, indent=2) + "\n").splitlines(keepends=True)
    else:
        store = "; shared store ok" if snapshot.shared_store == "ok" else ""
        say(
            f"{snapshot.source} at {args.url}: {counted(len(snapshot.breakers), 'breaker')}, "
            f"{snapshot.policy} policy, seq {snapshot.seq}, as of {snapshot.at}{store}"
        )
        lines = table_lines(snapshot)
    if snapshot.shared_store == "lost":
        say(store_lost_line(snapshot))
    elif snapshot.shared_store == "ok" and snapshot.shared_store_reason:
        say(f"shared store: {snapshot.shared_store_reason}")
    return deliver(lines, code)


def store_lost_line(snapshot: p.SnapshotMessage) -> str:
    """What `status` says of a replica whose shared store is lost. Its exit status stays the
    verdict (docs/feed.md): the replica still enforces its breakers, alone, and a paged one
    must still read 2."""
    why = snapshot.shared_store_reason or "no reason given"
    return f"shared store lost: {why}; {snapshot.source} decides alone until it returns"


def _timeout(args: argparse.Namespace) -> float:
    return float(args.timeout)


def table_lines(snapshot: p.SnapshotMessage) -> list[str]:
    """The table `status` prints; every cell escaped (keys and agents come from outside)."""
    if not snapshot.breakers:
        say("no breakers yet (no calls seen)")
        return []
    header = ("KEY", "AGENT", "STATE", "MODE", "COUNT", "RETRY IN", "CAUSE", "NOTE")
    rows: list[tuple[str, ...]] = [header]
    order = {word: n for n, word in enumerate(LISTED_WORDS)}
    now = _wall(snapshot.at)
    for b in sorted(
        snapshot.breakers, key=lambda b: (not b.paged, order.get(b.display_state, 0), b.key)
    ):
        notes = []
        if b.paged:
            notes.append("PAGED")
        if b.shared:
            notes.append(f"shared by {len(b.agents)}")
        if b.held_until is not None:
            notes.append(held_note(b, now))
        retry = "-" if b.retry_after_seconds is None else f"{b.retry_after_seconds:.0f}s"
        agent = ",".join(b.agents) if b.shared else (b.agent or "-")
        cells = (
            b.key,
            agent,
            b.display_state,
            b.mode,
            str(b.count),
            retry,
            b.trip_cause or "-",
            " ".join(notes) or "-",
        )
        rows.append(cells)
    return aligned(rows)


def held_note(breaker: p.BreakerInfo, now: float) -> str:
    """A hold in `status`'s words: who, until when (UTC), the time left, and why."""
    assert breaker.held_until is not None
    until = _wall(breaker.held_until)
    left = max(0, math.ceil((until - now) / 60))
    clock = datetime.fromtimestamp(until, UTC).strftime("%H:%M")
    return (
        f"held by {breaker.held_by or '-'} until {clock} UTC ({left}m left): "
        f"{breaker.held_reason or '-'}"
    )


def _wall(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


# -- operator writes: reset, hold, release, mode ------------------------------------------


@dataclass(frozen=True, slots=True)
class _Write:
    """One operator write from the shell: how it asks, what it sends, how it says it was done."""

    #: The question's verb (`Reset KEY on SOURCE …?`) and the words once done or declined.
    verb: str
    done: str
    #: What it asks beyond the key (`for 30m`, `to shadow`), from the parsed arguments.
    detail: Callable[[argparse.Namespace], str]
    #: The feed's message, and its fields beyond the key, the request id and the actor.
    message: type[p.ClientRequest]
    fields: Callable[[argparse.Namespace], dict[str, object]]


_WRITES = {
    "reset": _Write(
        "Reset",
        "reset",
        lambda args: "",
        p.ResetRequest,
        lambda args: {"reason": args.reason or "reset from the shell"},
    ),
    "hold": _Write(
        "Hold open",
        "held",
        lambda args: f" for {args.duration}",
        p.HoldRequest,
        lambda args: {"reason": args.reason, "duration": args.duration},
    ),
    "release": _Write(
        "Release",
        "released",
        lambda args: " into closed" if args.close else " into half-open",
        p.ReleaseRequest,
        lambda args: {"reason": args.reason or "", "close": args.close},
    ),
    "mode": _Write(
        "Switch",
        "switched",
        lambda args: f" to {args.mode}",
        p.ModeRequest,
        lambda args: {"reason": args.reason, "mode": args.mode},
    ),
}


def run_write(args: argparse.Namespace) -> int:
    """`reset`, `hold`, `release` or `mode` (`args.command`): the breaker is looked up in a
    snapshot, the operator asked unless `--yes`, then the request sent with the operator
    token. One path for all four, so their questions, refusals and exit codes agree."""
    write = _WRITES[args.command]
    try:
        token = client_token(args, operator=True)
        timeout = _timeout(args)
        current = asyncio.run(fetch_snapshot(args.url, token, timeout=timeout))
    except (FeedError, OSError) as error:
        say(str(error))
        return _exit_for(error)
    if current.role == "viewer":
        say(
            f"{args.command} needs the operator token; {current.source} read this one as a viewer's"
        )
        return EXIT_REFUSED
    breaker = next((b for b in current.breakers if b.key == args.key), None)
    if breaker is None:
        say(_unknown_key(current, args.key))
        return EXIT_ERROR
    if args.command == "release" and breaker.state != State.HELD:
        say(f"{args.key} on {current.source} is not held ({breaker.display_state}); not released")
        return EXIT_ERROR
    question = (
        f"{write.verb} {args.key} on {current.source}{write.detail(args)} ({_said(breaker)})?"
    )
    if not args.yes and not _confirm(f"{question} [y/N] ", args.command):
        say(f"not {write.done}")
        return EXIT_OPEN
    actor = args.operator or _login()
    who = {"key": args.key, "request_id": uuid.uuid4().hex, "actor": actor}
    request = write.message.model_validate(who | write.fields(args))
    try:
        _, ack = asyncio.run(send_request(args.url, token, request, timeout=timeout))
    except FeedRequestError as error:
        say(f"{current.source} refused the {args.command}: {error.message} ({error.code})")
        return EXIT_REFUSED if error.code == p.FORBIDDEN else EXIT_ERROR
    except (FeedError, OSError) as error:
        say(str(error))
        return _exit_for(error)
    say(
        f"{write.done} {args.key}{write.detail(args)} on {current.source} as "
        f"remote:operator:{actor} (seq {ack.seq})"
    )
    return EXIT_OK


def _unknown_key(current: p.SnapshotMessage, key: str) -> str:
    keys = sorted(b.key for b in current.breakers)
    near = difflib.get_close_matches(key, keys, n=1)
    known = ", ".join(keys[:10]) + (f", … {len(keys) - 10} more" if len(keys) > 10 else "")
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{current.source} has no breaker with key {key!r}{hint} (known: {known or 'none yet'})"


def _said(breaker: p.BreakerInfo) -> str:
    """A breaker in the question's words: its state, count, cause, hold and mode."""
    what = f"{breaker.display_state}, count {breaker.count}"
    if breaker.trip_cause and breaker.state not in (State.CLOSED, State.HELD):
        what += f", cause {breaker.trip_cause}"
    if breaker.held_by is not None:
        what += f", held by {breaker.held_by}"
    if breaker.mode != "enforce":
        what += f", {breaker.mode}"
    return what


def run_watch(args: argparse.Namespace) -> int:
    """`breakerdeck watch URL [URL ...] [--token-file PATH ...] [--operator NAME]`, or
    `watch --context NAME [--context NAME ...]`: the console on one or more remote engines,
    or on the contexts of `contexts.toml`, one tab each."""
    app = watch_app(args)
    if isinstance(app, int):
        return app
    app.run()
    return app.return_code or 0


def watch_app(args: argparse.Namespace) -> BreakerdeckApp | int:
    """The console `watch` runs, its sources primed; or the exit status when it cannot start
    (the app is imported here, not at the top: the other commands print and leave without
    loading Textual)."""
    from breakerdeck.console.app import BreakerdeckApp
    from breakerdeck.console.contexts import views_for
    from breakerdeck.console.output import EXIT_USAGE

    views, start = views_for(args.view, args.contexts)
    urls: list[str] = list(args.urls)
    files: list[str] = list(args.token_file or [])
    if files and len(files) not in (1, len(urls)):
        say(f"give one --token-file, or one per URL ({len(urls)}); got {len(files)}")
        return EXIT_USAGE
    try:
        tabs = _context_sources(args) if args.context else [(None, _url_source(args, files))]
        sources = [source for _, source in tabs]
        failed = asyncio.run(_prime(sources, timeout=float(args.timeout)))
    except (FeedError, OSError) as error:
        say(str(error))
        return _exit_for(error)
    for (context, _), failures in zip(tabs, failed, strict=True):
        for feed, failure in failures:
            say(f"{context.name}: {feed.url}: {failure}" if context else f"{feed.url}: {failure}")
    troubles = [failure for failures in failed for _, failure in failures]
    fatal = [failure for failure in troubles if not isinstance(failure, FeedUnreachable)]
    if fatal:
        return _exit_for(fatal[0])
    if len(troubles) == sum(len(source.feeds) for source in sources):
        say("no source answered; nothing to watch")
        return EXIT_UNREACHABLE
    shown: Source | list[tuple[Context, Source]] = (
        sources[0] if not args.context else [(c, s) for c, s in tabs if c is not None]
    )
    operator = args.operator or _login()
    return BreakerdeckApp(
        shown, operator=operator, views=views, filter_text=start, export_dir=args.export_dir
    )


def _url_source(args: argparse.Namespace, files: list[str]) -> RemoteSource:
    from breakerdeck.console.remote_source import RemoteSource

    tokens = [] if files else [client_token(args, operator=True)]
    return RemoteSource(args.urls, tokens=tokens, token_files=files)


def _context_sources(args: argparse.Namespace) -> list[tuple[Context, RemoteSource]]:
    """One source per context named, in the order given. A context without a `token_file`
    uses `watch`'s default token, the viewer's first where the context is read-only."""
    from breakerdeck.console.contexts import chosen, contexts_path, load_contexts
    from breakerdeck.console.remote_source import RemoteSource

    where = contexts_path(args.contexts)
    tabs = []
    for context in chosen(load_contexts(where), args.context, "context", where):
        if context.token_file is not None:
            source = RemoteSource(context.urls, token_files=[context.token_file])
        else:
            token = client_token(args, operator=not context.read_only)
            source = RemoteSource(context.urls, tokens=[token])
        tabs.append((context, source))
    return tabs


async def _prime(
    sources: list[RemoteSource], timeout: float
) -> list[list[tuple[RemoteFeed, FeedError]]]:
    """Every source's first snapshots at once: a context that does not answer costs the
    others no more than the one timeout."""
    return list(await asyncio.gather(*(source.prime(timeout=timeout) for source in sources)))


def _confirm(prompt: str, command: str) -> bool:
    """Ask on standard error, read the answer from standard input (a pipe works too)."""
    sys.stderr.write(printable(prompt))  # the key and the source are outside text
    sys.stderr.flush()
    answer = sys.stdin.readline() if sys.stdin else ""
    if not answer:
        sys.stderr.write("\n")
        say(f"no answer on standard input; pass --yes to {command} without asking")
    return answer.strip().lower() in ("y", "yes")


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
