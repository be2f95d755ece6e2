"""What both doors' starts share: the refusal to start, the listen addresses, the feed's
tokens and the `--events` trace file.

The gateway (`front.gateway.server`) and the MCP proxy (`front.mcp.serve`) each start their own
way; these are the steps where they must refuse and answer alike.
"""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path
from typing import Protocol

from breakerdeck.engine.feed.client import FeedError, read_token
from breakerdeck.engine.storage import statedir
from breakerdeck.engine.storage.tracefile import TraceFile

VIEWER_TOKEN_FILE = "viewer.token"
OPERATOR_TOKEN_FILE = "operator.token"
_LOOPBACK_NAMES = frozenset({"localhost"})


class StartError(Exception):
    """A door cannot start as asked: the message says why (exit 2)."""


class TokenFiles(Protocol):
    """The feed's token files a door's options name (each `None` for one in the state dir)."""

    @property
    def viewer_token_file(self) -> str | None: ...

    @property
    def operator_token_file(self) -> str | None: ...


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_feed(feed_listen: str | None, state_dir: Path | None) -> None:
    """The feed's tokens live in the state dir: a feed without one cannot start."""
    if feed_listen is not None and state_dir is None:
        raise StartError("the feed needs a state dir (for its tokens): pass --state-dir")


def feed_tokens(options: TokenFiles, state_dir: Path) -> tuple[str, str]:
    """(viewer, operator) as `serve` has them: the files given, else made in the state dir."""
    tokens = []
    for given, name in (
        (options.viewer_token_file, VIEWER_TOKEN_FILE),
        (options.operator_token_file, OPERATOR_TOKEN_FILE),
    ):
        path = Path(given) if given else state_dir / name
        if not given and not path.exists():
            statedir.write_private(path, secrets.token_urlsafe(32) + "\n")
        try:
            tokens.append(read_token(path))
        except FeedError as error:
            raise StartError(str(error)) from None
    if secrets.compare_digest(tokens[0], tokens[1]):
        raise StartError("the viewer and operator tokens must differ")
    return tokens[0], tokens[1]


def open_trace(path: Path | None) -> TraceFile | None:
    """`--events FILE`, opened before anything starts: a file that cannot be written stops
    the start, as a bad config does."""
    if path is None:
        return None
    try:
        return TraceFile(path)
    except OSError as error:
        raise StartError(f"cannot write the trace to {path}: {error.strerror or error}") from None
