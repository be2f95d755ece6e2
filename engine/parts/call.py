"""One call's ticket: what a door holds from its first look at a call to the call's line."""

from __future__ import annotations


class Call:
    """One call's ticket, from the harness's first look at it to its `call.completed` line.

    The call's number is an integer; its printed id (`call-000042`) is formatted only when a
    line or an Idempotency-Key needs it."""

    __slots__ = (
        "admitted_as",
        "admitted_seq",
        "admitted_wall",
        "agent",
        "attempts",
        "deadline_seconds",
        "key",
        "number",
        "platform",
        "tool",
    )

    def __init__(
        self, number: int, key: str, agent: str, platform: str, tool: str, deadline: float
    ) -> None:
        self.number = number
        self.key = key
        self.agent = agent
        self.platform = platform
        self.tool = tool
        self.deadline_seconds = deadline
        self.attempts = 0
        self.admitted_wall: float | None = None
        self.admitted_as: str | None = None
        self.admitted_seq: int | None = None

    @property
    def call_id(self) -> str:
        return call_id(self.number)


def call_id(number: int) -> str:
    """A call's number as lines and Idempotency-Keys print it."""
    return f"call-{number:06d}"
