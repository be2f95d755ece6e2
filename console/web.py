"""`breakerdeck web`: the console (demo, `watch` or `replay`) in a browser, through textual-serve.

textual-serve serves the page, its static files and one websocket per browser tab, and starts
a process per websocket. It has no authentication, no Origin or Host check and no limit. The
server here is its `Server` with those added and nothing of its own rewritten:

- `console.web_guard` in front of every route: Host, Origin, the token, then the cookie;
- at most `--max-consoles` consoles at a time, refused before the process starts;
- each console a `console.web_service.ConsoleService`: no shell, a minimal environment, its
  terminal size within bounds, told its role and web actor;
- bound to loopback unless told otherwise, and to a non-loopback address only with TLS
  (`--tls-cert`, `--tls-key`) or `--insecure-bind`, as the front doors do;
- tokens, TLS files and the address checked before anything is served (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from textual_serve.server import Server

from breakerdeck.console.output import EXIT_USAGE, say
from breakerdeck.console.web_guard import ROLE_KEY, Guard
from breakerdeck.console.web_role import Role, WebSession, web_actor
from breakerdeck.console.web_service import ConsoleService, clamp_size
from breakerdeck.engine.feed.client import FeedError, read_token
from breakerdeck.engine.front import ports
from breakerdeck.engine.front.serving import StartError, is_loopback, split_address

#: Could not start: the token files, the TLS files, the address (the message says which).
EXIT_START = 2
#: A browser's messages are keys, pastes and sizes: a few KiB at most.
MAX_MESSAGE_BYTES = 64 * 1024
#: What a malformed message from a browser raises in textual-serve's message loop.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, AssertionError)


class WebServer(Server):
    """textual-serve's server, guarded, capped, and starting `ConsoleService`s."""

    def __init__(self, argv: Sequence[str], guard: Guard, *, max_consoles: int, title: str) -> None:
        super().__init__(" ".join(argv), title=title, public_url=guard.public_url)
        self.argv = list(argv)
        self.guard = guard
        self.max_consoles = max_consoles
        self.consoles: set[ConsoleService] = set()

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.guard.middleware)
        return app

    async def on_startup(self, app: web.Application) -> None:
        say(f"web: serving {self.title} on {self.public_url}/ (Ctrl-C stops)")

    async def on_shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(console.stop() for console in list(self.consoles)))

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's websocket handler, with the cap checked before the upgrade and a
        `ConsoleService` where it starts an `AppService`; its message loop is its own."""
        if len(self.consoles) >= self.max_consoles:
            raise web.HTTPServiceUnavailable(
                text=f"{len(self.consoles)} consoles are open, the most this server runs\n"
            )
        role: Role = request[ROLE_KEY]
        size = clamp_size(request.query.get("width", 80), request.query.get("height", 24))
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
        console = ConsoleService(
            self.argv,
            WebSession(role, web_actor(request.remote)),
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        self.consoles.add(console)  # counted from here: two tabs at once cannot both squeeze in
        try:
            await websocket.prepare(request)
            await console.start(*(size or (80, 24)))
            say(f"web: console {console.pid} started for the {role} at {request.remote}")
            with contextlib.suppress(*_MALFORMED):  # a malformed message ends the session
                await self._process_messages(websocket, console)
        finally:
            self.consoles.discard(console)
            await console.stop()
            await websocket.close()
        return websocket

    async def run(self, listening: socket.socket, tls: ssl.SSLContext | None) -> None:
        """Serve on the bound socket until SIGINT or SIGTERM."""
        runner = web.AppRunner(await self._make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await web.SockSite(runner, listening, ssl_context=tls).start()
            await stop.wait()
        finally:
            await runner.cleanup()


def run_web(args: argparse.Namespace, argv: list[str]) -> int:
    """Serve `argv` (the console's checked command line, `web_command.served_argv`)."""
    host, _ = split_address(args.listen)
    tls = args.tls_cert is not None
    if (args.tls_cert is None) != (args.tls_key is None):
        say("web: --tls-cert and --tls-key go together: give both or neither")
        return EXIT_USAGE
    if not is_loopback(host) and not tls and not args.insecure_bind:
        say(
            f"web: refusing to listen on {host} without TLS: pass --tls-cert and --tls-key, "
            "or --insecure-bind if a TLS proxy in front of it is yours"
        )
        return EXIT_START
    try:
        tokens = _tokens(args)
        context = _tls(args) if tls else None
        listening = ports.bind("browsers", args.listen)
    except (FeedError, ValueError, StartError) as error:
        say(f"web: {error}")
        return EXIT_START
    bound = listening.getsockname()[1]
    where = f"[{host}]" if ":" in host else host
    public_url = (args.public_url or f"{'https' if tls else 'http'}://{where}:{bound}").rstrip("/")
    guard = Guard(public_url, tokens, secure=public_url.startswith("https:"))
    server = WebServer(
        argv, guard, max_consoles=args.max_consoles, title=f"breakerdeck {args.console[0]}"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.run(listening, context))
    say("web stopped")
    return 0


def _tokens(args: argparse.Namespace) -> dict[Role, str]:
    """The tokens a browser may present, read (and refused) as the feed's token files are."""
    files: dict[Role, Any] = {
        "viewer": args.viewer_token_file,
        "operator": args.operator_token_file,
    }
    tokens: dict[Role, str] = {
        role: read_token(Path(path)) for role, path in files.items() if path is not None
    }
    if not tokens:
        raise ValueError(
            "give --viewer-token-file or --operator-token-file (or both): the web lets in "
            "only a browser that presents one"
        )
    if len(set(tokens.values())) < len(tokens):
        raise ValueError("the viewer and operator tokens must differ")
    return tokens


def _tls(args: argparse.Namespace) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"cannot load the TLS certificate and key: {error}") from None
    return context
