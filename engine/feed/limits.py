"""What one feed allows its clients: connections, timeouts, keepalive and log repeats."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FeedLimits:
    """What one feed allows its clients; the defaults suit a handful of consoles per engine.

    Keep `max_connections` well under the process's file descriptor limit (`ulimit -n`,
    often 1024): the engine's state dir and the service need descriptors too.
    """

    #: Open connections at once; one more is refused at the handshake with HTTP 503.
    max_connections: int = 256
    #: Seconds between keepalive pings, and to wait for each pong (None: no keepalive).
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    #: Seconds a peer may take none of the bytes queued for it before it is disconnected.
    send_timeout: float = 20.0
    #: Bytes queued in a connection's socket buffer before sending waits (websockets').
    write_limit: int = 32 * 1024
    #: Seconds to complete the opening handshake, and the closing one (websockets').
    open_timeout: float = 10.0
    close_timeout: float = 10.0
    #: The same log line is written at most once per this many seconds (with a count).
    repeat_log_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if not self.send_timeout > 0:
            raise ValueError("send_timeout must be a positive number of seconds")
