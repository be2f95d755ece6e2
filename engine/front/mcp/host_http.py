"""Streamable HTTP toward hosts (`--http HOST:PORT`): the SDK's streamable HTTP app for the
proxy's server, behind a bearer token check, on uvicorn with the gateway's bounds and drain."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.front.drain import DrainingServer
from breakerdeck.engine.front.protocol import SPARE_FDS, door_config
from breakerdeck.engine.front.serving import StartError, split_address
from breakerdeck.engine.storage import statedir

if TYPE_CHECKING:
    from breakerdeck.engine.front.mcp.proxy import Proxy


def _longest_budget(proxy: Proxy) -> float:
    return max(server.lease for server in proxy.config.servers.values())


def read_host_token(path: str) -> str:
    try:
        token = statedir.read_private(path).strip()
    except StateDirError as error:
        raise StartError(f"--token-file: {error}") from None
    if len(token) < 16:
        raise StartError(f"--token-file {path}: the token must be at least 16 characters")
    return token


def bearer_only(app: Any, token: str) -> Any:
    """Every HTTP request needs `Authorization: Bearer <token>`; anything else is a 401 that
    never reaches the SDK (nor an upstream)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not secrets.compare_digest(given, expected):
                body = b'{"error": "unauthenticated"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def host_app(proxy: Proxy, token: str, host: str) -> Any:
    """The SDK's streamable HTTP app for the proxy's server, behind the bearer check, with
    the sessions it keeps bounded (`max_sessions`: a new one beyond it is refused 503 by the
    SDK; one idle for `session_idle_seconds` is closed)."""
    table = proxy.config.proxy
    app = proxy.server.streamable_http_app(
        host=host,
        max_sessions=table.max_sessions,
        session_idle_timeout=table.session_idle_seconds,
    )
    return bearer_only(app, token)


#: File descriptors an upstream may hold (a stdio server's pipes, an HTTP one's connections).
_FDS_PER_SERVER = 8
#: uvicorn's backlog is also how many connections asyncio's loop accepts at once, before any
#: is counted against the bounds: 300 at once under `ulimit -n 256` ran the door out of file
#: descriptors below its cap, and asyncio logged a traceback per retry (723 KB). A burst
#: within the descriptors kept back (`SPARE_FDS`) cannot.
ACCEPT_BURST = SPARE_FDS // 2


def host_server(
    proxy: Proxy, token: str, listen: str, say: Callable[[str], None]
) -> DrainingServer:
    """uvicorn for hosts, with the gateway's bounds on strangers before the token is read
    (`front.protocol`), no websocket upgrades, uvicorn's records through the door's one-line
    handler (`say`), and the doors' drain (`front.drain`)."""
    host, _ = split_address(listen)
    reserved = SPARE_FDS + _FDS_PER_SERVER * len(proxy.config.servers)
    config = door_config(
        host_app(proxy, token, host),
        listen,
        proxy.config.proxy,
        reserved=reserved,
        drain_seconds=proxy.clock.real(_longest_budget(proxy)),
        backlog=ACCEPT_BURST,
        say=say,
    )
    return DrainingServer(config, on_drain=proxy.stop_taking_calls, end_calls=proxy.end_calls)


async def serve_http(
    proxy: Proxy, listen: str, token_file: str, say: Callable[[str], None]
) -> None:
    token = read_host_token(token_file)
    await host_server(proxy, token, listen, say).serve()
