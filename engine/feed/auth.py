"""Who a feed connection is: the bearer token in its handshake names its role (viewer or
operator), or the handshake is refused."""

from __future__ import annotations

import hmac
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from breakerdeck.engine.feed import protocol as p

VIEWER: p.Role = "viewer"
OPERATOR: p.Role = "operator"


class Tokens:
    """The feed's two tokens; both are always required, and they must differ."""

    def __init__(self, viewer_token: str, operator_token: str) -> None:
        for name, token in (("viewer_token", viewer_token), ("operator_token", operator_token)):
            if not isinstance(token, str) or not token.strip():
                raise ValueError(f"{name} must be a non-empty string: tokens are always required")
        if hmac.compare_digest(viewer_token.encode(), operator_token.encode()):
            raise ValueError("the viewer and operator tokens must differ")
        self._tokens = ((viewer_token.encode(), VIEWER), (operator_token.encode(), OPERATOR))

    def admit(self, connection: ServerConnection, request: Request) -> p.Role | Response:
        """The role the handshake's token names, or the response that refuses it."""
        if len(request.headers.get_all("Authorization")) > 1:
            return connection.respond(
                HTTPStatus.BAD_REQUEST,
                "More than one Authorization header: send exactly one, "
                "'Authorization: Bearer <viewer or operator token>'.\n",
            )
        role = self.role_for(request.headers)
        if role is None:
            response = connection.respond(
                HTTPStatus.UNAUTHORIZED,
                "Missing or wrong token: send 'Authorization: Bearer <viewer or operator token>'"
                " in the websocket handshake.\n",
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="breakerdeck"'
            return response
        return role

    def role_for(self, headers: Headers) -> p.Role | None:
        value = headers.get("Authorization", "")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        presented = token.strip().encode()
        role: p.Role | None = None
        for expected, name in self._tokens:
            # Compare against both, always, so timing does not tell which one was close.
            if hmac.compare_digest(presented, expected):
                role = name
        return role
