"""Errors callers can act on; each message names what was wrong."""


class BreakerdeckError(Exception):
    pass


class UnknownKey(BreakerdeckError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown key"


class NotHeld(BreakerdeckError, ValueError):
    """A release of a breaker that is not held (on replicas: one the fleet no longer holds,
    released a moment ago elsewhere): nothing was changed."""


class VaultUnavailable(BreakerdeckError):
    """The gateway could not read the agent's credential: an upstream failure."""


class StateDirError(BreakerdeckError):
    """A state dir or a file in it cannot be trusted or used: the message says why and what
    to do. Raised at start, never from the call path."""
