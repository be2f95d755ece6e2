"""What the proxy was asked to run (`McpOptions`: the doors' options and its own) and what it
refuses before it binds or writes anything (`check_start`, which `--check-config` runs too).

Kept apart from `front.mcp.serve`, so that checking a config imports neither the MCP SDK nor a
server.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from breakerdeck.engine.front.mcp.settings.config import ProxyConfig
from breakerdeck.engine.front.options import DoorOptions, check_bind
from breakerdeck.engine.front.serving import StartError, check_feed


@dataclass(frozen=True, slots=True, kw_only=True)
class McpOptions(DoorOptions):
    """The doors' options (`DoorOptions`) and the proxy's own."""

    config: ProxyConfig
    http_listen: str | None = None
    token_file: str | None = None


def say(message: str) -> None:
    print(f"breakerdeck mcp: {message}", file=sys.stderr, flush=True)


def check_start(options: McpOptions) -> None:
    """Everything the start refuses before it binds or writes anything; `--check-config` runs
    this same check."""
    if options.http_listen is not None and not options.token_file:
        raise StartError("--http needs --token-file FILE: the bearer token hosts must send")
    # A host's bearer token and its tools' answers cross each of these.
    listens = (options.http_listen, options.metrics_listen, options.feed_listen)
    tls = options.config.proxy.tls_cert is not None
    check_bind(listens, "proxy", tls, options.insecure_bind)
    check_feed(options.feed_listen, options.state_dir)
