"""Who may reach `breakerdeck web`: the checks textual-serve does not make, as aiohttp middleware
in front of every one of its routes (the page, the websocket, the static files, downloads).

In order, before any handler runs (so before any console process starts):

1. **Host** must be the public URL's: a page on `evil.example` whose name was re-pointed at
   this machine (DNS rebinding) reaches the server with its own name in `Host`, and is refused.
2. **Origin**, when the browser sends one (it always does on a websocket, which must have it),
   must be the public URL's: another site's page, even one on this machine's other ports (the
   same *site*, so a SameSite cookie goes along), cannot open a console.
3. **A token**: `?token=` on the page (answered with the cookie and a redirect that drops it
   from the address bar) or `Authorization: Bearer`, else the cookie set earlier. The cookie is
   HttpOnly (no script reads it), SameSite=Strict, Secure under TLS, and names the role the
   token earned with a MAC under a key made at start: a viewer cannot turn it into an
   operator's, and a restart logs everyone out.

Every answer, refusals too, carries headers that keep the page out of frames and caches, and a
content security policy that lets it load only from this server (textual-serve's page asks
for a font from Google's servers otherwise: a request to a third party on each open).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

from breakerdeck.console.web_role import Role

#: A refused request, said on the server's side (`breakerdeck web: refused: ADDRESS PATH: why`).
refused = logging.getLogger("refused")

COOKIE = "breakerdeck_web"
#: The request's key under which the role that got in is kept for the handlers.
ROLE_KEY = "breakerdeck.role"

#: The statuses this server refuses with (the guard's, and the cap's).
_REFUSALS = frozenset({401, 403, 421, 503})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_of(url: str) -> str:
    """`host[:port]` as a browser writes it in `Host`: the scheme's default port left out."""
    parts = urlsplit(url.lower())
    host = parts.netloc.rpartition("@")[2]
    if parts.port is not None and parts.port == _DEFAULT_PORTS.get(parts.scheme):
        host = host.rpartition(":")[0]
    return host


def origin_of(url: str) -> str:
    """`scheme://host[:port]` as a browser writes it in `Origin`."""
    return f"{urlsplit(url.lower()).scheme}://{host_of(url)}"


@dataclass(frozen=True)
class Guard:
    """The public URL the browsers use, the token of each role, and the cookie's key."""

    public_url: str
    tokens: Mapping[Role, str]
    secure: bool = False
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @property
    def origin(self) -> str:
        return origin_of(self.public_url)

    @property
    def host(self) -> str:
        return host_of(self.public_url)

    def role_of_token(self, presented: str) -> Role | None:
        for role, token in self.tokens.items():
            if secrets.compare_digest(presented.encode(), token.encode()):
                return role
        return None

    def cookie_for(self, role: Role) -> str:
        return f"{role}.{self._mac(role)}"

    def role_of_cookie(self, value: str) -> Role | None:
        role, _, mac = value.partition(".")
        for known in self.tokens:
            if role == known and secrets.compare_digest(mac, self._mac(known)):
                return known
        return None

    def _mac(self, role: str) -> str:
        return hmac.new(self.key, role.encode(), hashlib.sha256).hexdigest()

    def headers(self) -> dict[str, str]:
        websocket = ("wss://" if self.origin.startswith("https:") else "ws://") + self.host
        return {
            "Content-Security-Policy": (
                "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
                f"connect-src 'self' {websocket}; frame-ancestors 'none'; base-uri 'none'; "
                "form-action 'none'"
            ),
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        }

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await self._admit(request, handler)
        except web.HTTPException as refusal:
            if refusal.status in _REFUSALS:  # told on the server's side too: someone knocks
                why = (refusal.text or "").strip()
                # One line per reason per 10 s (engine.front.logs), the next saying how many
                # more: a knock is worth a line, 2,300 of them are worth one with a count.
                refused.warning(
                    "%s %s: %s", request.remote, request.path, why, extra={"repeat_kind": why}
                )
            refusal.headers.update(self.headers())
            raise
        response.headers.update(self.headers())
        return response

    async def _admit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.host.lower() != self.host:
            raise web.HTTPMisdirectedRequest(
                text=f"this console answers at {self.public_url} only\n"
            )
        origin = request.headers.get("Origin")
        websocket = request.headers.get("Upgrade", "").lower() == "websocket"
        if (origin is not None or websocket) and (origin or "").lower() != self.origin:
            raise web.HTTPForbidden(text=f"cross-origin request refused: {origin}\n")
        presented = request.query.get("token") or _bearer(request)
        if presented is not None:
            role = self.role_of_token(presented)
            if role is None:
                raise web.HTTPUnauthorized(text="that token opens nothing here\n")
            if "token" in request.query:
                raise self._remember(request, role)
        else:
            role = self.role_of_cookie(request.cookies.get(COOKIE, ""))
            if role is None:
                raise web.HTTPUnauthorized(
                    text=f"present a token: open {self.public_url}/?token=YOUR-TOKEN "
                    "(the viewer's or the operator's)\n"
                )
        request[ROLE_KEY] = role
        return await handler(request)

    def _remember(self, request: web.Request, role: Role) -> web.HTTPSeeOther:
        """The token becomes the cookie, and leaves the address bar (and the history)."""
        query = {k: v for k, v in request.query.items() if k != "token"}
        target = request.rel_url.with_query(query)
        response = web.HTTPSeeOther(location=str(target))
        response.set_cookie(
            COOKIE,
            self.cookie_for(role),
            httponly=True,
            samesite="Strict",
            secure=self.secure,
            path="/",
        )
        return response


def _bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
