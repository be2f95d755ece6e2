"""The shared store's URL (DESIGN, "Replicas", "High availability"), read without Redis: the
gateway's configuration checks it and the store connects by it, from one reading.

`redis://host:port/db` and `rediss://` (TLS), with `valkey://` and `valkeys://` as their
names for a Valkey server; `redis+sentinel://host:port[,host:port…]/<service>[/<db>]` for a
primary found through Sentinel; `redis+cluster://host:port[,host:port…]` for a Redis Cluster.
A password never comes in the URL (it would show in process lists and logs), and no message
repeats a URL that carried one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["redis", "sentinel", "cluster"]

#: Each scheme: the kind of store it names and whether it speaks TLS.
SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis": ("redis", False),
    "rediss": ("redis", True),
    "valkey": ("redis", False),
    "valkeys": ("redis", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
}
_DEFAULT_PORT: dict[Kind, int] = {"redis": 6379, "sentinel": 26379, "cluster": 6379}
PASSWORD_IN_URL = (
    "a password in the URL is refused (it would show in process lists and logs): "
    "give it with password_env or password_file in [shared]"
)
_EXPECTED = (
    "expected redis://, rediss://, valkey://, valkeys:// (host:port/db), "
    "redis+sentinel://host:port[,host:port…]/<service>[/<db>] or "
    "redis+cluster://host:port[,host:port…]"
)


@dataclass(frozen=True, slots=True)
class StoreUrl:
    kind: Kind
    tls: bool
    nodes: tuple[tuple[str, int], ...]
    db: int
    #: The Sentinel service (the name the sentinels monitor the primary by).
    service: str = ""

    def where(self) -> str:
        """What a message may show of the store: its nodes, never a password."""
        nodes = ",".join(f"{host}:{port}" for host, port in self.nodes)
        if self.kind == "sentinel":
            return f"sentinel {nodes}/{self.service}/{self.db}"
        if self.kind == "cluster":
            return f"cluster {nodes}"
        return f"{nodes}/{self.db}"

    def redis_url(self) -> str:
        """The first node as redis-py's plain URL (`valkey://` read as `redis://`)."""
        host, port = self.nodes[0]
        return f"{'rediss' if self.tls else 'redis'}://{_bracketed(host)}:{port}/{self.db}"


def parse_store_url(value: str) -> StoreUrl:
    """The URL, checked; `ValueError` says what is wrong, quoting the URL only when it carries
    no password."""
    scheme, sep, rest = value.partition("://")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        raise ValueError(PASSWORD_IN_URL)
    found = SCHEMES.get(scheme.lower()) if sep else None
    if found is None or not hosts:
        raise ValueError(f"{_EXPECTED}, got {value!r}")
    if "?" in rest or "#" in rest:
        raise ValueError(f"{value!r}: no query or fragment (timeout_ms sets the timeout)")
    kind, tls = found
    nodes = tuple(_node(part, _DEFAULT_PORT[kind], value) for part in hosts.split(","))
    if kind == "redis" and len(nodes) > 1:
        raise ValueError(f"{value!r}: one host for {scheme}:// (redis+sentinel:// takes several)")
    segments = [segment for segment in path.split("/") if segment]
    service = ""
    if kind == "sentinel":
        if not segments:
            raise ValueError(f"{value!r}: the Sentinel service name is missing, as in /mymaster")
        service = segments.pop(0)
    if kind == "cluster" and segments:
        raise ValueError(f"{value!r}: a cluster URL has no path (a cluster has database 0 only)")
    if len(segments) > 1 or (segments and not segments[0].isdigit()):
        raise ValueError(f"{value!r}: the path is the database number, as in /0")
    return StoreUrl(kind, tls, nodes, int(segments[0]) if segments else 0, service)


def _node(text: str, default_port: int, url: str) -> tuple[str, int]:
    if text.startswith("["):  # an IPv6 address
        host, _, tail = text[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else tail
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ValueError(f"{url!r}: a host is missing")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{url!r}: port {port_text!r} is not a port number")
    return host, int(port_text)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
