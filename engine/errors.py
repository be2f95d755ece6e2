"""Errors callers can act on; each message names what was wrong."""


class BreakerdeckError(Exception):
    pass


class UnknownKey(BreakerdeckError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown key"


class VaultUnavailable(BreakerdeckError):
    """The gateway could not read the agent's credential: an upstream failure."""
