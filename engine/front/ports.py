"""Every port a command listens on, taken or checked before it says anything.

A door that announced its feed (`feed on …`, `watch it: …`) and then found its own port taken
sent its user to a feed that was about to go; one whose second port was taken named the first.
So each command asks here, before its first line, for each address it will listen on: the one
it serves on is bound now and handed to the server; the others are bound and let go at once, a
check (a port taken between the check and the bind is reported by the server as before).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from breakerdeck.engine.front.serving import StartError, split_address


def bind(what: str, address: str) -> socket.socket:
    """A listening socket on HOST:PORT (SO_REUSEADDR, as uvicorn and asyncio bind), or a
    StartError naming `what` and the address."""
    host, port = split_address(address)
    try:
        return socket.create_server((host, port), family=_family(host))
    except OSError as error:
        reason = error.strerror or str(error)
        raise StartError(f"cannot listen on {address} ({what}): {reason}") from None


def check_free(addresses: Iterable[tuple[str, str | None]]) -> None:
    """Each (what, HOST:PORT) can be listened on now; port 0 always can. The first that
    cannot is a StartError naming it."""
    for what, address in addresses:
        if address is None or split_address(address)[1] == 0:
            continue
        bind(what, address).close()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
