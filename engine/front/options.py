"""The options both doors take, defined once: the file's keys behind them (`DoorTable`),
what the flags and the file decided (`DoorOptions`, from `front.arguments.door_fields`) and
the refusal to listen in the clear (`check_bind`).

The gateway (`[gateway]`, `front.gateway.cli`) and the MCP proxy (`[proxy]`, `front.mcp.cli`)
add their own on top: the gateway its agents' address, the shared store and the clock anchor;
the proxy its hosts' HTTP address and their token.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from breakerdeck.engine.front.serving import StartError, is_loopback, split_address

Address = Annotated[str, Field(min_length=3)]


def check_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """What one stranger may cost before its token is read (`[gateway]` keys, docs/gateway.md)."""

    head_bytes: int = 32 * 1024
    header_count: int = 100
    head_seconds: float = 10.0
    connections: int = 4096
    connections_per_address: int = 512


class StrangerBounds(BaseModel):
    """The keys bounding a stranger, in both doors' tables (`[gateway]`, `[proxy]`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    head_limit_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = 32 * 1024
    header_count_limit: Annotated[int, Field(ge=8, le=10_000)] = 100
    head_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0
    max_client_connections: Annotated[int, Field(ge=1, le=1_000_000)] = 4096
    max_client_connections_per_address: Annotated[int, Field(ge=1, le=1_000_000)] = 512

    def limits(self, reserved: int, say: Callable[[str], None]) -> ClientLimits:
        """The bounds, with the connection cap lowered to what the process's file descriptor
        limit leaves after the `reserved` ones (a cap the process cannot honour is no cap:
        `accept` would fail for everyone at once, a traceback each)."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        room = self.max_client_connections
        if soft != resource.RLIM_INFINITY:
            room = min(room, max(16, soft - reserved))
        if room < self.max_client_connections:
            say(
                f"client connections capped at {room} (the open-file limit is {soft}; "
                "raise it with ulimit -n to allow max_client_connections)"
            )
        return ClientLimits(
            head_bytes=self.head_limit_bytes,
            header_count=self.header_count_limit,
            head_seconds=self.head_timeout_seconds,
            connections=room,
            connections_per_address=min(room, self.max_client_connections_per_address),
        )


class DoorTable(StrangerBounds):
    """The keys of a door's own table (`[gateway]`, `[proxy]`) that every door reads alike,
    with what a stranger may cost before its token is read (`StrangerBounds`)."""

    state_dir: str | None = None
    feed_listen: Address | None = None
    metrics_listen: Address | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @field_validator("feed_listen", "metrics_listen")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else check_address(value)

    @model_validator(mode="after")
    def _tls_pair(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class DoorOptions:
    """What the command line and the file decided together (flags win), for every door."""

    config_path: Path
    state_dir: Path | None = None
    feed_listen: str | None = None
    metrics_listen: str | None = None
    speed: float = 1.0
    insecure_bind: bool = False
    viewer_token_file: str | None = None
    operator_token_file: str | None = None
    #: `--events FILE`: the headless trace's lines for every call and transition.
    events: Path | None = None


def check_bind(listens: Iterable[str | None], table: str, tls: bool, insecure: bool) -> None:
    """Loopback unless told otherwise: a non-loopback address needs TLS (`tls_cert` and
    `tls_key` in the door's `table`) or `--insecure-bind`, since tokens and answers would cross
    the network in the clear."""
    for listen in listens:
        if listen is None:
            continue
        host, _ = split_address(listen)
        if not is_loopback(host) and not tls and not insecure:
            raise StartError(
                f"refusing to listen on {host} without TLS: set tls_cert and tls_key in "
                f"[{table}], or pass --insecure-bind if a TLS proxy in front of it is yours"
            )
