"""Where an agent's request goes: `base_url`'s scheme, host and port, whatever the path says
(one rule for the HTTP gateway and the in-process `Gateway`).

The agent's `<path>` is taken from the raw request target (still percent-encoded, as it came)
and appended to `base_url`'s own path; the authority is never parsed out of the agent's text,
so `//evil`, `@evil`, `%2F%2F` and an absolute-form target are only path characters. Dot
segments (`.`, `..`, also percent-encoded) are resolved inside the agent's part, so `..` cannot
climb above `base_url`'s path either.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlsplit

PREFIX = b"/p/"


@dataclass(frozen=True, slots=True)
class Base:
    """A platform's `base_url`, split once at start."""

    origin: str  # scheme://host[:port]
    path: str  # without a trailing slash ("" for the root)

    @classmethod
    def parse(cls, url: str) -> Base:
        parts = urlsplit(url)
        return cls(f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/"))


def split_target(raw_path: bytes) -> tuple[str, bytes] | None:
    """`/p/<platform>/<rest>` as (platform, `/<rest>` or b""), or None for any other path."""
    if not raw_path.startswith(PREFIX):
        return None
    platform, slash, rest = raw_path[len(PREFIX) :].partition(b"/")
    try:
        name = platform.decode("ascii")
    except UnicodeDecodeError:
        return None
    return name, slash + rest


def upstream_url(base: Base, rest: bytes, query: bytes) -> str:
    """The URL the platform gets: `base.origin` + `base.path` + the agent's resolved path."""
    path = _resolve(rest.decode("latin-1"))
    url = base.origin + base.path + path
    if not base.path and not path:
        url += "/"
    return f"{url}?{query.decode('latin-1')}" if query else url


def _resolve(path: str) -> str:
    """Dot segments removed (RFC 3986 section 5.2.4) within the agent's part only."""
    if not path:
        return ""
    kept: list[str] = []
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        dots = unquote_to_bytes(segment)
        if dots == b".":
            if last:
                kept.append("")
        elif dots == b"..":
            if kept:
                kept.pop()
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept) if kept else "/"
