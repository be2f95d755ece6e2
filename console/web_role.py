"""What a console that `breakerdeck web` started may do, and whose name its writes carry.

The web server starts each browser's console as a process of its own, with an environment it
builds from nothing (`console.web_service`); the role the browser's token earned and the actor
its resets are audited under reach the console there, beside textual-serve's own
`TEXTUAL_DRIVER`. Outside the web neither is set, and the console is what the command line made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ROLE_VARIABLE = "BREAKERDECK_WEB_ROLE"
ACTOR_VARIABLE = "BREAKERDECK_WEB_ACTOR"

Role = Literal["viewer", "operator"]
ROLES: tuple[Role, ...] = ("viewer", "operator")


@dataclass(frozen=True, slots=True)
class WebSession:
    role: Role
    #: `web:<the browser's address>`: the audit log tells a reset from the web from one typed
    #: in a terminal, and which browser sent it.
    actor: str

    @property
    def read_only(self) -> bool:
        return self.role != "operator"


def web_actor(peer: str | None) -> str:
    return f"web:{peer or 'unknown'}"


def session_environment(session: WebSession) -> dict[str, str]:
    return {ROLE_VARIABLE: session.role, ACTOR_VARIABLE: session.actor}


def web_session(environment: Mapping[str, str]) -> WebSession | None:
    """The session a web console runs for; None outside the web. A role the server never
    writes reads as a viewer's: whatever went wrong, it must not widen what the console does."""
    role = environment.get(ROLE_VARIABLE)
    if role is None:
        return None
    actor = environment.get(ACTOR_VARIABLE) or web_actor(None)
    return WebSession("operator" if role == "operator" else "viewer", actor)
